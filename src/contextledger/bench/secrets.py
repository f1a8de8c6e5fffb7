"""``contextledger bench secrets``: the secret classifier on real transcripts.

Every text the recorder would classify — message text and reasoning, tool-call arguments,
tool results — of every supported real file is scanned.  Reported: how many texts were
flagged, by kind, with the flagged spans shown redacted in context (to review them for
false positives: the real files hold no live credentials, so every flag is a false
positive unless the review says otherwise), and the cost in CPU milliseconds per MB side
by side with the o200k token count of the same texts (which recording already pays), as
the ratio classifier / tokenizer.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contextledger.bench.real import real_files

__all__ = ["SecretsReport", "run_secrets"]


@dataclass(kw_only=True)
class SecretsReport:
    """What :func:`run_secrets` measured (times are CPU seconds of this process)."""

    files: int = 0
    texts: int = 0
    bytes: int = 0
    flagged_texts: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    by_source: Counter[str] = field(default_factory=Counter)
    flagged: list[dict[str, str]] = field(default_factory=list)
    classify_s: float = 0.0
    tokenize_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (``ms_per_mb`` of both, and their ratio)."""
        mb = self.bytes / 1e6 or 1.0
        return {
            "files": self.files, "texts": self.texts, "megabytes": round(self.bytes / 1e6, 3),
            "flagged_texts": self.flagged_texts, "flagged_rate": self.flagged_texts / self.texts if self.texts else 0.0,
            "by_kind": dict(self.by_kind), "by_source": dict(self.by_source), "flagged": self.flagged,
            "classify_ms_per_mb": round(self.classify_s * 1000 / mb, 2), "tokenize_ms_per_mb": round(self.tokenize_s * 1000 / mb, 2),
            "classify_vs_tokenize": round(self.classify_s / self.tokenize_s, 3) if self.tokenize_s else None,
        }

    def markdown(self) -> str:
        """The report as Markdown (a table of figures, then the flagged spans)."""
        d = self.as_dict()
        lines = [
            "| files | texts | MB | flagged texts | flagged rate | classifier ms/MB | o200k count ms/MB | ratio |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
            f"| {d['files']} | {d['texts']:,} | {d['megabytes']} | {d['flagged_texts']} | {d['flagged_rate']:.4%} | {d['classify_ms_per_mb']} | {d['tokenize_ms_per_mb']} | {d['classify_vs_tokenize']} |",
        ]
        if self.flagged:
            lines += ["", "| file | source | kind | context (redacted) |", "|---|---|---|---|"]
            lines += [f"| {f['file']} | {f['source']} | {f['kind']} | `{f['context']}` |" for f in self.flagged]
        return "\n".join(lines)


def _texts(path: Path) -> list[tuple[str, str]]:
    from contextledger.ingest.importers import parse_file
    from contextledger.records.parts import TextPart, ThinkingPart, ToolCallPart, ToolResultPart

    out: list[tuple[str, str]] = []
    for m in parse_file(path).messages:
        for p in m.parts:
            if isinstance(p, TextPart | ThinkingPart):
                out.append(("message", p.text))
            elif isinstance(p, ToolCallPart):
                out.append(("arguments", p.arguments_json))
            elif isinstance(p, ToolResultPart) and p.text:
                out.append(("result", p.text))
    return out


def run_secrets(root: Path) -> SecretsReport:
    """Classify every text of the supported files under ``root`` (``manifest.json``).

    Raises:
        FileNotFoundError: no manifest under ``root``.
    """
    from contextledger.security.secrets import find_secrets, redact, screen_text
    from contextledger.tokens import get_tokenizer

    tok = get_tokenizer()
    screen_text("warm up: AKIA0000000000000000 password=abc")  # builds the detectors once
    report = SecretsReport()
    for f in real_files(root):
        report.files += 1
        for source, text in _texts(f.path):
            report.texts += 1
            report.bytes += len(text.encode("utf-8", "surrogatepass"))
            t0 = time.process_time()
            findings = find_secrets(text)
            t1 = time.process_time()
            tok.count(text)
            report.classify_s += t1 - t0
            report.tokenize_s += time.process_time() - t1
            if not findings:
                continue
            report.flagged_texts += 1
            report.by_source[source] += 1
            shown = redact(text, findings)
            for fnd in findings:
                report.by_kind[fnd.secret_type] += 1
                at = shown.find(fnd.marker)
                context = shown[max(0, at - 60) : at + len(fnd.marker) + 30].replace("\n", "⏎").replace("|", "\\|").replace("`", "'")
                report.flagged.append({"file": f.rel, "source": source, "kind": fnd.secret_type, "context": context})
    return report
