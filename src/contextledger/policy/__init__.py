"""Policy as data (seed 000 §4.5, §5.6, §7) and the authority chain and rules (seed 001 §4.2,
§6 problem 4, §9).

* :mod:`.model` / :mod:`.loader` / :mod:`.diff`: the frozen, versioned :class:`Policy`,
  loaded from TOML (bundled default: ``contextledger/policy/default.toml``).
* :mod:`.authority`: the authority chain and conflict resolution.
* :mod:`.rules`: :class:`Rule` records and project rule files.
* :mod:`.constraints`: user constraints, injection and pre-execution enforcement.
"""

from contextledger.policy.authority import (
    DEFAULT_AUTHORITY_CHAIN,
    AuthorityResolution,
    RuleConflict,
    SourceKind,
    authority_for_source,
    authority_rank,
    cap_authority,
    resolve_authority,
)
from contextledger.policy.constraints import (
    Violation,
    check_tool_call,
    extract_user_constraints,
    rules_for_context,
    touched_paths,
)
from contextledger.policy.diff import PolicyChange, policy_diff, policy_to_toml, render_diff
from contextledger.policy.loader import (
    PolicySyntaxError,
    default_policy,
    load_policy,
    policy_from_mapping,
)
from contextledger.policy.model import BudgetBucket, DropStep, Policy
from contextledger.policy.rules import Rule, RuleStrength, load_rule_files, parse_rule_text

__all__ = [
    "DEFAULT_AUTHORITY_CHAIN",
    "AuthorityResolution",
    "BudgetBucket",
    "DropStep",
    "Policy",
    "PolicyChange",
    "PolicySyntaxError",
    "Rule",
    "RuleConflict",
    "RuleStrength",
    "SourceKind",
    "Violation",
    "authority_for_source",
    "authority_rank",
    "cap_authority",
    "check_tool_call",
    "default_policy",
    "extract_user_constraints",
    "load_policy",
    "load_rule_files",
    "parse_rule_text",
    "policy_diff",
    "policy_from_mapping",
    "policy_to_toml",
    "render_diff",
    "resolve_authority",
    "rules_for_context",
    "touched_paths",
]
