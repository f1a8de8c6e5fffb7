"""A payload never cites a handle it does not show (issue 25: payloads never contradict
the transcript).

Every handle (``m12``, ``a12``: :mod:`contextledger.handles`) that a payload's text cites —
a superseded note, a conflict marker, a compaction summary's sources, a staleness line —
is labelled where its record is shown in the same payload (``[memory m12 · …``,
``[stale memory m12 · …``, ``[artifact a12, 5,120 bytes]``, ``(artifact a12)``), or the
citation says it is not shown and how to get it
(``m12 (not in this request; `contextledger rehydrate m12`)``).

Checked over every bench scenario × the three provider formats × four budgets, before
and after ``compact``, and over every real transcript at 4,000 and 16,000 tokens, before
and after ``compact``.  Handle-like words of the recorded text itself (a real transcript's
``a1`` cell) are not citations and are left out.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import real_data_dir, real_data_problem, real_params
from contextledger.bench.real import real_files
from contextledger.bench.scenarios import all_scenarios
from contextledger.errors import InputError
from contextledger.handles import not_shown
from contextledger.ledger import Ledger
from contextledger.providers.registry import PROVIDERS

HANDLE = re.compile(r"(?<![\w/.\-])([ma][1-9][0-9]*)(?![\w/\-])")
LABEL = re.compile(r"\[(?:stale )?memory ([ma][1-9][0-9]*) ·|\[artifact (a[1-9][0-9]*), [\d,]+ bytes|\(artifact (a[1-9][0-9]*)\)")
NOT_SHOWN = re.compile(r"((?:[ma][1-9][0-9]*, )*[ma][1-9][0-9]*) \(not in this request; `contextledger rehydrate ([ma][1-9][0-9]*)`\)")
SKIP_KEYS = frozenset({"id", "call_id", "tool_call_id", "tool_use_id", "model", "name", "type", "role", "signature"})
SHARES = (0.5, 1, 4)


def _texts(obj: Any) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if k not in SKIP_KEYS:
                yield from _texts(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _texts(v)


def unlabelled_citations(payload: dict[str, Any], recorded: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
    """``(handle, context)`` of each handle the payload's text cites that is neither
    labelled in it nor marked as not shown (60 characters before, 20 after); handles in
    ``recorded`` (words of the recorded text) are not citations."""
    text = "\n".join(_texts(payload))
    labelled = {g for m in LABEL.finditer(text) for g in m.groups() if g}
    marked = {m.start(1) + i.start() for m in NOT_SHOWN.finditer(text) for i in HANDLE.finditer(m.group(1))} | {m.start(2) for m in NOT_SHOWN.finditer(text)}
    return [
        (m.group(1), text[max(0, m.start() - 60) : m.end() + 20])
        for m in HANDLE.finditer(text)
        if m.group(1) not in labelled and m.group(1) not in recorded and m.start() not in marked
    ]


def test_not_shown_spells_the_handles_and_the_command() -> None:
    assert not_shown(["m17", "a17"]) == "m17, a17 (not in this request; `contextledger rehydrate m17`)"
    assert not_shown(["a3"]) == "a3 (not in this request; `contextledger rehydrate a3`)"
    assert [h for h, _ in unlabelled_citations({"content": f"x [{not_shown(['m4', 'a4'])}] superseded by m9, m4"})] == ["m9", "m4"]
    assert unlabelled_citations({"content": "[memory m9 · session · observed …] y; superseded by m9"}) == []


@pytest.fixture(scope="module")
def scenario_payloads() -> Iterator[dict[tuple[str, bool, float, str], dict[str, Any]]]:
    out: dict[tuple[str, bool, float, str], dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for sc in all_scenarios():
            led = Ledger.open(home=Path(tmp) / sc.name)
            try:
                b = sc.build(led, 1)
                for compacted in (False, True):
                    if compacted:
                        led.compact(b.conversation_id, branch_id=b.branch_id, keep_recent_units=2, now=b.now)
                    for share in SHARES:
                        for provider in PROVIDERS:
                            res = led.assemble(
                                b.conversation_id, branch_id=b.branch_id, participant_id=b.participant_id, provider=provider,
                                budget_tokens=int(b.budget_tokens * share), now=b.now, persist=False, replay="estimate",
                            )
                            out[(sc.name, compacted, share, provider)] = res.payload
            finally:
                led.close()
        yield out


@pytest.mark.parametrize("compacted", [False, True], ids=["raw", "compacted"])
@pytest.mark.parametrize("case", [s.name for s in all_scenarios()])
def test_scenario_payloads_label_every_cited_handle(scenario_payloads: dict[tuple[str, bool, float, str], dict[str, Any]], case: str, compacted: bool) -> None:
    bad = {(share, provider): found for share in SHARES for provider in PROVIDERS if (found := unlabelled_citations(scenario_payloads[(case, compacted, share, provider)]))}
    assert bad == {}


REAL = [f.rel for f in real_files(real_data_dir())] if real_data_problem() is None else real_params("*")


@pytest.mark.parametrize("rel", REAL, ids=str)
def test_real_payloads_label_every_cited_handle(tmp_path: Path, rel: str) -> None:
    path = real_data_dir() / rel
    recorded = frozenset(HANDLE.findall(path.read_text("utf-8", "replace")))
    led = Ledger.open(home=tmp_path / "home")
    bad: dict[tuple[bool, int], list[tuple[str, str]]] = {}
    try:
        conv = led.import_file(path).conversation_id
        for compacted in (False, True):
            if compacted:
                try:
                    led.compact(conv, keep_recent_units=2)
                except InputError:  # too short to compact
                    break
            for budget in (4000, 16000):
                payload = led.assemble(conv, budget_tokens=budget, persist=False, replay="estimate").payload
                if found := unlabelled_citations(payload, recorded):
                    bad[(compacted, budget)] = found[:5]
    finally:
        led.close()
    assert bad == {}, json.dumps({str(k): v for k, v in bad.items()}, ensure_ascii=False)[:3000]
