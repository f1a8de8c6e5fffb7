"""``contextledger bench pinning``: precision and recall of constraint pinning.

A labelled set (JSON Lines, one object a line: ``text``, ``label`` — ``"constraint"`` or
``"other"`` —, ``source``, ``note``) holds sentences quoted from the user turns of real
transcripts, plus written Japanese and Chinese ones.  Each ``text`` is read as one user
message through :func:`~contextledger.policy.constraints.extract_user_constraints`; it is
predicted ``"constraint"`` when at least one rule is pinned from it.  Reported: the
confusion counts, precision and recall (overall and by language), and every mistake.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contextledger.errors import InputError
from contextledger.policy.constraints import extract_user_constraints

__all__ = ["LABELS", "PinningReport", "load_labels", "run_pinning"]

LABELS = ("constraint", "other")
"""The two labels of the set."""

DEFAULT_SET = Path(__file__).resolve().parents[3] / "tests" / "data" / "pinning_labels.jsonl"
"""The labelled set of the source tree."""

_KANA = re.compile(r"[\u3040-\u30ff]")
_HAN = re.compile(r"[\u4e00-\u9fff]")


@dataclass(frozen=True, kw_only=True)
class Labelled:
    """One labelled sentence (``line`` is its 1-based line in the set)."""

    text: str
    label: str
    source: str
    note: str
    line: int

    @property
    def lang(self) -> str:
        """``"ja"`` (kana), ``"zh"`` (Han without kana) or ``"en"``."""
        if _KANA.search(self.text):
            return "ja"
        return "zh" if _HAN.search(self.text) else "en"


def load_labels(path: Path) -> list[Labelled]:
    """Read a labelled set.

    Raises:
        InputError: the file is missing, a line is not a JSON object, or a record
            lacks a string ``text``/``source`` or has a label outside :data:`LABELS`
            (the message names the file and line).
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the labelled set ({exc.strerror})") from exc
    out: list[Labelled] = []
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except ValueError as exc:
            raise InputError(f"{path}:{n}: not JSON ({exc})") from exc
        if not isinstance(rec, dict) or not isinstance(rec.get("text"), str) or not isinstance(rec.get("source"), str):
            raise InputError(f"{path}:{n}: a record needs string fields text and source")
        if rec.get("label") not in LABELS:
            raise InputError(f"{path}:{n}: label must be one of {', '.join(LABELS)}, not {rec.get('label')!r}")
        out.append(Labelled(text=rec["text"], label=rec["label"], source=rec["source"], note=str(rec.get("note", "")), line=n))
    return out


@dataclass(kw_only=True)
class PinningReport:
    """Confusion counts overall and by language, and the mistakes (``kind`` ``fp``/``fn``)."""

    counts: Counter[str] = field(default_factory=Counter)
    by_lang: dict[str, Counter[str]] = field(default_factory=dict)
    mistakes: list[dict[str, Any]] = field(default_factory=list)

    @staticmethod
    def _pr(c: Counter[str]) -> tuple[float, float]:
        predicted = c["tp"] + c["fp"]
        actual = c["tp"] + c["fn"]
        return (c["tp"] / predicted if predicted else 1.0, c["tp"] / actual if actual else 1.0)

    @property
    def precision(self) -> float:
        """tp / (tp + fp); 1.0 when nothing was pinned."""
        return self._pr(self.counts)[0]

    @property
    def recall(self) -> float:
        """tp / (tp + fn); 1.0 when the set holds no constraint."""
        return self._pr(self.counts)[1]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        langs = {}
        for lang, c in sorted(self.by_lang.items()):
            p, r = self._pr(c)
            langs[lang] = {**{k: c[k] for k in ("tp", "fp", "fn", "tn")}, "precision": round(p, 4), "recall": round(r, 4)}
        return {
            "sentences": sum(self.counts.values()),
            **{k: self.counts[k] for k in ("tp", "fp", "fn", "tn")},
            "precision": round(self.precision, 4),
            "recall": round(self.recall, 4),
            "by_lang": langs,
            "mistakes": self.mistakes,
        }

    def markdown(self) -> str:
        """The figures as Markdown tables, then the mistakes."""
        d = self.as_dict()
        lines = [
            "| set | sentences | tp | fp | fn | tn | precision | recall |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
            f"| all | {d['sentences']} | {d['tp']} | {d['fp']} | {d['fn']} | {d['tn']} | {d['precision']:.3f} | {d['recall']:.3f} |",
        ]
        for lang, v in d["by_lang"].items():
            n = v["tp"] + v["fp"] + v["fn"] + v["tn"]
            lines.append(f"| {lang} | {n} | {v['tp']} | {v['fp']} | {v['fn']} | {v['tn']} | {v['precision']:.3f} | {v['recall']:.3f} |")
        if self.mistakes:
            lines += ["", "| kind | line | source | text |", "|---|---:|---|---|"]
            lines += [f"| {m['kind']} | {m['line']} | {m['source']} | {_cell(m['text'])} |" for m in self.mistakes]
        return "\n".join(lines)


def _cell(text: str) -> str:
    flat = " ".join(text.split()).replace("|", "\\|")
    return flat if len(flat) <= 160 else flat[:157] + "..."


def run_pinning(path: Path = DEFAULT_SET) -> PinningReport:
    """Score pinning on the labelled set at ``path`` (see the module doc).

    Raises:
        InputError: the set cannot be read (see :func:`load_labels`).
    """
    report = PinningReport()
    for item in load_labels(path):
        pinned = bool(extract_user_constraints(item.text, message_id=f"label_{item.line}"))
        actual = item.label == "constraint"
        kind = ("tp" if actual else "fp") if pinned else ("fn" if actual else "tn")
        report.counts[kind] += 1
        report.by_lang.setdefault(item.lang, Counter())[kind] += 1
        if kind in ("fp", "fn"):
            report.mistakes.append({"kind": kind, "line": item.line, "source": item.source, "text": item.text, "note": item.note})
    return report
