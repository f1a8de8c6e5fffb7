"""Policy as data: the bundled default, versioning, validation errors, diff and TOML output."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from contextledger.errors import PolicyError
from contextledger.policy import (
    BudgetBucket,
    DropStep,
    Policy,
    PolicyChange,
    PolicySyntaxError,
    default_policy,
    load_policy,
    policy_diff,
    policy_from_mapping,
    policy_to_toml,
    render_diff,
)
from contextledger.policy.loader import default_policy_mapping
from contextledger.records.enums import (
    AuthorityLevel,
    ContextKind,
    FreshnessClass,
    PrivacyClass,
    PromotionPolicy,
    ToolCallStatus,
    Visibility,
)

DEFAULT_TOML = Path(__file__).parents[1] / "src" / "contextledger" / "policy" / "default.toml"


def test_default_policy_values() -> None:
    policy = default_policy()
    assert re.fullmatch(r"default@1\.0\.0\+sha256:[0-9a-f]{12}", policy.version)
    assert policy.budget.default_budget_tokens == 4000
    assert policy.budget.buckets.as_mapping() == {
        BudgetBucket.SYSTEM_RULES: 0.15,
        BudgetBucket.CURRENT_INPUT_TASK_STATE: 0.15,
        BudgetBucket.RECENT_TAIL: 0.2,
        BudgetBucket.RETRIEVAL: 0.275,
        BudgetBucket.TOOL_RESULTS: 0.15,
        BudgetBucket.LONG_TERM_MEMORY: 0.075,
    }
    assert policy.budget.bucket_tokens(4000) == {
        BudgetBucket.SYSTEM_RULES: 600,
        BudgetBucket.CURRENT_INPUT_TASK_STATE: 600,
        BudgetBucket.RECENT_TAIL: 800,
        BudgetBucket.RETRIEVAL: 1100,
        BudgetBucket.TOOL_RESULTS: 600,
        BudgetBucket.LONG_TERM_MEMORY: 300,
    }
    # flooring remainders go to the last bucket of the flow order (the recent tail)
    assert policy.budget.bucket_tokens(1001)[BudgetBucket.RECENT_TAIL] == 200 + 1
    assert sum(policy.budget.bucket_tokens(1001).values()) == 1001
    assert policy.budget.flow_order[-1] is BudgetBucket.RECENT_TAIL
    assert policy.budget.drop_order == (
        DropStep.LOW_CONFIDENCE_RETRIEVAL,
        DropStep.EXPIRED_MEMORY,
        DropStep.LARGE_TOOL_RESULTS_TO_REFS,
        DropStep.COMPRESS_OLD_HISTORY,
        DropStep.SHORTEN_RECENT_TAIL,
    )
    assert policy.budget.reserve_pinned_constraints_first is True
    assert (policy.recent_tail.min_turns, policy.recent_tail.max_share) == (2, 0.5)
    assert policy.authority.chain == tuple(AuthorityLevel)
    assert policy.authority.rank(AuthorityLevel.PROJECT) == 2
    assert policy.trace.keep_trace is False
    assert (policy.candidates.max_candidates, policy.candidates.recent_window) == (400, 200)


def test_default_freshness_privacy_rehydration_and_limits() -> None:
    policy = default_policy()
    fresh = policy.freshness
    assert [fresh.stale_after_seconds(c) for c in FreshnessClass] == [
        300,
        43200,
        86400,
        7776000,
        None,
    ]
    assert fresh.stale_after_seconds(FreshnessClass.DURABLE, "WebSearch") == 3600
    assert fresh.stale_after_seconds(FreshnessClass.VOLATILE, "Read") == 300
    assert fresh.mode_for("WebSearch") == "mark"

    privacy = policy.privacy
    assert privacy.allows_raw("openai-chat", PrivacyClass.USER_DATA) is True
    assert privacy.allows_raw("anthropic", PrivacyClass.INTERNAL) is True
    for provider in ("openai-chat", "anthropic", "some-other"):
        for cls in (
            PrivacyClass.GOOGLE_USER_DATA,
            PrivacyClass.OAUTH_DERIVED,
            PrivacyClass.SECRET_LIKE,
        ):
            assert privacy.allows_raw(provider, cls) is False
    assert privacy.allows_raw("some-other", PrivacyClass.PUBLIC) is True
    assert privacy.allows_raw("some-other", PrivacyClass.INTERNAL) is False
    assert privacy.when_in_doubt == "omit"

    rehydration = policy.rehydration
    assert (rehydration.byte_budget, rehydration.per_record_max_bytes) == (32768, 16384)
    assert rehydration.requested_exact("Use the EXACT csv from before") is True
    assert rehydration.requested_exact("前の結果をそのまま使って") is True
    assert rehydration.requested_exact("summarise the csv") is False

    assert policy.tool_output.limits_for("Bash") == (4096, 1024)
    assert policy.tool_output.limits_for("Read") == (8192, 2048)
    assert policy.recovery.protect_statuses == (
        ToolCallStatus.PENDING,
        ToolCallStatus.AWAITING_APPROVAL,
        ToolCallStatus.FAILED,
    )
    assert policy.visibility.model_run_state is Visibility.PARTICIPANT_PRIVATE
    assert policy.visibility.assistant_output is Visibility.BRANCH
    assert policy.visibility.child_subagent_artifacts is Visibility.AUDIT_ONLY
    assert policy.promotion.by_context_kind.for_kind(ContextKind.PROVENANCE) is (
        PromotionPolicy.NOT_PROMOTED
    )
    assert policy.retention.audit_only_in_model_context is False


def test_default_policy_is_cached_frozen_and_hashable() -> None:
    policy = default_policy()
    assert default_policy() is policy
    with pytest.raises(ValidationError):
        policy.budget.default_budget_tokens = 1  # type: ignore[misc]
    with pytest.raises(TypeError, match="immutable"):
        policy.privacy.routing["openai-chat"] = ()
    with pytest.raises(TypeError, match="immutable"):
        policy.tool_output.tools.pop("Read")
    same = policy_from_mapping({})
    assert same == policy and hash(same) == hash(policy)
    assert {policy: 1}[same] == 1


def test_version_is_sha256_of_canonical_json() -> None:
    policy = default_policy()
    canonical = json.dumps(
        policy.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:12]
    assert policy.version == f"default@1.0.0+sha256:{digest}"


def test_version_stable_across_loads(tmp_path: Path) -> None:
    text = "[budget]\ndefault_budget_tokens = 8000\n"
    (tmp_path / "a.toml").write_text(text, encoding="utf-8")
    (tmp_path / "b.toml").write_text("# a comment\n" + text, encoding="utf-8")
    first = load_policy(tmp_path / "a.toml")
    assert load_policy(tmp_path / "a.toml").version == first.version
    assert load_policy(tmp_path / "b.toml").version == first.version  # comments are not content
    assert first.version != default_policy().version
    complete = load_policy(DEFAULT_TOML, inherit_defaults=False)
    assert complete.version == default_policy().version


CHANGES: list[dict[str, Any]] = [
    {"policy": {"description": "edited"}},
    {"policy": {"semver": "1.0.1"}},
    {"budget": {"default_budget_tokens": 4001}},
    {"budget": {"buckets": {"retrieval": 0.25, "long_term_memory": 0.1}}},
    {"budget": {"reserve_pinned_constraints_first": False}},
    {"recent_tail": {"min_turns": 3}},
    {"freshness": {"stale_mode": "omit"}},
    {"freshness": {"stale_after": {"volatile": 301}}},
    {"freshness": {"tools": {"Bash": {"stale_after": 60}}}},
    {"privacy": {"routing": {"anthropic": ["public"]}}},
    {"rehydration": {"triggers": {"not_promoted": False}}},
    {"conflict": {"comparable_confidence_delta": 0.2}},
    {"recovery": {"max_failed_kept": 6}},
    {
        "authority": {
            "chain": [AuthorityLevel.USER.value]
            + [lvl.value for lvl in AuthorityLevel if lvl is not AuthorityLevel.USER]
        }
    },
    {"tool_output": {"max_bytes": 4097}},
    {"trace": {"keep_trace": True}},
]


def test_every_change_changes_the_version() -> None:
    versions = {policy_from_mapping(change).version for change in CHANGES}
    assert len(versions) == len(CHANGES)
    assert default_policy().version not in versions
    assert policy_from_mapping({"policy": {"semver": "1.0.1"}}).version.startswith(
        "default@1.0.1+sha256:"
    )


ERRORS: list[tuple[dict[str, Any], str, str]] = [
    (
        {"budget": {"buckets": {"recent_tail": 1.5}}},
        "budget.buckets.recent_tail",
        "must be between 0 and 1, got 1.5",
    ),
    ({"budget": {"bukets": {}}}, "budget.bukets", "unknown key"),
    ({"budgets": {}}, "budgets", "unknown key"),
    (
        {"budget": {"buckets": {"recent_tail": 0.3}}},
        "budget.buckets",
        "shares must sum to 1.0, got 1.100000",
    ),
    (
        {"budget": {"buckets": {"retrieval": "0.275"}}},
        "budget.buckets.retrieval",
        "expected a number, got str '0.275'",
    ),
    (
        {"budget": {"drop_order": ["expired_memory", "low_confidence_retrieval"]}},
        "budget.drop_order",
        "must list each drop step exactly once; missing "
        "['large_tool_results_to_refs', 'compress_old_history', 'shorten_recent_tail']",
    ),
    (
        {"budget": {"drop_order": [s.value for s in DropStep] + ["expired_memory"]}},
        "budget.drop_order",
        "duplicate entry 'expired_memory'",
    ),
    (
        {"budget": {"drop_order": ["drop_everything"]}},
        "budget.drop_order[0]",
        "must be one of 'low_confidence_retrieval', 'expired_memory', "
        "'large_tool_results_to_refs', 'compress_old_history' or 'shorten_recent_tail', "
        "got 'drop_everything'",
    ),
    (
        {"budget": {"default_budget_tokens": 0}},
        "budget.default_budget_tokens",
        "must be greater than 0, got 0",
    ),
    (
        {"budget": {"default_budget_tokens": "4000"}},
        "budget.default_budget_tokens",
        "expected an integer, got str '4000'",
    ),
    ({"budget": 5}, "budget", "expected a table, got int 5"),
    (
        {"authority": {"chain": ["system", "user"]}},
        "authority.chain",
        "must list each authority level exactly once; missing ['organization', 'project', "
        "'task_state', 'retrieval', 'long_term_memory', 'summary', 'old_conversation']",
    ),
    (
        {"recent_tail": {"max_share": 0.1}},
        "recent_tail.max_share",
        "must be at least budget.buckets.recent_tail (0.2), got 0.1",
    ),
    (
        {"freshness": {"stale_after": {"session": -5}}},
        "freshness.stale_after.session",
        "must be 0 or more seconds, or -1 for never, got -5",
    ),
    (
        {"freshness": {"tools": {"Bash": {"stale_afterr": 5}}}},
        "freshness.tools.Bash.stale_afterr",
        "unknown key",
    ),
    (
        {"freshness": {"stale_mode": "hide"}},
        "freshness.stale_mode",
        "must be one of 'mark' or 'omit', got 'hide'",
    ),
    (
        {"privacy": {"routing": {"openai-chat": ["public", "secret_like"]}}},
        "privacy.routing.openai-chat",
        "classes ['secret_like'] are listed in privacy.raw_denied",
    ),
    (
        {"privacy": {"routing": {"anthropic": ["public", "public"]}}},
        "privacy.routing.anthropic",
        "duplicate entry 'public'",
    ),
    (
        {"rehydration": {"per_record_max_bytes": 40000}},
        "rehydration.per_record_max_bytes",
        "must not exceed rehydration.byte_budget (32768), got 40000",
    ),
    (
        {"retention": {"audit_only_in_model_context": True}},
        "retention.audit_only_in_model_context",
        "must be false: audit_only records never reach model context",
    ),
    (
        {"trace": {"keep_trace": "yes"}},
        "trace.keep_trace",
        "expected true or false, got str 'yes'",
    ),
    (
        {"policy": {"semver": "v1"}},
        "policy.semver",
        "must be a semantic version like 1.2.3, got 'v1'",
    ),
    (
        {"tool_output": {"tools": {"Bash": {"max_bytes": -1}}}},
        "tool_output.tools.Bash.max_bytes",
        "must be greater than 0, got -1",
    ),
]


@pytest.mark.parametrize(("data", "key_path", "reason"), ERRORS)
def test_validation_error_names_the_key_path(
    data: dict[str, Any], key_path: str, reason: str
) -> None:
    with pytest.raises(PolicyError) as caught:
        policy_from_mapping(data, "custom.toml")
    assert caught.value.key_path == key_path
    assert caught.value.source == "custom.toml"
    assert str(caught.value) == f"custom.toml: {key_path}: {reason}"


def test_several_errors_are_all_reported() -> None:
    with pytest.raises(PolicyError) as caught:
        policy_from_mapping({"trace": {"keep_trace": 1, "extra": 2}, "budgets": 1}, "x")
    # errors are reported in section order; unknown sections come last
    assert caught.value.key_path == "trace.keep_trace"
    assert str(caught.value) == (
        "x: trace.keep_trace: expected true or false, got int 1; "
        "trace.extra: unknown key; budgets: unknown key"
    )


def test_missing_key_without_defaults() -> None:
    data = default_policy_mapping()
    del data["budget"]["buckets"]["retrieval"]
    with pytest.raises(PolicyError) as caught:
        policy_from_mapping(data, "full.toml", inherit_defaults=False)
    assert str(caught.value) == "full.toml: budget.buckets.retrieval: missing required key"


def test_unknown_key_in_a_file(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text("[budget]\nbukets = {}\n", encoding="utf-8")
    with pytest.raises(PolicyError) as caught:
        load_policy(path)
    assert str(caught.value) == f"{path}: budget.bukets: unknown key"


def test_toml_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text('[budget]\ndefault_budget_tokens = 4000\nflow_order = [\n  "a",,\n]\n')
    with pytest.raises(PolicySyntaxError) as caught:
        load_policy(path)
    assert (caught.value.line, caught.value.column) == (4, 7)
    assert caught.value.key_path is None
    assert str(caught.value) == (f"{path}: TOML syntax error at line 4, column 7: Invalid value")


def test_unreadable_and_non_utf8_files(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read policy file"):
        load_policy(tmp_path / "missing.toml")
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b'[policy]\ndescription = "caf\xe9"\n')
    with pytest.raises(PolicyError) as caught:
        load_policy(bad)
    assert str(caught.value) == f"{bad}: policy file is not UTF-8 (byte 27)"


def test_policy_diff_and_render() -> None:
    a = default_policy()
    b = policy_from_mapping(
        {
            "budget": {"default_budget_tokens": 8000},
            "freshness": {"stale_mode": "omit", "tools": {"Bash": {"stale_after": 60}}},
            "privacy": {"routing": {"anthropic": ["public"]}},
        }
    )
    changes = policy_diff(a, b)
    assert changes == [
        PolicyChange(key_path="budget.default_budget_tokens", old=4000, new=8000),
        PolicyChange(key_path="freshness.stale_mode", old="mark", new="omit"),
        PolicyChange(key_path="freshness.tools.Bash.stale_after", old=None, new=60),
        PolicyChange(
            key_path="privacy.routing.anthropic",
            old=["public", "internal", "user_data"],
            new=["public"],
        ),
    ]
    assert render_diff(changes) == (
        "budget.default_budget_tokens: 4000 -> 8000\n"
        'freshness.stale_mode: "mark" -> "omit"\n'
        "freshness.tools.Bash.stale_after: (unset) -> 60\n"
        'privacy.routing.anthropic: ["public", "internal", "user_data"] -> ["public"]'
    )
    assert policy_diff(a, a) == []
    assert render_diff([]) == "(no changes)"
    assert [c.key_path for c in policy_diff(b, a)] == [c.key_path for c in changes]


def test_policy_to_toml_round_trips_and_is_deterministic() -> None:
    policy = policy_from_mapping(
        {
            "policy": {"description": 'quotes " and \\ and 日本語'},
            "freshness": {
                "tools": {"Bash": {"stale_mode": "omit"}, "mcp.tool": {"stale_after": 5}}
            },
        }
    )
    text = policy_to_toml(policy)
    assert text.startswith(f'# version: {policy.version}\n[policy]\nname = "default"\n')
    assert '[freshness.tools."mcp.tool"]\nstale_after = 5\n' in text
    assert '[freshness.tools.Bash]\nstale_mode = "omit"\n' in text
    loaded = policy_from_mapping(tomllib.loads(text), "shown", inherit_defaults=False)
    assert loaded == policy and loaded.version == policy.version

    reordered = default_policy_mapping()
    reordered["privacy"]["routing"] = dict(reversed(list(reordered["privacy"]["routing"].items())))
    same = policy_from_mapping(reordered, inherit_defaults=False)
    assert same.version == default_policy().version
    assert policy_to_toml(same) == policy_to_toml(default_policy())


def test_policy_model_requires_every_section() -> None:
    assert set(Policy.model_fields) == set(default_policy_mapping())
