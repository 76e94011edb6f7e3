"""The memory's domain adapter: a linear map that bends sentence embeddings toward how kernel rules differ.

Runs in the process that owns a ``SkillStore``, beside ``semantic``; used only when embeddings are. A general-purpose embedding model puts "configs that exceed shared memory" and "BLOCK 256
with four stages in fp16" far apart, and two different ``tl.dot`` mistakes close together. The
adapter is one 384 x 384 matrix ``I + D``, learned from labelled rule corpora
(``benchmarks/memory_adapter.py``) so that wordings of one lesson land near each other; every
vector is mapped by it and normalised again. ``D`` ships as ``rule_adapter.npy`` (float16) inside
the package; ``ADAEXPLORE_MEMORY_ADAPTER`` names another file, or ``off`` for none. Stored vectors
are tagged with the adapter's digest (``kind``), so changing it re-encodes them rather than
comparing vectors of two spaces.
"""

from __future__ import annotations

import hashlib
import io
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

ENV = "ADAEXPLORE_MEMORY_ADAPTER"
PACKAGED = Path(__file__).with_name("rule_adapter.npy")


def path() -> Path | None:
    """The adapter file in use, or None (turned off, or the packaged one is missing)."""
    chosen = os.environ.get(ENV, "").strip()
    if chosen.lower() in ("off", "0", "false", "no", "none"):
        return None
    if chosen:
        return Path(chosen)  # a file named on purpose must exist: `load` says so if it does not
    return PACKAGED if PACKAGED.is_file() else None


@lru_cache(maxsize=8)
def _read(file: str, mtime_ns: int) -> tuple[Any, str]:
    import numpy as np

    data = Path(file).read_bytes()
    delta = np.load(io.BytesIO(data), allow_pickle=False)
    if delta.ndim != 2 or delta.shape[0] != delta.shape[1]:
        raise ValueError(f"{file}: an adapter is a square matrix, not shape {delta.shape}")
    matrix = np.eye(delta.shape[0], dtype=np.float32) + delta.astype(np.float32)
    return matrix, hashlib.sha256(data).hexdigest()[:12]


def load() -> tuple[Any, str] | None:
    """``(matrix, digest)`` of the adapter in use, or None when there is none.

    Raises ``FileNotFoundError`` or ``ValueError`` for a named file that is missing or not an adapter.
    """
    file = path()
    if file is None:
        return None
    return _read(str(file), file.stat().st_mtime_ns)


def kind(base: str) -> str:
    """The tag of vectors made by ``base`` (the model's tag) through the adapter in use."""
    loaded = load()
    return base if loaded is None else f"{base}+adapter-{loaded[1]}"


def apply(vectors: Any) -> Any:
    """Rows of ``vectors`` (n x dim, float32) mapped by the adapter in use and normalised to unit length."""
    import numpy as np

    loaded = load()
    if loaded is None:
        return vectors
    mapped = vectors @ loaded[0]
    norms = np.linalg.norm(mapped, axis=1, keepdims=True)
    return (mapped / np.maximum(norms, 1e-12)).astype(np.float32)
