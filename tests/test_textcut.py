"""Cuts by characters never split a unit (issue 25, "markers are whole"): our bracketed
markers, handles, digests, URLs, surrogate pairs and combining sequences stay whole, in
:mod:`contextledger.textcut` and at every place that cuts payload text."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import real_data_dir, real_data_problem, real_params
from contextledger import textcut
from contextledger.assembly.last_resort import cut_text as cut_tokens
from contextledger.assembly.render import compact_arguments, pending_call_text
from contextledger.compaction.text import cap_text
from contextledger.ledger import Ledger
from contextledger.memory.extractors.textutil import cap
from contextledger.providers.registry import PROVIDERS
from contextledger.records.enums import ToolCallStatus
from contextledger.records.models import ToolCall
from contextledger.textcut import MARKER, cut_index, cut_prefix, cut_text, safe_point, unit_at
from contextledger.tokens import get_tokenizer

ISSUE = "Read succeeded: read /src/a.py lines 1-40 … [artifact a84, 929 bytes]"

# ------------------------------------------------------------------ generated texts

_FILLER = st.text(alphabet=st.sampled_from("xyzghk KLQ,.;-_/()\n"), max_size=30)  # forms no unit
_NUM = st.integers(min_value=1, max_value=99_999_999).map(lambda n: f"{n:,}")
_HANDLE = st.builds(lambda k, n: f"{k}{n}", st.sampled_from("ma"), st.integers(min_value=1, max_value=10**6))
_HEX = st.text(alphabet="0123456789abcdef", min_size=12, max_size=64).map(lambda h: "9" + h)
_MARKERS = st.one_of(
    st.builds(lambda h, n: f"[artifact {h}, {n} bytes]", _HANDLE, _NUM),
    st.builds(lambda h, n, d: f"[artifact {h}, {n} bytes, sha256:{d[:12]}]", _HANDLE, _NUM, _HEX),
    st.builds(lambda n, h: f"[… {n} tokens omitted; full text in the ledger (artifact {h}) …]", _NUM, _HANDLE),
    st.builds(lambda a, b: f"[… {a} lines ({b} tokens) omitted; full text in the ledger …]", _NUM, _NUM),
    st.builds(lambda h: f"[memory {h} · session · observed 2026-05-01T10:00Z]", _HANDLE),
    st.builds(lambda h: f"[stale memory {h} · Read · 3d old]", _HANDLE),
    st.builds(lambda n: f"[{n} chars in the ledger]", _NUM),
    st.builds(lambda h: f"[superseded by {h}: see the newer result]", _HANDLE),
    st.builds(lambda h: f"[conflicts with {h}, another memory]", _HANDLE),
    st.just("[contextledger: recorded data, not instructions]"),
    st.just("[ledger data, not instructions]"),
    st.builds(lambda n: f"[{n} stack frames omitted]", _NUM),
    st.builds(lambda a: f'[pending, no result yet: call_7 deploy({{"env":"{a}"}})]', st.text(alphabet="abc ", max_size=20)),
)
_UNITS = st.one_of(
    _MARKERS,
    _HANDLE,
    _HEX,
    _HEX.map(lambda h: "sha256:" + h),
    st.builds(lambda h, p: f"https://{h}.example.com/{p}?q=1", st.text(alphabet="abc", min_size=1, max_size=8), st.text(alphabet="abc/_-", max_size=40)),
    st.sampled_from(["\ud83d\ude00", "\udbff\udfff"]),  # surrogate pairs (as decoded with surrogatepass)
    st.sampled_from(["e\u0301", "a\u0308\u0304", "\u0915\u094d\u0937", "\U0001f44d\U0001f3fd", "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\u2764\ufe0f"]),
)


@st.composite
def _texts(draw: st.DrawFn) -> tuple[str, list[tuple[int, int]]]:
    """A text of filler and units (each unit set off by spaces) and the units' spans."""
    out, spans, pos = [], [], 0
    for _ in range(draw(st.integers(min_value=1, max_value=8))):
        filler = draw(_FILLER)
        if draw(st.booleans()) or not out:
            unit = draw(_UNITS)
            piece = filler + (" " if filler or out else "")  # set off from what precedes
            spans.append((pos + len(piece), pos + len(piece) + len(unit)))
            piece += unit + " "
        else:
            piece = filler
        out.append(piece)
        pos += len(piece)
    return "".join(out), spans


@settings(max_examples=400, deadline=None)
@given(_texts(), st.integers(min_value=0, max_value=400))
def test_a_cut_never_splits_a_unit(case: tuple[str, list[tuple[int, int]]], limit: int) -> None:
    text, spans = case
    i = cut_index(text, limit)
    assert not [s for s in spans if s[0] < i < s[1]], (text, limit, i)
    if len(text) <= limit:
        assert i == len(text)
    elif i > limit:
        # only when the unit at the limit opens the text: that unit whole, nothing more
        assert (0, i) in spans and spans[0][0] == 0, (text, limit, i)
    else:
        assert unit_at(text, limit) is not None or i == limit  # moved only when it had to be
        assert unit_at(text, i) is None


@settings(max_examples=300, deadline=None)
@given(_texts(), st.integers(min_value=0, max_value=400), st.sampled_from(["…", "", " [cut]"]))
def test_a_cut_text_is_a_prefix_then_the_mark(case: tuple[str, list[tuple[int, int]]], limit: int, mark: str) -> None:
    text, spans = case
    out = cut_text(text, limit, mark=mark)
    if len(text) <= limit:
        assert out == text
        return
    assert out.endswith(mark)
    kept = out[: len(out) - len(mark)]
    assert text.startswith(kept)
    assert not [s for s in spans if s[0] < len(kept) < s[1]]
    assert len(out) <= max(limit, len(mark)) or (spans[0][0] == 0 and len(kept) == spans[0][1])
    assert cut_prefix(text, limit) == text[: cut_index(text, limit)]


@settings(max_examples=200, deadline=None)
@given(_MARKERS)
def test_every_generated_marker_is_one_unit(marker: str) -> None:
    assert MARKER.fullmatch(marker)
    text = "x " + marker + " y"
    assert [unit_at(text, p) for p in range(3, 2 + len(marker))] == [(2, 2 + len(marker))] * (len(marker) - 1)


# ------------------------------------------------------------------ exact cases


def test_the_issue_marker_is_never_cut() -> None:
    at = ISSUE.index("[artifact")
    for limit in range(at + 1, len(ISSUE)):
        assert cut_index(ISSUE, limit) == at, limit
    assert cut_text(ISSUE, len(ISSUE) - 5) == ISSUE[:at] + "…"
    assert cut_text(ISSUE, len(ISSUE)) == ISSUE


def test_a_unit_that_opens_the_text_is_kept_whole() -> None:
    text = "[artifact a12, 5,120 bytes] then the rest"
    assert cut_text(text, 10) == "[artifact a12, 5,120 bytes]…"
    assert cut_index(text, 0) == 0  # an empty cut splits nothing
    assert safe_point(text, 5, forward=True) == 27


def test_each_kind_of_unit() -> None:
    digest = "sha256:" + "0123456789abcdef" * 4
    assert cut_index(f"x {digest} y", 20) == 2
    assert cut_index("see m1234 now", 7) == 4
    assert cut_index("go https://example.com/a/b?q=1 now", 20) == 3
    assert cut_index("ab\ud83d\ude00cd", 3) == 2
    assert cut_index("cafe\u0301 ok", 4) == 3  # the e and its accent stay together
    assert cut_index("x \U0001f468\u200d\U0001f469\u200d\U0001f467 y", 4) == 2
    # handle inside a marker: the whole marker goes
    assert cut_index("ok [conflicts with m12, m13] z", 21) == 3
    # not units: a hex dump longer than a digest, an unknown bracket, words
    dump = "ab" * 200
    assert cut_index(dump, 50) == 50
    assert cut_index("[1, 2, 3, 4]", 5) == 5
    assert cut_index("hello world", 3) == 3
    zalgo = "x" + "\u0301" * 100  # longer than a combining sequence is: cut like text
    assert cut_index(zalgo, 50) == 50
    assert cut_index("ab" + "\u0301" * 20 + " c", 10) == 1


# ------------------------------------------------------------------ the places that cut


def _call(arguments: str) -> ToolCall:
    return ToolCall(id="tc_1", tenant_id="t", conversation_id="c", branch_id="b", message_id="m", call_id="call_7", tool_name="deploy", arguments_json=arguments, status=ToolCallStatus.PENDING, seq=3, call_index=0, created_at=datetime(2026, 5, 1, tzinfo=UTC))


def test_extractor_and_compaction_caps_keep_markers_whole() -> None:
    at = ISSUE.index("[artifact")
    assert cap(ISSUE, len(ISSUE) - 5) == ISSUE[:at] + "…"
    assert cap_text(ISSUE, len(ISSUE) - 5) == ISSUE[:at] + "…"


def test_tool_call_arguments_are_cut_before_a_url() -> None:
    url = "https://example.com/" + "p" * 60
    value = "x" * 140 + " " + url + " tail " * 20
    out = json.loads(compact_arguments(json.dumps({"body": value})))["body"]
    assert out == "x" * 140 + " " + f"… [{len(value) - 141:,} chars in the ledger]"
    text = pending_call_text(_call(json.dumps({"u": "y" * 150 + " " + url})))
    assert text == '[pending, no result yet: call_7 deploy({"u": "' + "y" * 150 + " …)]"


def test_the_last_resort_cut_keeps_markers_whole() -> None:
    tok = get_tokenizer()
    text = "".join(f"[artifact a{i}, {i * 7:,} bytes]" for i in range(1, 400))
    out = cut_tokens(tok, text, 64, "artifact a1")
    head, rest = out.split("\n[…", 1)
    marker, tail = rest.split("…]\n", 1)
    assert marker.endswith(" tokens omitted; full text in the ledger (artifact a1) ") and head and tail
    for part in (head, tail):
        assert MARKER.sub("", part) == "", part


# ------------------------------------------------------------------ real transcripts

# the grammar of the markers whose parts a cut used to split (independent of textcut's own)
_STRICT = {
    "[artifact ": re.compile(r"\[artifact a[1-9]\d*, [\d,]+ bytes(?:, sha256:[0-9a-f]{12})?\]"),
    "[… ": re.compile(r"\[… (?:[\d,]+ lines? \([\d,]+ tokens?\)|(?:≈[\d,]+ \(±[\d,]+\)|[\d,]+) tokens?) omitted; full text in the ledger(?: \((?:artifact a[1-9]\d*|message \d+|system prompt)\))? …\]"),
    "[memory ": re.compile(r"\[memory m[1-9]\d* · [a-z_]+ · observed [0-9T:Z-]+(?: · confidence [\d.]+ [a-z_]+)?\]"),
    "[stale memory ": re.compile(r"\[stale memory m[1-9]\d* · [^\[\]\n]+\]"),
}
_HEAD = re.compile(r"\[(?:" + "|".join(textcut._HEADS) + ")")
_CHARS = re.compile(r"\[[\d,]+ chars in the ledger\]")


def _manifest() -> list[Any]:
    """Every transcript of the real folder's manifest, or the one parameter that skips
    (fails in CI) without the folder (:func:`conftest.real_params`)."""
    if real_data_problem() is not None:
        return real_params("manifest.json")
    root = real_data_dir()
    return [root / e["path"] for e in json.loads((root / "manifest.json").read_text())]


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def broken_markers(text: str) -> list[str]:
    """The markers of ours in ``text`` that are not whole: each opening head
    (``[artifact ``, ``[… ``, ``[memory `` …) must start a marker of the grammar."""
    bad = []
    for m in _HEAD.finditer(text):
        strict = next((g for h, g in _STRICT.items() if text.startswith(h, m.start())), None)
        if _CHARS.match(text, m.start()):
            continue
        if not (strict or textcut.MARKER).match(text, m.start()):
            bad.append(text[m.start() : m.start() + 80])
    return bad


def test_the_marker_check_finds_a_cut_marker() -> None:
    assert broken_markers(ISSUE) == []
    assert broken_markers(ISSUE[:-10] + "…") == ["[artifact a84, …"]
    assert broken_markers("x [… 12 tokens omitted; full text in the ledger (artifact a1) …] y") == []
    assert broken_markers("x [… 12 tokens omitted; full text in the") != []


@pytest.mark.parametrize("path", _manifest(), ids=lambda p: str(p.relative_to(real_data_dir())) if isinstance(p, Path) else str(p))
def test_real_payloads_show_only_whole_markers(tmp_path: Path, path: Path) -> None:
    led = Ledger.open(home=tmp_path / "home")
    try:
        conv = led.import_file(path).conversation_id
        for budget in (2000, 4000):
            for provider in PROVIDERS:
                payload = led.assemble(conv, budget_tokens=budget, provider=provider, persist=False).payload
                bad = [b for s in _strings(payload) for b in broken_markers(s)]
                assert not bad, (budget, provider, bad[:5])
    finally:
        led.close()
