"""The memory's domain adapter: a low-rank update of the embedding model's weights, learned from kernel rules.

Runs in the process that owns a ``SkillStore``, beside ``semantic``; used only when embeddings are. A
general-purpose sentence model puts "configs that exceed shared memory" and "BLOCK 256 with four stages
in fp16" far apart, and two different ``tl.dot`` mistakes close together. The adapter changes how the
model reads such wordings: for each of its linear layers it holds two thin matrices ``A`` (r x in)
and ``B`` (out x r), and the layer's weight becomes ``W + scale * B @ A`` once, when the model loads.
They are learned from labelled rule corpora (``benchmarks/memory_adapter.py``) so that wordings of
one lesson land near each other, and ship as ``rule_adapter.npz`` (float16) inside the package;
``ADAEXPLORE_MEMORY_ADAPTER`` names another file, or ``off`` for none. Stored vectors are tagged with
the adapter's digest (``kind``), so changing it re-encodes them rather than comparing vectors of two
spaces.
"""

from __future__ import annotations

import hashlib
import io
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

ENV = "ADAEXPLORE_MEMORY_ADAPTER"
PACKAGED = Path(__file__).with_name("rule_adapter.npz")
SCALE = "scale"
"""The entry of an adapter file that holds the factor of every update."""


def path() -> Path | None:
    """The adapter file in use, or None (turned off, or the packaged one is missing)."""
    chosen = os.environ.get(ENV, "").strip()
    if chosen.lower() in ("off", "0", "false", "no", "none"):
        return None
    if chosen:
        return Path(chosen)  # a file named on purpose must exist: `load` says so if it does not
    return PACKAGED if PACKAGED.is_file() else None


@lru_cache(maxsize=8)
def _read(file: str, mtime_ns: int) -> tuple[dict[str, tuple[Any, Any]], float, str]:
    import numpy as np

    data = Path(file).read_bytes()
    with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
        entries = {k: arrays[k] for k in arrays.files}
    if SCALE not in entries or entries[SCALE].shape != ():
        raise ValueError(f"{file}: an adapter holds a '{SCALE}' and an A and a B per layer")
    updates: dict[str, tuple[Any, Any]] = {}
    for key in entries:
        if key == SCALE:
            continue
        layer, _, part = key.rpartition("/")
        if part not in ("A", "B") or f"{layer}/A" not in entries or f"{layer}/B" not in entries:
            raise ValueError(f"{file}: '{key}' is not one of a layer's A and B")
        a, b = entries[f"{layer}/A"], entries[f"{layer}/B"]
        if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[1]:
            raise ValueError(f"{file}: {layer}'s A {a.shape} and B {b.shape} are not a low-rank pair")
        updates[layer] = (a.astype(np.float32), b.astype(np.float32))
    return updates, float(entries[SCALE]), hashlib.sha256(data).hexdigest()[:12]


def load() -> tuple[dict[str, tuple[Any, Any]], float, str] | None:
    """``(updates, scale, digest)`` of the adapter in use (``updates`` maps a layer's name to its
    ``(A, B)``), or None when there is none.

    Raises ``FileNotFoundError`` or ``ValueError`` for a named file that is missing or not an adapter.
    """
    file = path()
    return None if file is None else read(file)


def read(file: Path) -> tuple[dict[str, tuple[Any, Any]], float, str]:
    """``(updates, scale, digest)`` of the adapter ``file`` (read once while it is unchanged).

    Raises ``FileNotFoundError`` or ``ValueError`` for a file that is missing or not an adapter.
    """
    return _read(str(file), file.stat().st_mtime_ns)


def write(file: Path, updates: dict[str, tuple[Any, Any]], scale: float) -> None:
    """Save ``updates`` (a layer's name to its ``(A, B)``) and ``scale`` as an adapter file that `load` reads."""
    import numpy as np

    arrays: dict[str, Any] = {SCALE: np.array(scale, dtype=np.float32)}
    for layer, (a, b) in updates.items():
        arrays[f"{layer}/A"], arrays[f"{layer}/B"] = np.asarray(a, np.float16), np.asarray(b, np.float16)
    with file.open("wb") as f:
        np.savez_compressed(f, **arrays)


def kind(base: str) -> str:
    """The tag of vectors made by ``base`` (the model's tag) through the adapter in use."""
    loaded = load()
    return base if loaded is None else f"{base}+adapter-{loaded[2]}"


def tune(network: Any) -> bool:
    """Add the adapter's updates to the weights of ``network`` (a torch module: the model's transformer)
    in place; whether there was an adapter to add.

    Raises ``ValueError`` when the adapter names a layer the network lacks or a shape it does not have:
    an adapter learned for another model must not half apply.
    """
    import torch

    loaded = load()
    if loaded is None:
        return False
    updates, scale, _ = loaded
    layers = dict(network.named_modules())
    for name, (a, b) in updates.items():
        layer = layers.get(name)
        weight = getattr(layer, "weight", None)
        if weight is None or tuple(weight.shape) != (b.shape[0], a.shape[1]):
            raise ValueError(f"the adapter updates '{name}' {b.shape[0]} x {a.shape[1]}, which the model "
                             f"has not")
    with torch.no_grad():
        for name, (a, b) in updates.items():
            weight = layers[name].weight
            weight += scale * torch.from_numpy(b) @ torch.from_numpy(a)
    return True
