"""One huge record (a task with a pasted multi-megabyte log): work on it is bounded and
linear in its size, and the cut marker states the true number of omitted tokens.

Linearity is checked by what the scans receive (characters), never by timing: the
per-record scans read a bounded window, and the tokenizer reads the text once."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import contextledger.policy.prose as prose_text
import contextledger.retrieval.text as retrieval_text
from contextledger.assembly.last_resort import cut_text
from contextledger.ledger import Ledger
from contextledger.limits import SCAN_HEAD_CHARS, SCAN_TAIL_CHARS, scan_window
from contextledger.tokens import CHUNK_CHARS, Tokenizer, get_tokenizer, pretoken_boundary

TASK = "Please find why the worker queue stalls after a redis failover. You must not restart production. The log follows:"
FOLLOW_UP = "Focus on the ERROR lines from worker.queue, please."
MARKER = re.compile(r"\n\[… (≈?)([\d,]+)(?: \(±([\d,]+)\))? tokens omitted; full text in the ledger \(message 1\) …\]\n")


def _log(chars: int, seed: int = 7) -> str:
    rnd = random.Random(seed)
    words = ["request", "handled", "user", "session", "token", "timeout", "retry", "connection", "closed", "payload", "bytes", "latency", "cache", "miss", "shard", "replica"]
    lines: list[str] = []
    size = i = 0
    while size < chars:
        i += 1
        line = (f"2024-05-{1 + i % 28:02d}T12:{i % 60:02d}:{i * 7 % 60:02d}Z {rnd.choice(['INFO', 'WARN', 'ERROR'])} "
                f"[{rnd.choice(['db.pool', 'worker.queue', 'auth.jwt'])}] req={rnd.randrange(10**8):08x} "
                + " ".join(rnd.choice(words) for _ in range(rnd.randrange(3, 12))))
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def _exact(text: str) -> int:
    """The o200k count of ``text`` in one piece (no chunking)."""
    return len(get_tokenizer().encode(text))


class _Spy:
    """The real o200k encoding, recording how many characters each call encodes."""

    def __init__(self, enc: Any) -> None:
        self.enc = enc
        self.sizes: list[int] = []

    def encode(self, text: str, **kw: Any) -> list[int]:
        self.sizes.append(len(text))
        out: list[int] = self.enc.encode(text, **kw)
        return out

    def decode_bytes(self, ids: list[int]) -> bytes:
        out: bytes = self.enc.decode_bytes(ids)
        return out

    def decode(self, ids: list[int]) -> str:
        out: str = self.enc.decode(ids)
        return out


@pytest.fixture
def spy_tok() -> Iterator[tuple[Tokenizer, _Spy]]:
    tok = Tokenizer()
    spy = _Spy(tok._enc)
    tok._enc = spy  # type: ignore[assignment]
    yield tok, spy


def test_cuts_at_pretoken_boundaries_keep_counts_additive() -> None:
    rnd = random.Random(3)
    alphabet = [*"ab XY  \n\n/.,:;!?-_()[]0123456789", "é", "中", "😀", "\r\n", "\t", "\u00a0", "\u0301", "'s", "'ll"]
    checked = 0
    for _ in range(800):
        text = "".join(rnd.choice(alphabet) for _ in range(rnd.randrange(2, 50)))
        for pos in range(len(text) + 1):
            if pretoken_boundary(text, pos):
                assert _exact(text) == _exact(text[:pos]) + _exact(text[pos:]), (text[:pos], text[pos:])
                checked += 1
    assert checked > 3000
    assert not pretoken_boundary("a.\n/b", 3) and not pretoken_boundary("a\n\nb", 2) and pretoken_boundary("a\nb", 2)


def test_chunked_count_of_a_long_text_is_exact() -> None:
    tok = get_tokenizer()
    text = _log(700_000) + "\n" + "x" * 10 + " tail words " * 20_000  # newlines, then one long line
    assert tok.count(text) == _exact(text)
    assert tok.count_slack(text) == 0
    unbroken = "中" * (3 * CHUNK_CHARS + 5) + "z" * (5 * CHUNK_CHARS)  # no newline, no space
    assert tok.count_slack(unbroken) == 8  # 8 forced cuts (9 chunks)
    assert abs(tok.count(unbroken) - _exact(unbroken)) <= 8


def test_cut_marker_states_the_true_omitted_count() -> None:
    tok = get_tokenizer()
    text = f"{TASK}\n\n{_log(3_000_000)}\nEND OF LOG"
    out = cut_text(tok, text, 3000, "message 1")
    m = MARKER.search(out)
    assert m is not None and m.group(1) == ""  # exact: no estimate sign
    head, tail = out[: m.start()], out[m.end():]
    assert text.startswith(head + "\n") and text.endswith(tail) and head.startswith(TASK) and tail.endswith("END OF LOG")
    middle = text[len(head) + 1 : len(text) - len(tail)]
    assert int(m.group(2).replace(",", "")) == _exact(middle) > 700_000
    assert 2900 <= tok.count(out) <= 3000 + 40


def test_cut_marker_without_boundaries_is_a_bounded_estimate() -> None:
    tok = get_tokenizer()
    text = "中" * 300_000  # one unbroken CJK run: no cut point is a pre-token boundary
    out = cut_text(tok, text, 600, "message 1")
    m = MARKER.search(out)
    assert m is not None and m.group(1) == "≈" and m.group(3) is not None
    head, tail = out[: m.start()], out[m.end():]
    omitted, slack = int(m.group(2).replace(",", "")), int(m.group(3).replace(",", ""))
    assert abs(omitted - _exact(text[len(head) : len(text) - len(tail)])) <= slack <= 8


def test_cut_text_tokenises_windows_not_the_whole_text(spy_tok: tuple[Tokenizer, _Spy]) -> None:
    tok, spy = spy_tok
    for size in (1_000_000, 4_000_000):
        text = f"{TASK}\n\n{_log(size, seed=size)}"
        tok.count(text)  # the record's cost: counted once (chunks of at most 64 KiB)
        assert max(spy.sizes) <= CHUNK_CHARS and sum(spy.sizes) == len(text)
        spy.sizes.clear()
        cut_text(tok, text, 3000, "message 1")
        assert sum(spy.sizes) <= 2 * 8 * 3000 + 200  # head and tail windows, whatever the size
        spy.sizes.clear()


def test_scan_window_keeps_head_and_tail() -> None:
    text = f"{TASK}\n{_log(2_000_000)}\n{FOLLOW_UP}"
    window = scan_window(text)
    assert len(window) <= SCAN_HEAD_CHARS + SCAN_TAIL_CHARS + 2
    assert window.startswith(TASK) and window.endswith(FOLLOW_UP)
    assert scan_window("short text") == "short text"


def _chat(path: Path, user: str) -> Path:
    path.write_text(json.dumps([
        {"role": "user", "content": user},
        {"role": "assistant", "content": "I will look at the log."},
        {"role": "user", "content": FOLLOW_UP},
    ]), encoding="utf-8")
    return path


def test_huge_message_imports_and_assembles_within_budget_with_bounded_scans(sqlite_ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = f"{TASK}\n\n{_log(4_000_000)}\nDo not touch the billing tables."
    scanned: dict[str, list[int]] = {"prose": [], "terms": []}
    prose_lines, fold = prose_text.prose_lines, retrieval_text._fold

    def prose_spy(text: str) -> list[tuple[int, str, int]]:
        scanned["prose"].append(len(text))
        return prose_lines(text)

    def fold_spy(text: str) -> str:
        scanned["terms"].append(len(text))
        return fold(text)

    monkeypatch.setattr(prose_text, "prose_lines", prose_spy)
    monkeypatch.setattr(retrieval_text, "_fold", fold_spy)
    imp = sqlite_ledger.import_file(_chat(tmp_path / "huge.json", user))
    res = sqlite_ledger.assemble(imp.conversation_id, provider="openai-chat", budget_tokens=4000)
    bound = SCAN_HEAD_CHARS + SCAN_TAIL_CHARS + 2
    assert scanned["prose"] and max(scanned["prose"]) <= bound
    assert scanned["terms"] and max(scanned["terms"]) <= bound
    d = res.as_dict()
    assert not d["over_budget"] and d["assembled_tokens"] <= 4000
    body = json.dumps(res.payload, ensure_ascii=False)
    assert "You must not restart production." in body and "Do not touch the billing tables." in body  # constraints from head and tail
    first = next(m["content"] for m in res.payload["messages"] if m["role"] == "user")
    assert isinstance(first, str) and first.startswith(TASK)
    m = MARKER.search(first)
    assert m is not None and m.group(1) == ""
    head, tail = first[: m.start()], first[m.end():]
    assert user.startswith(head + "\n") and user.endswith(tail)
    assert int(m.group(2).replace(",", "")) == _exact(user[len(head) + 1 : len(user) - len(tail)])


def _claude_code(path: Path, user: str) -> Path:
    """A Claude Code session (JSON Lines) whose first record holds ``user``."""
    base = {"isSidechain": False, "userType": "external", "cwd": "/srv/app", "sessionId": "c64cc478-3430-40fe-8e9c-4ee9986e9754", "version": "2.1.14"}
    records = [
        {**base, "parentUuid": None, "type": "user", "uuid": "u1", "timestamp": "2026-01-21T06:19:38.056Z", "message": {"role": "user", "content": user}},
        {**base, "parentUuid": "u1", "type": "assistant", "uuid": "a1", "timestamp": "2026-01-21T06:19:40.612Z",
         "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-opus-4-5", "content": [{"type": "text", "text": "I will look at the log."}]}},
        {**base, "parentUuid": "a1", "type": "user", "uuid": "u2", "timestamp": "2026-01-21T06:20:38.056Z", "message": {"role": "user", "content": FOLLOW_UP}},
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def test_jsonl_whose_first_record_is_longer_than_a_mebibyte_is_detected_as_lines(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    # The first line break lies past 1 MiB: detection used to look for it in the first
    # MiB only and refused the file as one JSON document with "Extra data" on line 2.
    user = f"{TASK}\n\n{_log(1_500_000)}\nDo not touch the billing tables."
    path = _claude_code(tmp_path / "session.jsonl", user)
    assert path.read_text(encoding="utf-8").index("\n") > 1 << 20
    imp = sqlite_ledger.import_file(path)
    assert imp.format == "claude-code" and imp.messages == 3
    res = sqlite_ledger.assemble(imp.conversation_id, provider="anthropic", budget_tokens=4000)
    d = res.as_dict()
    assert not d["over_budget"] and d["assembled_tokens"] <= 4000
    first = res.payload["messages"][0]["content"]
    text = first if isinstance(first, str) else "".join(b["text"] for b in first if b.get("type") == "text")
    m = MARKER.search(text)
    assert m is not None and m.group(1) == ""
    head, tail = text[: m.start()], text[m.end():]
    assert TASK in head and user.endswith(tail) and tail.endswith("Do not touch the billing tables.")
    start = user.index(head[head.index(TASK):]) + len(head) - head.index(TASK) + 1
    assert int(m.group(2).replace(",", "")) == _exact(user[start : len(user) - len(tail)])


GITHUB = "ghp_4Xk9Lm2Nq7Rs1Tv5Wy8Zb3Cd6Fg0Hj2Kl4Mn"
AWS_SECRET = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ3nT8vKpL"


def test_secrets_of_a_huge_record_are_redacted_wherever_they_are(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    # The scans that decide what a record is about read a bounded window; the secret
    # screen reads every character at import, so the ledger holds no secret from the
    # omitted middle either, and the tail that is sent carries its redaction marker.
    log = _log(2_000_000)
    middle = len(log) // 2
    user = f"{TASK}\n\n{log[:middle]}\ntoken {GITHUB}\n{log[middle:]}\nexport {AWS_SECRET}\nDo not touch the billing tables."
    imp = sqlite_ledger.import_file(_chat(tmp_path / "huge.json", user))
    stored = sqlite_ledger.store.messages(sqlite_ledger.scope(), imp.conversation_id, roles=["user"])[0]
    text = "".join(getattr(p, "text", "") for p in stored.parts)
    assert len(text) > 2_000_000 and GITHUB not in text and "wJalrXUtnFEMI" not in text
    assert text.count("[secret: GitHub Token · sha256:") == 1 and text.count("[secret: AWS secret access key · sha256:") == 1
    res = sqlite_ledger.assemble(imp.conversation_id, provider="openai-chat", budget_tokens=4000)
    body = json.dumps(res.payload, ensure_ascii=False)
    assert GITHUB not in body and "wJalrXUtnFEMI" not in body
    first = next(m["content"] for m in res.payload["messages"] if m["role"] == "user")
    tail = first[MARKER.search(first).end():]  # type: ignore[union-attr]
    assert tail.endswith("Do not touch the billing tables.") and "[secret:" in tail


def test_a_huge_text_screened_twice_is_scanned_once_and_a_changed_one_anew(monkeypatch: pytest.MonkeyPatch) -> None:
    import contextledger.security.secrets as secrets

    scanned: list[int] = []
    find = secrets._find

    def find_spy(text: str) -> list[secrets.SecretFinding]:
        scanned.append(len(text))
        return find(text)

    monkeypatch.setattr(secrets, "_find", find_spy)
    log = _log(secrets.MEMO_MIN_CHARS + 50_000, seed=11)
    clean = f"{TASK}\n{log}\nexport {AWS_SECRET}\n"
    first, again = secrets.screen_text(clean), secrets.screen_text(clean)
    assert first == again and [f.secret_type for f in first.findings] == ["AWS secret access key"]
    assert scanned == [len(clean)]  # the second screen reused the findings
    changed = clean[:1000] + f"token {GITHUB}\n" + clean[1000:]  # one more secret, same head and tail
    s = secrets.screen_text(changed)
    assert GITHUB not in s.text and sorted(f.secret_type for f in s.findings) == ["AWS secret access key", "GitHub Token"]
    assert scanned == [len(clean), len(changed)]
    short = f"export {AWS_SECRET}\n"
    secrets.screen_text(short), secrets.screen_text(short)
    assert scanned[2:] == [len(short), len(short)]  # short texts are not remembered
