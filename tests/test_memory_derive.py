"""derive_memory / render_memory_text / render_stale_marker on real tool results."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from conftest import real_data_dir
from contextledger.memory.derive import (
    artifact_ref_text,
    derive_memory,
    render_memory_text,
    render_stale_marker,
)
from contextledger.records.enums import (
    ContextKind,
    FreshnessClass,
    PrivacyClass,
    PromotionPolicy,
    RuntimeKind,
    Shape,
    ToolCallStatus,
    Visibility,
)
from contextledger.records.models import ToolArtifact
from contextledger.tokens import get_tokenizer

REAL = real_data_dir()
pytestmark = pytest.mark.skipif(not REAL.is_dir(), reason="real transcripts not available")
T0 = datetime(2026, 5, 3, 10, 0, tzinfo=UTC)


def _artifact(tool: str, args: str, raw: str, **over: Any) -> ToolArtifact:
    fields: dict[str, Any] = {
        "id": "art_1",
        "tenant_id": "t1",
        "conversation_id": "c1",
        "branch_id": "b1",
        "call_id": "call_1",
        "tool_name": tool,
        "arguments_json": args,
        "status": ToolCallStatus.SUCCEEDED,
        "sha256": hashlib.sha256(raw.encode()).hexdigest(),
        "size_bytes": len(raw.encode()),
        "seq": 7,
        "observed_at": T0,
        "created_at": T0,
    }
    fields.update(over)
    return ToolArtifact(**fields)


def _moto_log() -> str:
    data = json.loads((REAL / "adp-swe-smith/getmoto__moto.694ce1f4.pr_6055.json").read_text())
    return str(data["messages"][57]["content"])


def test_derive_failed_test_run_keeps_shape_and_provenance() -> None:
    raw = _moto_log()
    command = "cd /testbed && python -m pytest tests/test_athena/test_athena.py -v"
    art = _artifact(
        "bash",
        json.dumps({"command": command}),
        raw,
        owner_participant_id="p1",
        visibility_scope=Visibility.PARTICIPANT_PRIVATE,
        privacy_class=PrivacyClass.USER_DATA,
    )
    mem = derive_memory(art, raw, id="mem_1")
    assert mem.source_artifact_ids == ("art_1",) and mem.call_id == "call_1"
    assert mem.source_tool == "bash" and mem.status == ToolCallStatus.SUCCEEDED
    assert mem.shape == Shape.STRUCTURED and mem.freshness_class == FreshnessClass.SESSION
    assert mem.subject_key == f"test:{command}"
    assert list(mem.payload)[:7] == [
        "command",
        "status",
        "error",
        "file",
        "test",
        "artifact",
        "next_step",
    ]
    assert mem.payload["artifact"] == "art_1"
    assert mem.payload["extractor"] == "test_run"
    assert mem.payload["sha256"] == art.sha256 and mem.payload["size_bytes"] == 7542
    assert mem.stale_after == T0 + timedelta(hours=12)
    assert mem.observed_at == T0 and mem.created_at == T0
    ref = mem.provenance_refs[0]
    assert (ref.artifact_id, ref.line_start, ref.line_end, ref.byte_start, ref.byte_end) == (
        "art_1",
        2,
        123,
        13,
        7542,
    )
    assert (mem.owner_participant_id, mem.visibility_scope, mem.privacy_class) == (
        "p1",
        Visibility.PARTICIPANT_PRIVATE,
        PrivacyClass.USER_DATA,
    )
    lines = mem.summary.splitlines()
    assert 1 <= len(lines) <= 3
    assert lines[0] == f"bash succeeded: tests: {command} → failed: 1 failed, 22 passed in 0.49s"
    # the artifact is named by its handle (a<seq>), never by its random id
    assert lines[-1].endswith(artifact_ref_text("a7", 7542))
    assert artifact_ref_text("a7", 7542) == "[artifact a7, 7,542 bytes]"
    assert "art_" not in mem.summary
    assert mem.token_count == get_tokenizer().count(render_memory_text(mem))
    assert mem.revalidation_tool == "bash"


def test_derive_failed_call_keeps_error_line_and_is_recovery() -> None:
    raw = "Exit code 127\nbash: line 1: pyhton: command not found"
    art = _artifact(
        "Bash", '{"command": "pyhton x.py"}', raw, status=ToolCallStatus.FAILED, is_error=True
    )
    mem = derive_memory(art, raw, id="mem_2")
    assert mem.context_kind == ContextKind.RECOVERY
    assert "bash: line 1: pyhton: command not found" in mem.summary
    assert mem.summary.startswith("Bash failed: $ pyhton x.py → exit 127 (command not found)")
    # the raw result is smaller than the summary: no artifact reference
    assert "[artifact" not in mem.summary


def test_derive_is_deterministic_and_promotion_follows_scope() -> None:
    raw = _moto_log()
    art = _artifact("bash", '{"command": "pytest"}', raw)
    assert derive_memory(art, raw, id="m") == derive_memory(art, raw, id="m")
    child = _artifact("bash", '{"command": "pytest"}', raw, runtime_kind=RuntimeKind.SUBAGENT_CHILD)
    assert derive_memory(child, raw, id="m").promotion_policy == PromotionPolicy.NOT_PROMOTED
    audit = _artifact("bash", '{"command": "pytest"}', raw, visibility_scope=Visibility.AUDIT_ONLY)
    assert derive_memory(audit, raw, id="m").promotion_policy == PromotionPolicy.AUDIT_ONLY


def test_freshness_overrides_in_derive() -> None:
    raw = '{"reservation_id": "JG7FMM", "cabin": "business"}'
    art = _artifact("get_reservation_details", '{"reservation_id": "JG7FMM"}', raw)
    assert derive_memory(art, raw, id="m").stale_after == T0 + timedelta(hours=24)
    over = derive_memory(
        art, raw, id="m", freshness_overrides={FreshnessClass.TIME_BOUNDED: timedelta(hours=1)}
    )
    assert over.stale_after == T0 + timedelta(hours=1)
    tool = derive_memory(
        art, raw, id="m", tool_freshness_overrides={"get_reservation_details": None}
    )
    assert tool.stale_after is None


def test_render_texts() -> None:
    raw = "\n".join(f"{i:6d}→line {i}" for i in range(1, 41))
    art = _artifact("Read", '{"file_path": "/src/a.py"}', raw)
    mem = derive_memory(art, raw, id="mem_r")
    text = render_memory_text(mem)
    assert text.splitlines()[0] == "[memory m7 · session · observed 2026-05-03T10:00Z]"
    assert text.splitlines()[1].startswith("Read succeeded: read /src/a.py lines 1-40 · ")
    marker = render_stale_marker(mem, T0 + timedelta(hours=13, minutes=5))
    assert marker.splitlines() == [
        "[stale memory m7 · Read · observed 13 h 5 min ago · stale since 1 h 5 min]",
        mem.summary.splitlines()[0],
        'revalidate: Read {"file_path": "/src/a.py"}',
    ]
    edit_args = json.dumps({"file_path": "/src/a.py", "old_string": "a = 1", "new_string": "a = 2"})
    edit = derive_memory(
        _artifact("Edit", edit_args, "The file /src/a.py has been updated."),
        "The file /src/a.py has been updated.",
        id="mem_e",
    )
    assert edit.shape == Shape.DIFF
    assert render_memory_text(edit).endswith("-a = 1\n+a = 2")
