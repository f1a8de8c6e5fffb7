"""LangChain v1 agents adapter (extra ``langchain``): a middleware that records the agent's
messages and sends the model the assembled context instead of the whole history.

::

    from langchain.agents import create_agent
    from contextledger import Ledger
    from contextledger.adapters.langchain import LedgerMiddleware

    ledger = Ledger.open()
    agent = create_agent(model, tools, middleware=[LedgerMiddleware(ledger, budget_tokens=8000)])
    agent.invoke({"messages": [{"role": "user", "content": "Fix the failing test"}]})

:class:`LedgerMiddleware` is an ``AgentMiddleware``:

* ``wrap_model_call`` / ``awrap_model_call`` record the state's messages that are new
  (each once: a message by its LangChain ``id``, a tool call and its ``ToolMessage`` by
  the call id), assemble the conversation under the policy and budget (recorded,
  explainable), and call the handler with ``request.override(messages=<assembled>,
  system_message=<the agent's system prompt + the assembly's rules and pinned
  constraints>)``;
* ``after_model`` / ``aafter_model`` record the model's answer once it is in the state;
* the agent's state is never edited: it keeps every message (seed 000 §5.3, the request
  is a projection).

Messages map to records through the Responses item mapping
(:mod:`contextledger.ingest.responses_items`, :class:`~contextledger.ingest.responses_log.ResponsesLog`):
``HumanMessage`` → user, ``AIMessage`` → assistant text and one tool call per
``tool_calls`` entry, ``ToolMessage`` → the call's raw result (``status="error"`` marks a
failed call), ``SystemMessage`` → system.  The assembled request comes back as
``SystemMessage`` / ``HumanMessage`` / ``AIMessage`` / ``ToolMessage`` with the recorded
call ids; tool output is only ever in ``ToolMessage`` content.

:class:`ScriptedChatModel` is an offline tool-calling chat model for tests and examples.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from contextledger.adapters import require

require("langchain.agents", "langchain")

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from contextledger.adapters import assemble_after_instructions  # noqa: E402
from contextledger.errors import InputError  # noqa: E402
from contextledger.ingest.responses_log import ResponsesLog  # noqa: E402
from contextledger.providers.anthropic import parse_tool_input  # noqa: E402
from contextledger.providers.base import NeutralRequest  # noqa: E402
from contextledger.providers.openai_chat import image_placeholder, text_of  # noqa: E402
from contextledger.records.parts import ToolCallPart, ToolResultPart  # noqa: E402
from contextledger.store.base import Scope  # noqa: E402

if TYPE_CHECKING:
    from contextledger.ledger import Ledger
    from contextledger.policy.model import Policy

__all__ = ["LedgerMiddleware", "ScriptedChatModel", "from_neutral", "to_items"]


def _content_parts(message: BaseMessage) -> str | list[dict[str, Any]]:
    """A message's content as Responses input content (text, or text and image parts)."""
    blocks: list[dict[str, Any]] = [dict(b) for b in message.content_blocks]
    if all(b.get("type") == "text" for b in blocks):
        return message.text
    parts: list[dict[str, Any]] = []
    for b in blocks:
        kind = b.get("type")
        if kind == "text":
            parts.append({"type": "input_text", "text": b.get("text", "")})
        elif kind == "image" and b.get("url"):
            parts.append({"type": "input_image", "image_url": b["url"], "detail": "auto"})
        elif kind == "image" and b.get("base64"):
            parts.append({"type": "input_image", "image_url": f"data:{b.get('mime_type', 'image/png')};base64,{b['base64']}", "detail": "auto"})
        else:
            parts.append({"type": "input_text", "text": f"[{kind} block]"})
    return parts


def to_items(messages: Sequence[BaseMessage]) -> tuple[list[dict[str, Any]], list[str | None], set[str]]:
    """``(items, keys, failed_call_ids)``: LangChain messages as Responses items (module
    docstring), the identity key of each item (``lc:<message id>`` for message items,
    ``None`` — the call id — for calls and outputs), and the ids of calls whose
    ``ToolMessage`` has ``status="error"``.

    Raises:
        InputError: a message type that is not human, AI, tool or system.
    """
    items: list[dict[str, Any]] = []
    keys: list[str | None] = []
    failed: set[str] = set()
    for k, m in enumerate(messages):
        key = f"lc:{m.id}" if m.id else None
        if isinstance(m, HumanMessage | SystemMessage):
            items.append({"role": "user" if isinstance(m, HumanMessage) else "system", "content": _content_parts(m)})
            keys.append(key)
        elif isinstance(m, AIMessage):
            if m.text or not m.tool_calls:
                items.append({"type": "message", "role": "assistant", "content": m.text})
                keys.append(f"{key}:text" if key else None)
            for call in m.tool_calls:
                items.append({"type": "function_call", "call_id": call["id"] or f"{m.id}:{call['name']}", "name": call["name"], "arguments": json.dumps(call["args"], ensure_ascii=False)})
                keys.append(None)
        elif isinstance(m, ToolMessage):
            items.append({"type": "function_call_output", "call_id": m.tool_call_id, "output": m.text})
            keys.append(None)
            if m.status == "error":
                failed.add(m.tool_call_id)
        else:
            raise InputError(f"messages[{k}]: cannot record a {type(m).__name__}")
    return items, keys, failed


def _text(parts: Sequence[Any]) -> str:
    return "\n".join(t for t in map(text_of, parts) if t is not None)


def from_neutral(request: NeutralRequest) -> list[AnyMessage]:
    """The assembled request's messages as LangChain messages (system blocks excluded).

    ``user`` → ``HumanMessage``, ``assistant`` → ``AIMessage`` with ``tool_calls``
    (arguments parsed: a JSON object, ``{}`` for blank text, ``{"_raw": text}`` else; an
    assistant text followed by the same speaker's calls is one ``AIMessage``, as the
    model produced it), each result → ``ToolMessage`` (``status="error"`` for a failed
    call).  Speaker labels become ``name``.
    """
    out: list[AnyMessage] = []
    for m in request.messages:
        if m.role == "user":
            out.append(HumanMessage(content=_text(m.parts), name=m.name))
        elif m.role == "assistant":
            calls = [{"id": p.call_id, "name": p.tool_name, "args": parse_tool_input(p.arguments_json), "type": "tool_call"} for p in m.parts if isinstance(p, ToolCallPart)]
            text, last = _text(m.parts), out[-1] if out else None
            if calls and not text and isinstance(last, AIMessage) and not last.tool_calls and last.name == m.name:
                out[-1] = AIMessage(content=last.content, tool_calls=calls, name=m.name)  # one turn: its text, then its calls
            else:
                out.append(AIMessage(content=text, tool_calls=calls, name=m.name))
        else:
            for p in m.parts:
                if isinstance(p, ToolResultPart):
                    body = "\n".join([p.text or "", *(image_placeholder(i) for i in p.images)]).strip("\n")
                    out.append(ToolMessage(content=body, tool_call_id=p.call_id, status="error" if p.is_error else "success"))
    return out


class LedgerMiddleware(AgentMiddleware):
    """Record every message; send the model the assembled context (module docstring).

    Args:
        ledger: the ledger.
        budget_tokens: o200k tokens for the system message and messages together (the
            tool schemas the agent binds come on top).
        provider: the wire format whose counting and privacy routing the assembly
            follows (``"openai-chat"``, ``"anthropic"`` or ``"openai-responses"``).
        conversation_id: the conversation to record into; a new one is started on the
            first model call when ``None``.
        scope / policy / now: as for :meth:`contextledger.ledger.Ledger.assemble`.

    Attributes:
        assembly_ids: every assembly made, in call order.

    Raises:
        InputError: a non-positive budget.
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        budget_tokens: int,
        provider: str = "openai-chat",
        conversation_id: str | None = None,
        scope: Scope | None = None,
        policy: Policy | None = None,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        super().__init__()
        if budget_tokens <= 0:
            raise InputError(f"budget_tokens must be a positive number of tokens, got {budget_tokens}")
        self.ledger = ledger
        self.budget_tokens = budget_tokens
        self.provider = provider
        self.scope = scope or ledger.scope()
        self.policy = policy
        self.now = now
        self.assembly_ids: list[str] = []
        self._log = ResponsesLog(ledger, conversation_id, scope=self.scope, actor="langchain middleware") if conversation_id else None
        self._lock = threading.Lock()

    @property
    def conversation_id(self) -> str | None:
        """The conversation recorded into (``None`` before the first model call)."""
        return self._log.conversation_id if self._log is not None else None

    def _record(self, messages: Sequence[BaseMessage]) -> ResponsesLog:
        items, keys, failed = to_items(messages)
        with self._lock:
            if self._log is None:
                self._log = ResponsesLog.start(self.ledger, scope=self.scope, actor="langchain middleware")
            self._log.sync(items, keys=keys, failed_calls=failed)
            return self._log

    def _project(self, request: ModelRequest) -> ModelRequest:
        log = self._record(request.messages)
        agent_system = request.system_message.text if request.system_message is not None else ""
        res = assemble_after_instructions(
            self.ledger, log.conversation_id, agent_system, budget_tokens=self.budget_tokens, provider=self.provider,
            scope=self.scope, policy=self.policy, now=self.now,
        )
        self.assembly_ids.append(res.record.id)
        system = "\n\n".join(t for t in (agent_system, *res.request.system) if t.strip())
        return request.override(messages=from_neutral(res.request), system_message=SystemMessage(content=system) if system else None)

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        """Record, assemble, call the model with the assembled messages."""
        return handler(self._project(request))

    async def awrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]) -> ModelResponse:
        """As :meth:`wrap_model_call` (the ledger work runs in a worker thread)."""
        projected = await asyncio.to_thread(self._project, request)
        return await handler(projected)

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Record the model's answer (now in the state); the state is not changed."""
        self._record(state["messages"])
        return None

    async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """As :meth:`after_model`."""
        await asyncio.to_thread(self._record, state["messages"])
        return None


class ScriptedChatModel(GenericFakeChatModel):
    """An offline chat model that answers with scripted ``AIMessage`` objects in order
    (tool calls included) and records every message list it was called with.

    ``GenericFakeChatModel`` cannot bind tools; this one accepts ``bind_tools`` (the tools
    are ignored: the script decides what is called).  ``calls`` holds the messages of each
    call, in order.
    """

    calls: list[list[BaseMessage]] = []  # noqa: RUF012 - a pydantic field (each instance gets its own list)

    def __init__(self, responses: Sequence[AIMessage | str], **kwargs: Any) -> None:
        super().__init__(messages=iter(list(responses)), calls=[], **kwargs)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        """Accept the agent's tools (the script decides the calls)."""
        return self

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any) -> Any:
        self.calls.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any) -> Iterator[Any]:
        self.calls.append(list(messages))
        return super()._stream(messages, stop=stop, run_manager=run_manager, **kwargs)
