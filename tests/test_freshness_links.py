"""Freshness boundaries, file staleness, supersession/conflicts and provenance repair."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from contextledger.errors import InputError
from contextledger.memory.freshness import (
    DEFAULT_STALE_AFTER,
    age_text,
    is_stale,
    stale_after_for,
)
from contextledger.memory.links import (
    add_conflict,
    annotate_test_file_versions,
    conflict_marks,
    file_staleness,
    repair_provenance,
    resolve_write,
    select_current,
    supersede,
)
from contextledger.records.enums import (
    FreshnessClass,
    ProvenanceRank,
    ResolutionState,
    ToolCallStatus,
)
from contextledger.records.models import ProvenanceRef, ToolArtifact, ToolMemory

T0 = datetime(2026, 5, 3, 10, 0, tzinfo=UTC)
US = timedelta(microseconds=1)


def _mem(mid: str, seq: int, **over: Any) -> ToolMemory:
    fields: dict[str, Any] = {
        "id": mid,
        "tenant_id": "t1",
        "conversation_id": "c1",
        "branch_id": "b1",
        "seq": seq,
        "source_artifact_ids": (f"art_{mid}",),
        "source_tool": "Read",
        "summary": f"summary of {mid}",
        "observed_at": T0,
        "created_at": T0,
    }
    fields.update(over)
    return ToolMemory(**fields)


# --- freshness -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "ttl"),
    [
        (FreshnessClass.VOLATILE, timedelta(minutes=5)),
        (FreshnessClass.SESSION, timedelta(hours=12)),
        (FreshnessClass.TIME_BOUNDED, timedelta(hours=24)),
        (FreshnessClass.DURABLE, timedelta(days=90)),
    ],
)
def test_boundary_per_class(cls: FreshnessClass, ttl: timedelta) -> None:
    assert DEFAULT_STALE_AFTER[cls] == ttl
    deadline = stale_after_for(cls, T0)
    assert deadline == T0 + ttl
    mem = _mem("m", 1, freshness_class=cls, stale_after=deadline)
    assert is_stale(mem, T0 + ttl - US) is False
    assert is_stale(mem, T0 + ttl) is True
    assert is_stale(mem, T0 + ttl + US) is True


def test_permanent_never_stale_and_overrides() -> None:
    assert stale_after_for(FreshnessClass.PERMANENT, T0) is None
    mem = _mem("m", 1, freshness_class=FreshnessClass.PERMANENT, stale_after=None)
    assert is_stale(mem, T0 + timedelta(days=100_000)) is False
    over = {FreshnessClass.SESSION: timedelta(minutes=1)}
    assert stale_after_for(FreshnessClass.SESSION, T0, over) == T0 + timedelta(minutes=1)
    tools = {"Read": timedelta(seconds=30)}
    assert stale_after_for(FreshnessClass.SESSION, T0, over, "Read", tools) == T0 + timedelta(
        seconds=30
    )
    assert stale_after_for(FreshnessClass.SESSION, T0, over, "Grep", tools) == T0 + timedelta(
        minutes=1
    )
    with pytest.raises(InputError):
        stale_after_for(FreshnessClass.SESSION, datetime(2026, 5, 3, 10, 0))


def test_verification_moves_the_deadline_and_access_does_not() -> None:
    mem = _mem(
        "m", 1, freshness_class=FreshnessClass.VOLATILE, stale_after=T0 + timedelta(minutes=5)
    )
    assert is_stale(mem, T0 + timedelta(minutes=6)) is True
    verified = mem.model_copy(update={"verified_at": T0 + timedelta(minutes=4)})
    assert is_stale(verified, T0 + timedelta(minutes=9) - US) is False
    assert is_stale(verified, T0 + timedelta(minutes=9)) is True
    assert is_stale(mem.model_copy(update={"resolution_state": ResolutionState.STALE}), T0) is True


def test_age_text() -> None:
    mem = _mem("m", 1)
    assert (
        age_text(mem, T0 + timedelta(hours=3, minutes=12, seconds=30)) == "observed 3 h 12 min ago"
    )
    assert age_text(mem, T0 + timedelta(seconds=45)) == "observed 45 s ago"
    assert age_text(mem, T0 + timedelta(days=2, hours=4)) == "observed 2 d 4 h ago"
    later = mem.model_copy(update={"verified_at": T0 + timedelta(hours=3)})
    assert (
        age_text(later, T0 + timedelta(hours=3, minutes=10))
        == "verified 10 min ago (observed 3 h 10 min ago)"
    )


# --- file staleness --------------------------------------------------------------------


def _read(mid: str, seq: int, path: str, digest: str, rng: list[int] | None = None) -> ToolMemory:
    return _mem(
        mid,
        seq,
        subject_key=f"file:{path}",
        payload={"extractor": "file_read", "content_sha256": digest, "line_range": rng or [1, 10]},
    )


def _write(mid: str, seq: int, path: str, **payload: Any) -> ToolMemory:
    return _mem(
        mid,
        seq,
        source_tool="Edit",
        subject_key=f"file:{path}",
        payload={"extractor": "file_write", "applied": True, **payload},
    )


def test_file_staleness_after_edits_and_rereads() -> None:
    memories = [
        _read("r1", 1, "/a.py", "sha256:1"),
        _read("r2", 2, "/b.py", "sha256:2"),
        _write("w1", 3, "/a.py"),
        _read("r3", 4, "/a.py", "sha256:3"),
        _read("r4", 5, "/b.py", "sha256:2"),  # same content: not stale
        _read("r5", 6, "/a.py", "sha256:9"),  # same range, other content: r3 stale
        _read("r6", 7, "/a.py", "sha256:7", [50, 60]),  # other range: not compared
        _write("w2", 8, "/c.py", applied=False),
        _read("r7", 9, "/c.py", "sha256:c"),
        _write("w3", 10, "/c.py", applied=False),  # rejected edit does not change the file
        _mem(
            "w4",
            11,
            source_tool="Edit",
            status=ToolCallStatus.FAILED,
            subject_key="file:/c.py",
            payload={"extractor": "file_write"},
        ),
    ]
    assert file_staleness(list(reversed(memories))) == {"r1": "w1", "r3": "r5"}


def test_patch_touching_many_paths_and_test_versions() -> None:
    memories = [
        _read("r1", 1, "/a.py", "sha256:1"),
        _mem(
            "p1",
            2,
            source_tool="apply_patch",
            subject_key="file:/z.py",
            payload={"extractor": "file_write", "paths": ["/z.py", "/a.py"]},
        ),
        _mem(
            "t1",
            3,
            source_tool="Bash",
            subject_key="test:pytest",
            payload={"extractor": "test_run", "status": "failed"},
        ),
        _read("r2", 4, "/a.py", "sha256:2"),
        _mem(
            "t2",
            5,
            source_tool="Bash",
            subject_key="test:pytest",
            payload={"extractor": "test_run"},
        ),
    ]
    assert file_staleness(memories) == {"r1": "p1"}
    annotated = annotate_test_file_versions(memories)
    assert [m.id for m in annotated] == ["r1", "p1", "t1", "r2", "t2"]
    assert annotated[2].payload["file_versions"] == {"/a.py": "p1", "/z.py": "p1"}
    assert annotated[4].payload["file_versions"] == {"/a.py": "sha256:2", "/z.py": "p1"}
    assert annotated[2].payload["status"] == "failed"


# --- supersession and conflicts --------------------------------------------------------


def test_supersede_is_directed_and_selection_drops_the_old_one() -> None:
    old = _mem("old", 1)
    new = _mem("new", 2)
    new2, old2 = supersede(new, old)
    assert new2.supersedes == ("old",) and new2.superseded_by is None
    assert old2.superseded_by == "new" and old2.resolution_state == ResolutionState.SUPERSEDED
    assert old2.supersedes == ()
    selected, omitted = select_current([old2, new2], include_conflicts_when_uncertain=False)
    # the inverted-link bug would keep "old" and drop "new"
    assert selected == ("new",)
    assert omitted == {"old": "superseded"}
    # a link recorded only on the successor's side is enough
    selected, omitted = select_current([old, new2], include_conflicts_when_uncertain=False)
    assert (selected, omitted) == (("new",), {"old": "superseded"})
    # a successor outside the candidate set (another branch) does not hide the old memory
    assert select_current([old2], include_conflicts_when_uncertain=False) == (("old",), {})
    with pytest.raises(InputError):
        supersede(old, old)


def test_chain_of_supersession() -> None:
    a, b, c = _mem("a", 1), _mem("b", 2), _mem("c", 3)
    b, a = supersede(b, a)
    c, b = supersede(c, b)
    selected, omitted = select_current([c, a, b], include_conflicts_when_uncertain=True)
    assert selected == ("c",) and omitted == {"a": "superseded", "b": "superseded"}


def test_provenance_rank_blocks_supersession_both_directions() -> None:
    user = _mem("u", 1, provenance_rank=ProvenanceRank.USER_STATED)
    tool = _mem("t", 2, provenance_rank=ProvenanceRank.TOOL_OBSERVED)
    model = _mem("m", 3, provenance_rank=ProvenanceRank.MODEL_DERIVED)
    assert resolve_write(tool, user) == "conflict"
    assert resolve_write(model, tool) == "conflict"
    assert resolve_write(user, tool) == "supersede"
    assert resolve_write(tool, model) == "supersede"
    assert resolve_write(_mem("t2", 4), tool) == "supersede"


def test_conflicts_kept_when_uncertain_or_close() -> None:
    a = _mem("a", 1, confidence=0.9)
    b = _mem("b", 2, confidence=0.6, provenance_rank=ProvenanceRank.MODEL_DERIVED)
    a, b = add_conflict(a, b)
    assert a.conflicts_with == ("b",) and b.conflicts_with == ("a",)
    assert a.resolution_state == b.resolution_state == ResolutionState.CONFLICTED
    selected, omitted = select_current([a, b], include_conflicts_when_uncertain=True)
    assert selected == ("a", "b") and omitted == {}
    assert conflict_marks([a, b], selected) == {"a": ("b",), "b": ("a",)}
    selected, omitted = select_current([a, b], include_conflicts_when_uncertain=False)
    assert selected == ("a",) and omitted == {"b": "low_confidence"}
    assert conflict_marks([a, b], selected) == {}
    close = b.model_copy(update={"confidence": 0.8})
    selected, omitted = select_current([a, close], include_conflicts_when_uncertain=False)
    assert selected == ("a", "b") and omitted == {}
    stronger_b = b.model_copy(update={"confidence": 1.0})
    weaker_a = a.model_copy(update={"confidence": 0.7})
    assert select_current([weaker_a, stronger_b], include_conflicts_when_uncertain=False) == (
        ("b",),
        {"a": "low_confidence"},
    )
    # exactly at the delta counts as comparable: both kept
    assert select_current([a, stronger_b], include_conflicts_when_uncertain=False) == (
        ("a", "b"),
        {},
    )


# --- provenance repair -----------------------------------------------------------------


def _art(
    aid: str, *, call: str = "call_1", tool: str = "Read", sha: str = "abc", seq: int = 1
) -> ToolArtifact:
    return ToolArtifact(
        id=aid,
        tenant_id="t1",
        conversation_id="c1",
        branch_id="b1",
        call_id=call,
        tool_name=tool,
        status=ToolCallStatus.SUCCEEDED,
        sha256=sha,
        size_bytes=10,
        seq=seq,
        observed_at=T0,
        created_at=T0,
    )


def _ref_mem() -> ToolMemory:
    return _mem(
        "m",
        1,
        call_id="call_1",
        source_artifact_ids=("art_gone",),
        summary="Read succeeded: read /a.py [artifact art_gone, 10 bytes]",
        payload={"sha256": "abc", "artifact": "art_gone"},
        provenance_refs=(ProvenanceRef(artifact_id="art_gone", line_start=1, line_end=3),),
    )


def test_repair_repoints_to_same_evidence() -> None:
    existing = {"art_new", "art_other"}
    candidates = [
        _art("art_other", sha="zzz"),  # different evidence
        _art("art_wrongcall", call="call_2"),  # same hash, other call
        _art("art_new", seq=5),
    ]
    repaired, outcome = repair_provenance(
        _ref_mem(),
        artifact_exists=lambda a: a in existing or a == "art_wrongcall",
        artifact_hash_ok=lambda a: True,
        candidates=candidates,
    )
    assert outcome == "repaired"
    assert repaired.resolution_state == ResolutionState.REPAIRED and repaired.repair_attempts == 1
    assert repaired.provenance_refs == (
        ProvenanceRef(artifact_id="art_new", line_start=1, line_end=3),
    )
    assert repaired.source_artifact_ids == ("art_new",)
    assert repaired.payload["artifact"] == "art_new"
    # the reference names the new artifact by its handle (a<seq>)
    assert repaired.summary.endswith("[artifact a5, 10 bytes]")


def test_repair_never_fabricates() -> None:
    mem = _ref_mem()
    ok, outcome = repair_provenance(
        mem.model_copy(update={"provenance_refs": (ProvenanceRef(artifact_id="art_gone"),)}),
        artifact_exists=lambda a: True,
        artifact_hash_ok=lambda a: True,
        candidates=[],
    )
    assert outcome == "ok" and ok.repair_attempts == 0
    corrupt_only = [_art("art_new")]
    first, outcome = repair_provenance(
        mem,
        artifact_exists=lambda a: a != "art_gone",
        artifact_hash_ok=lambda a: a != "art_new",
        candidates=corrupt_only,
    )
    assert outcome == "unverifiable"
    assert first.resolution_state == ResolutionState.UNVERIFIABLE and first.repair_attempts == 1
    assert first.provenance_refs == mem.provenance_refs and first.source_artifact_ids == (
        "art_gone",
    )
    second, _ = repair_provenance(
        first, artifact_exists=lambda a: False, artifact_hash_ok=lambda a: False, candidates=[]
    )
    assert second.repair_attempts == 2
    capped = second.model_copy(update={"repair_attempts": 3})
    third, outcome = repair_provenance(
        capped,
        artifact_exists=lambda a: a == "art_new",
        artifact_hash_ok=lambda a: True,
        candidates=corrupt_only,
    )
    assert outcome == "unverifiable" and third.repair_attempts == 3
    no_hash = mem.model_copy(update={"payload": {}})
    _, outcome = repair_provenance(
        no_hash,
        artifact_exists=lambda a: a == "art_new",
        artifact_hash_ok=lambda a: True,
        candidates=corrupt_only,
    )
    assert outcome == "unverifiable"
