"""contextledger: a durable runtime graph for tool-using agents and policy-based context
assembly with recorded, explainable ContextAssemblies.

The public API is re-exported here; everything else is internal and may change.
"""

from contextledger.assembly.assembler import ASSEMBLER_VERSION, AssemblyResult
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
from contextledger.ingest.loader import ImportResult
from contextledger.ingest.recorder import Recorder, ToolCallSpec
from contextledger.ledger import DEFAULT_TENANT, Ledger
from contextledger.policy.loader import default_policy, load_policy
from contextledger.policy.model import Policy
from contextledger.providers.base import NeutralRequest, ToolSchema, WireMessage
from contextledger.providers.registry import count_payload_tokens, serialize, validate_payload
from contextledger.store.base import Scope

__version__ = "0.1.0"

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
