"""The memory layer against the raw payloads it stands for (issue "Accountable tool
memory", seed 000 §5.2): per real transcript, the o200k tokens of every raw tool result
(the artifacts) and of the compact memories derived from them, as rendered to a model.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from contextledger.bench.real import RealFile
from contextledger.ledger import Ledger

__all__ = ["MemoryLayerRow", "measure_memory_layer", "memory_layer_markdown"]


@dataclass(frozen=True, kw_only=True)
class MemoryLayerRow:
    """One transcript: artifact count, raw result tokens, memory count, memory tokens
    (``render_memory_text`` as cached on each memory) and ``ratio`` = memory / raw."""

    case: str
    artifacts: int
    raw_tokens: int
    memories: int
    memory_tokens: int

    @property
    def ratio(self) -> float:
        """Memory tokens per raw-payload token (0 when there is no raw payload)."""
        return round(self.memory_tokens / self.raw_tokens, 4) if self.raw_tokens else 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON form, ``ratio`` included."""
        return {**asdict(self), "ratio": self.ratio}


def measure_memory_layer(files: Sequence[RealFile]) -> list[MemoryLayerRow]:
    """Import each file into a fresh SQLite ledger and total its artifacts' and
    memories' cached token counts (no re-tokenising)."""
    rows: list[MemoryLayerRow] = []
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger.open(home=Path(tmp) / "memory-layer")
        scope = ledger.scope()
        try:
            for f in files:
                res = ledger.import_file(f.path)
                arts = ledger.store.artifacts(scope, res.conversation_id)
                mems = ledger.store.memories(scope, res.conversation_id)
                rows.append(MemoryLayerRow(
                    case=f.rel, artifacts=len(arts), raw_tokens=sum(a.result_tokens for a in arts),
                    memories=len(mems), memory_tokens=sum(m.token_count for m in mems),
                ))
        finally:
            ledger.close()
    return rows


def memory_layer_markdown(rows: Sequence[MemoryLayerRow]) -> str:
    """A Markdown table of the rows plus a total line."""
    lines = ["| transcript | artifacts | raw result tokens | memories | memory tokens | memory / raw |", "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r.case} | {r.artifacts} | {r.raw_tokens:,} | {r.memories} | {r.memory_tokens:,} | {r.ratio:.3f} |")
    raw = sum(r.raw_tokens for r in rows)
    mem = sum(r.memory_tokens for r in rows)
    total = MemoryLayerRow(case="total", artifacts=sum(r.artifacts for r in rows), raw_tokens=raw, memories=sum(r.memories for r in rows), memory_tokens=mem)
    lines.append(f"| **total** | {total.artifacts} | {raw:,} | {total.memories} | {mem:,} | {total.ratio:.3f} |")
    return "\n".join(lines)
