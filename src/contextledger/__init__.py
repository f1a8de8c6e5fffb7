"""contextledger: a durable runtime graph for tool-using agents and policy-based context
assembly with recorded, explainable ContextAssemblies.

The public API is re-exported here; everything else is internal and may change.  The
names are resolved on first use (PEP 562), so ``import contextledger`` loads neither the
store, the assembler nor the tokenizer until a program touches them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from contextledger.errors import (
    BackendError,
    ContextLedgerError,
    ImportFormatError,
    InputError,
    IntegrityError,
    NotFoundError,
    PolicyError,
    ProviderSerializationError,
    ScopeError,
    StoredDataError,
)

if TYPE_CHECKING:
    from contextledger.assembly.assembler import ASSEMBLER_VERSION, AssemblyResult
    from contextledger.ingest.loader import ImportResult
    from contextledger.ingest.recorder import Recorder, ToolCallSpec
    from contextledger.ledger import DEFAULT_TENANT, Ledger
    from contextledger.policy.loader import default_policy, load_policy
    from contextledger.policy.model import Policy
    from contextledger.providers.base import NeutralRequest, ToolSchema, WireMessage
    from contextledger.providers.registry import count_payload_tokens, serialize, validate_payload
    from contextledger.store.base import Scope

__version__ = "0.1.0"

_LAZY: dict[str, str] = {
    "ASSEMBLER_VERSION": "contextledger.assembly.assembler",
    "AssemblyResult": "contextledger.assembly.assembler",
    "ImportResult": "contextledger.ingest.loader",
    "Recorder": "contextledger.ingest.recorder",
    "ToolCallSpec": "contextledger.ingest.recorder",
    "DEFAULT_TENANT": "contextledger.runtime",
    "Ledger": "contextledger.ledger",
    "default_policy": "contextledger.policy.loader",
    "load_policy": "contextledger.policy.loader",
    "Policy": "contextledger.policy.model",
    "NeutralRequest": "contextledger.providers.base",
    "ToolSchema": "contextledger.providers.base",
    "WireMessage": "contextledger.providers.base",
    "count_payload_tokens": "contextledger.providers.registry",
    "serialize": "contextledger.providers.registry",
    "validate_payload": "contextledger.providers.registry",
    "Scope": "contextledger.store.base",
}
"""Public name → the module that defines it (imported on first access)."""


def __getattr__(name: str) -> Any:
    """Resolve a public name on first access and cache it on the package."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'contextledger' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "ASSEMBLER_VERSION",
    "DEFAULT_TENANT",
    "AssemblyResult",
    "BackendError",
    "ContextLedgerError",
    "ImportFormatError",
    "ImportResult",
    "InputError",
    "IntegrityError",
    "Ledger",
    "NeutralRequest",
    "NotFoundError",
    "Policy",
    "PolicyError",
    "ProviderSerializationError",
    "Recorder",
    "Scope",
    "ScopeError",
    "StoredDataError",
    "ToolCallSpec",
    "ToolSchema",
    "WireMessage",
    "__version__",
    "count_payload_tokens",
    "default_policy",
    "load_policy",
    "serialize",
    "validate_payload",
]
