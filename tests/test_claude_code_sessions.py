"""Lines of two sessions interleaved in one Claude Code JSONL (two ``claude`` processes
writing one project file) belong to their own ``sessionId``: each session is its own
root chain (``parentUuid``), the other session's turns are never spliced into it, and the
active branch is the session of the newest record.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import real_params
from contextledger.ingest.importers import parse_file
from contextledger.ingest.transcript import ImportedTranscript
from contextledger.ledger import Ledger
from contextledger.records.parts import TextPart


def _rec(sid: str, uuid: str, parent: str | None, rtype: str, text: str, ts: str, mid: str | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {"type": rtype, "uuid": uuid, "parentUuid": parent, "sessionId": sid, "timestamp": ts, "isSidechain": False}
    if rtype == "user":
        record["message"] = {"role": "user", "content": text}
    else:
        record["message"] = {"id": mid, "role": "assistant", "model": "claude-x", "content": [{"type": "text", "text": text}]}
    return record


_TWO = [
    _rec("A", "a1", None, "user", "Fix the parser.", "2026-01-02T10:00:00Z"),
    _rec("B", "b1", None, "user", "Write the docs.", "2026-01-02T10:00:01Z"),
    _rec("A", "a2", "a1", "assistant", "Parser fixed.", "2026-01-02T10:00:02Z", "msg_a"),
    _rec("B", "b2", "b1", "assistant", "Docs written.", "2026-01-02T10:00:03Z", "msg_b"),
    _rec("A", "a3", "a2", "user", "Now add a test.", "2026-01-02T10:00:04Z"),
    _rec("B", "b3", "b2", "user", "Publish them.", "2026-01-02T10:00:05Z"),
]


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _active_path(t: ImportedTranscript) -> list[str]:
    parent = {m.key: m.parent_key for m in t.messages}
    out: list[str] = []
    key = t.active_leaf_key
    while key is not None:
        out.append(key)
        key = parent[key]
    return out[::-1]


def test_interleaved_sessions_are_separate_chains(tmp_path: Path) -> None:
    t = parse_file(_write(tmp_path / "s.jsonl", _TWO))
    assert [(m.key, m.parent_key) for m in t.messages] == [
        ("a1", None), ("b1", None), ("a2", "a1"), ("b2", "b1"), ("a3", "a2"), ("b3", "b2"),
    ]
    assert _active_path(t) == ["b1", "b2", "b3"]
    assert t.metadata["session_ids"] == ["A", "B"]
    assert "line 2: session B starts its own branch (its lines are interleaved with another session's)" in t.notes


def test_the_active_branch_holds_only_its_sessions_turns(tmp_path: Path) -> None:
    ledger = Ledger.open(home=tmp_path / "ledger")
    try:
        conv = ledger.import_file(_write(tmp_path / "s.jsonl", _TWO)).conversation_id
        scope = ledger.scope()
        branch = ledger.store.get_conversation(scope, conv).active_branch_id
        texts = [
            "".join(p.text for p in m.parts if isinstance(p, TextPart))
            for m in ledger.store.messages(scope, conv, ledger.store.lineage(scope, branch))
        ]
        assert texts == ["Write the docs.", "Docs written.", "Publish them."]
    finally:
        ledger.close()


def test_one_session_is_unchanged(tmp_path: Path) -> None:
    t = parse_file(_write(tmp_path / "s.jsonl", [r for r in _TWO if r["sessionId"] == "A"]))
    assert _active_path(t) == ["a1", "a2", "a3"]
    assert "session_ids" not in t.metadata
    assert not any("session" in n for n in t.notes)


def _renamed(record: Any, suffix: str) -> Any:
    if not isinstance(record, dict):
        return record
    out = dict(record)
    for key in ("uuid", "parentUuid", "logicalParentUuid", "sessionId", "leafUuid"):
        if isinstance(out.get(key), str):
            out[key] = out[key] + suffix
    message = out.get("message")
    if isinstance(message, dict) and isinstance(message.get("id"), str):
        out["message"] = {**message, "id": message["id"] + suffix}
    if isinstance(out.get("timestamp"), str) and out["timestamp"].startswith("20"):
        out["timestamp"] = "1" + out["timestamp"][1:]  # the copy is older: the original stays active
    return out


@pytest.mark.parametrize("path", real_params("**/*.jsonl"), ids=lambda p: p.name if p else "real-data")
def test_every_real_session_interleaved_with_a_copy_keeps_its_own_chain(tmp_path: Path, path: Path) -> None:
    original = parse_file(path)
    if original.format != "claude-code" or original.metadata.get("subagent_files") or not original.metadata.get("session_id"):
        pytest.skip("not a single-file Claude Code session")
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    mixed: list[Any] = []
    for record in lines:
        mixed += [record, _renamed(record, "-copy")]
    alone = parse_file(_write(tmp_path / "alone.jsonl", lines))
    both = parse_file(_write(tmp_path / "both.jsonl", mixed))
    # line i of the session is line 2i-1 of the mixed file, its copy's line 2i
    line_of = {m.key: int(m.source_ref.rsplit(" ", 1)[-1]) for m in both.messages}
    ref = {m.key: m.source_ref for m in alone.messages}
    # a line without a sessionId (a file-history snapshot) belongs to no session
    sessioned = {i for i, r in enumerate(mixed, start=1) if isinstance(r, dict) and isinstance(r.get("sessionId"), str)}
    active = [k for k in _active_path(both) if line_of[k] in sessioned]
    assert all(line_of[k] % 2 == 1 for k in active)
    assert [(line_of[k] + 1) // 2 for k in active] == [
        int(ref[k].rsplit(" ", 1)[-1]) for k in _active_path(alone) if 2 * int(ref[k].rsplit(" ", 1)[-1]) - 1 in sessioned
    ]
    # every turn (user, assistant, tool result) continues a line of its own session;
    # metadata lines hang beside the turns in file order
    turns = {m.key for m in both.messages if m.kind.value == "chat" or m.role.value == "tool"}
    for m in both.messages:
        if m.key in turns and m.parent_key in turns and line_of[m.key] in sessioned and line_of[m.parent_key] in sessioned:
            assert line_of[m.parent_key] % 2 == line_of[m.key] % 2, (m.source_ref, m.parent_key)
