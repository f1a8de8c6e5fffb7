"""OpenAI Agents SDK adapter (extra ``agents``): a ledger-backed Session and a model-input
filter that swaps in the assembled context.

::

    from agents import Agent, RunConfig, Runner
    from contextledger import Ledger
    from contextledger.adapters.openai_agents import LedgerSession, ledger_input_filter

    ledger = Ledger.open()
    session = LedgerSession(ledger)                       # records every item as it is added
    config = RunConfig(call_model_input_filter=ledger_input_filter(ledger, budget_tokens=8000, session=session))
    result = await Runner.run(agent, "Fix the failing test", session=session, run_config=config)

* :class:`LedgerSession` implements the SDK's ``Session`` protocol over a
  :class:`~contextledger.ingest.responses_log.ResponsesLog`: ``add_items`` records each
  item as it is added, ``get_items`` returns the whole history unchanged (the latest
  ``limit`` items when asked, ``session_settings.limit`` by default), ``pop_item`` and
  ``clear_session`` are recorded branch moves — no record is deleted.
* :func:`ledger_input_filter` builds a ``RunConfig.call_model_input_filter``: before each
  model call it records what is new in the input (unless a :class:`LedgerSession` already
  did), assembles the conversation under the policy and budget (the assembly is recorded
  and explainable), and returns the assembled ``input`` items with the agent's
  instructions followed by the assembly's (rules, pinned user constraints).  The session
  keeps the full history; only the request is projected (seed 000 §5.3).

Ids: the assembled items carry no item ``id`` (the SDK de-duplicates items by id and
call id; an id names an item the API stored); call ids are the recorded ones, rewritten
only when the API would reject them.

Server-managed state: with ``conversation_id`` / ``previous_response_id`` the server
prepends its own copy of the history to whatever the filter returns, so a projection
cannot replace it; the filter refuses such runs (detected by a function-call output
whose call is not in the input) with :class:`~contextledger.errors.InputError`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from contextledger.adapters import assemble_after_instructions, require

require("agents", "agents")

from agents.memory.session_settings import (  # noqa: E402
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)
from agents.run_config import CallModelData, ModelInputData  # noqa: E402

from contextledger.errors import InputError  # noqa: E402
from contextledger.ingest.responses_log import ResponsesLog, item_kind  # noqa: E402
from contextledger.providers.registry import serialize  # noqa: E402
from contextledger.store.base import Scope  # noqa: E402

if TYPE_CHECKING:
    from contextledger.ledger import Ledger
    from contextledger.policy.model import Policy

__all__ = ["LedgerInputFilter", "LedgerSession", "as_item", "ledger_input_filter", "refuse_server_managed_input"]


def as_item(item: Any) -> dict[str, Any]:
    """A Responses item as a plain dict (the SDK passes dicts, or pydantic models from
    ``openai.types.responses``)."""
    if isinstance(item, Mapping):
        return dict(item)
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        return dict(dump(exclude_unset=True))
    raise InputError(f"not a Responses item: {type(item).__name__}")


class LedgerSession:
    """An Agents SDK ``Session`` whose history lives in a contextledger conversation.

    Args:
        ledger: the ledger.
        conversation_id: the conversation to continue; a new one is started when
            ``None``.  ``session_id`` is the conversation id.
        scope: the tenant scope (default tenant when ``None``).
        session_settings: the SDK's ``SessionSettings`` or its dict form (``limit``
            applies to ``get_items`` when no explicit limit is given).
        title / metadata: for a new conversation.

    Raises:
        TypeError: unknown session settings (as the SDK's own sessions).
        NotFoundError: ``conversation_id`` does not exist in ``scope``.
    """

    def __init__(
        self,
        ledger: Ledger,
        conversation_id: str | None = None,
        *,
        scope: Scope | None = None,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        title: str = "",
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        if conversation_id is None:
            self.log = ResponsesLog.start(ledger, scope=scope, title=title, metadata=metadata, actor="openai-agents session")
        else:
            ledger.store.get_conversation(scope or ledger.scope(), conversation_id)
            self.log = ResponsesLog(ledger, conversation_id, scope=scope, actor="openai-agents session")
        self.session_id: str = self.log.conversation_id
        self.session_settings: SessionSettings = coerce_session_settings(dict(session_settings) if isinstance(session_settings, Mapping) else session_settings) if session_settings is not None else SessionSettings()
        self._lock = threading.Lock()  # one writer at a time (the log caches item keys)

    @property
    def conversation_id(self) -> str:
        """The ledger conversation holding this session's history."""
        return self.log.conversation_id

    def _locked(self, fn: Callable[..., Any], *args: Any) -> Any:
        with self._lock:
            return fn(*args)

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The history, oldest first: every item exactly as added (the latest ``limit``
        when given, else ``session_settings.limit``, else all)."""
        n = resolve_session_limit(limit, self.session_settings)
        items: list[Any] = await asyncio.to_thread(self._locked, self.log.items, n)
        return items

    async def add_items(self, items: list[Any]) -> None:
        """Record ``items`` as the newest part of the history (each item once).

        Raises:
            InputError: a malformed item, or an output whose call was never added.
        """
        await asyncio.to_thread(self._locked, self.log.append, [as_item(i) for i in items])

    async def pop_item(self) -> Any | None:
        """Remove and return the newest item (``None`` when empty); recorded as a branch
        move, the record is kept."""
        return await asyncio.to_thread(self._locked, self.log.pop)

    async def clear_session(self) -> None:
        """Empty the history; recorded as a move to a new empty branch, nothing deleted."""
        await asyncio.to_thread(self._locked, self.log.clear)


class LedgerInputFilter:
    """A ``RunConfig.call_model_input_filter`` built by :func:`ledger_input_filter`.

    Attributes:
        assembly_ids: the id of every assembly made, in call order.
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        budget_tokens: int,
        provider: str,
        session: LedgerSession | None,
        conversation_id: str | None,
        scope: Scope | None,
        policy: Policy | None,
        now: Callable[[], datetime] | None,
    ) -> None:
        if budget_tokens <= 0:
            raise InputError(f"budget_tokens must be a positive number of tokens, got {budget_tokens}")
        self.ledger = ledger
        self.budget_tokens = budget_tokens
        self.provider = provider
        self.session = session
        self.scope = scope or (session.log.scope if session is not None else ledger.scope())
        self.policy = policy
        self.now = now
        self.assembly_ids: list[str] = []
        self._log: ResponsesLog | None = session.log if session is not None else (
            ResponsesLog(ledger, conversation_id, scope=self.scope, actor="openai-agents input filter") if conversation_id else None
        )
        self._lock = threading.Lock()

    @property
    def conversation_id(self) -> str | None:
        """The conversation assembled from (``None`` before the first call without a
        session or conversation id)."""
        return self._log.conversation_id if self._log is not None else None

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        """Record, assemble, and return the assembled model input (module docstring).

        Raises:
            InputError: server-managed conversation state, a budget smaller than the
                agent's instructions, a malformed item.
        """
        items = [as_item(i) for i in data.model_data.input]
        return await asyncio.to_thread(self._assemble, items, data.model_data.instructions)

    def _assemble(self, items: list[dict[str, Any]], instructions: str | None) -> ModelInputData:
        refuse_server_managed_input(items)
        with self._lock:
            log = self._log
            if log is None:
                log = self._log = ResponsesLog.start(self.ledger, scope=self.scope, actor="openai-agents input filter")
            if self.session is None:
                log.sync(items)
            else:
                # the session recorded the turn before this call; only items with an
                # identity (calls, outputs) are checked, so a session limit cannot
                # make a message look new
                with self.session._lock:
                    log.sync(items, identified_only=True)
        res = assemble_after_instructions(
            self.ledger, log.conversation_id, instructions, budget_tokens=self.budget_tokens, provider=self.provider,
            scope=self.scope, policy=self.policy, now=self.now,
        )
        self.assembly_ids.append(res.record.id)
        payload = res.payload if self.provider == "openai-responses" else serialize("openai-responses", res.request)
        joined = "\n\n".join(t for t in (instructions, payload.get("instructions")) if t)
        return ModelInputData(input=list(payload["input"]), instructions=joined or None)


def refuse_server_managed_input(items: Sequence[Mapping[str, Any]]) -> None:
    """Refuse an input that only continues a server-held history (module docstring).

    Raises:
        InputError: a ``function_call_output`` whose ``function_call`` is not in ``items``.
    """
    calls = {i.get("call_id") for i in items if item_kind(i) == "function_call"}
    for k, item in enumerate(items):
        if item_kind(item) == "function_call_output" and item.get("call_id") not in calls:
            raise InputError(
                f"input[{k}]: function_call_output {item.get('call_id')!r} follows no function_call in the model input; "
                "with server-managed conversation state (conversation_id / previous_response_id) the server prepends its own "
                "history, so the assembled context cannot replace it: run with a Session (LedgerSession) instead"
            )


def ledger_input_filter(
    ledger: Ledger,
    *,
    budget_tokens: int,
    provider: str = "openai-responses",
    session: LedgerSession | None = None,
    conversation_id: str | None = None,
    scope: Scope | None = None,
    policy: Policy | None = None,
    now: Callable[[], datetime] | None = None,
) -> LedgerInputFilter:
    """A ``RunConfig.call_model_input_filter`` that replaces the model input with the
    assembled context (module docstring; seed 000 §5.3).

    Args:
        budget_tokens: o200k tokens for the instructions and input items together (the
            agent's tool schemas, sent by the SDK, come on top).
        provider: the format whose counting and privacy routing the assembly follows;
            the items returned are Responses items in every case (the SDK converts them
            for other model APIs).
        session: the :class:`LedgerSession` of the run: the filter assembles its
            conversation (and records only what the session does not hold yet).
        conversation_id: without a session, the conversation to record into and
            assemble from; a new one is started on the first call when ``None``.
        policy: the policy (default: the ledger's).
        now: the evaluation time of each assembly (default: the assembler's).

    Raises:
        InputError: a non-positive budget.
    """
    return LedgerInputFilter(
        ledger, budget_tokens=budget_tokens, provider=provider, session=session, conversation_id=conversation_id,
        scope=scope, policy=policy, now=now,
    )
