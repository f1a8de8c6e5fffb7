"""Adapters for agent frameworks, each behind its own extra (imported lazily).

* :mod:`contextledger.adapters.openai_agents` — OpenAI Agents SDK (``agents``);
* :mod:`contextledger.adapters.langchain` — LangChain v1 agents (``langchain``);
* :mod:`contextledger.adapters.mcp` — an MCP server over the ledger (``mcp``).

The core never imports these modules; importing one without its extra raises an
:class:`ImportError` naming ``pip install 'contextledger[<extra>]'``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from datetime import datetime
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from contextledger.assembly.assembler import AssemblyResult
    from contextledger.ledger import Ledger
    from contextledger.policy.model import Policy
    from contextledger.store.base import Scope

__all__ = ["INSTRUCTIONS_MARGIN_TOKENS", "assemble_after_instructions", "instructions_tokens", "require"]

INSTRUCTIONS_MARGIN_TOKENS = 8
"""Tokens held back when a framework's own instructions are joined with the assembly's
system text (a join can tokenise a few tokens longer than its halves)."""


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` of an optional dependency.

    Raises:
        ImportError: the module is missing; the message names
            ``pip install 'contextledger[<extra>]'``.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise ImportError(f"{module!r} is not installed; this adapter needs pip install 'contextledger[{extra}]' (missing module {exc.name!r})") from exc


def instructions_tokens(instructions: str | None) -> int:
    """Tokens a framework's own instructions take in a request, as a leading system
    message (``3 + n("system") + n(text)``, o200k), plus :data:`INSTRUCTIONS_MARGIN_TOKENS`;
    0 for none."""
    if not instructions:
        return 0
    from contextledger.providers.counting import TOKENS_PER_MESSAGE
    from contextledger.tokens import get_tokenizer

    tok = get_tokenizer()
    return TOKENS_PER_MESSAGE + tok.count("system") + tok.count(instructions) + INSTRUCTIONS_MARGIN_TOKENS


def assemble_after_instructions(
    ledger: Ledger,
    conversation_id: str,
    instructions: str | None,
    *,
    budget_tokens: int,
    provider: str,
    scope: Scope,
    policy: Policy | None,
    now: Callable[[], datetime] | None,
) -> AssemblyResult:
    """Assemble (and record) the next request of ``conversation_id`` within what
    ``budget_tokens`` leaves after the framework's own ``instructions``
    (:func:`instructions_tokens`), which the adapter sends in front of the assembly's
    system text.

    Raises:
        InputError: the instructions alone use the whole budget.
    """
    from contextledger.errors import InputError

    reserve = instructions_tokens(instructions)
    if budget_tokens - reserve <= 0:
        raise InputError(f"budget_tokens {budget_tokens} leaves nothing after the agent's instructions ({reserve} tokens)")
    return ledger.assemble(
        conversation_id, provider=provider, budget_tokens=budget_tokens - reserve, scope=scope, policy=policy,
        now=now() if now is not None else None,
    )
