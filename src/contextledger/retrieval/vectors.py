"""The semantic route's candidate set: a conversation's stored vectors, held per process.

Vectors are append-only and written in the transaction of their record, after the
conversation's sequence number was taken (which serialises the writers of one
conversation), so ``doc_id`` order is commit order within a conversation: a cached
matrix is brought up to date by reading only the rows above the highest ``doc_id`` it
holds (one index range, usually empty).  A conversation holds at most
:data:`MAX_VECTORS` vectors in the cache (the newest); the cache as a whole at most
:data:`CACHE_BYTES` (least recently used conversations are dropped).  Search is exact:
one matrix–vector product over the lineage's rows.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from contextledger.retrieval.statements import VectorRow, newer_vectors, stored_vector

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from sqlalchemy.engine import Connection

    from contextledger.store.base import LineageSegment

__all__ = ["CACHE_BYTES", "MAX_VECTORS", "ConversationVectors", "conversation_vectors", "stored_vector"]

MAX_VECTORS = 100_000
"""Most vectors of one conversation searched (the newest)."""

CACHE_BYTES = 512 * 1024 * 1024
"""Most bytes of vectors held by one process."""


@dataclass(kw_only=True)
class ConversationVectors:
    """The vectors of one conversation and model, in ``doc_id`` order."""

    dim: int
    max_doc_id: int = 0
    record_ids: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    branches: list[str] = field(default_factory=list)
    seqs: Any = None
    branch_codes: Any = None
    matrix: Any = None
    row_of: dict[str, int] = field(default_factory=dict)
    kind_array: Any = None
    _kind_masks: dict[frozenset[str], Any] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        """Bytes held."""
        return 0 if self.matrix is None else int(self.matrix.nbytes)

    def _append(self, rows: list[VectorRow]) -> None:
        import numpy as np

        codes: dict[str, int] = {}
        for b in self.branches:
            codes.setdefault(b, len(codes))
        new = np.frombuffer(b"".join(r.vector for r in rows), dtype="<f4").reshape(len(rows), self.dim)
        base = len(self.record_ids)
        for i, r in enumerate(rows):
            self.record_ids.append(r.record_id)
            self.kinds.append(r.record_kind)
            self.branches.append(r.branch_id)
            self.row_of[r.record_id] = base + i
        seqs = np.array([int(r.seq) for r in rows], dtype=np.int64)
        self.seqs = seqs if self.seqs is None else np.concatenate([self.seqs, seqs])
        self.matrix = new.copy() if self.matrix is None else np.concatenate([self.matrix, new])
        self.max_doc_id = int(rows[-1].doc_id)
        if len(self.record_ids) > MAX_VECTORS:
            cut = len(self.record_ids) - MAX_VECTORS
            self.record_ids, self.kinds, self.branches = self.record_ids[cut:], self.kinds[cut:], self.branches[cut:]
            self.seqs, self.matrix = self.seqs[cut:], self.matrix[cut:]
            self.row_of = {rid: i for i, rid in enumerate(self.record_ids)}
        for b in self.branches:
            codes.setdefault(b, len(codes))
        self.branch_codes = (codes, np.array([codes[b] for b in self.branches], dtype=np.int32))
        self.kind_array = np.array(self.kinds)
        self._kind_masks = {}

    def kind_mask(self, kinds: frozenset[str]) -> npt.NDArray[np.bool_]:
        """Rows whose record kind is one of ``kinds`` (computed once per set of kinds
        until new rows arrive)."""
        import numpy as np

        mask = self._kind_masks.get(kinds)
        if mask is None:
            mask = self._kind_masks[kinds] = np.isin(self.kind_array, sorted(kinds))
        return mask

    def lineage_mask(self, segments: list[LineageSegment]) -> npt.NDArray[np.bool_]:
        """Rows on the lineage (each segment's branch, up to its fork point)."""
        import numpy as np

        codes, arr = self.branch_codes
        mask = np.zeros(len(self.record_ids), dtype=bool)
        for s in segments:
            code = codes.get(s.branch_id)
            if code is None:
                continue
            on = arr == code
            if s.max_seq is not None:
                on &= self.seqs <= s.max_seq
            mask |= on
        return mask


_LOCK = threading.Lock()
_CACHE: OrderedDict[tuple[str, str, str, str], ConversationVectors] = OrderedDict()


def conversation_vectors(conn: Connection, cache_key: str, tenant_id: str, conversation_id: str, model: str, dim: int) -> ConversationVectors:
    """The up-to-date vectors of a conversation (see module docstring).  ``cache_key``
    names the database (its URL): two ledgers on one database share entries."""
    key = (cache_key, tenant_id, conversation_id, model)
    with _LOCK:
        entry = _CACHE.get(key)
        if entry is None:
            entry = _CACHE[key] = ConversationVectors(dim=dim)
        _CACHE.move_to_end(key)
    with _LOCK:
        rows = newer_vectors(conn, tenant_id, conversation_id, model, entry.max_doc_id)
        if rows:
            entry._append(rows)
        total = sum(e.nbytes for e in _CACHE.values())
        while total > CACHE_BYTES and len(_CACHE) > 1:
            _, dropped = _CACHE.popitem(last=False)
            total -= dropped.nbytes
    return entry
