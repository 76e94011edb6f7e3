"""Evaluate every example kernel against its task and print a markdown table.

    python benchmarks/evaluate_examples.py [--json]

On a GPU this gives each kernel's runtime and speedup over PyTorch eager under the
default protocol; on a CPU it checks correctness through Triton's interpreter.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from adaexplore.evaluator.evaluator import Evaluator
from adaexplore.evaluator.results import to_json
from adaexplore.evaluator.task import load_task_file

ROOT = Path(__file__).resolve().parent.parent / "examples"


def pairs():
    for kernel in sorted((ROOT / "kernels").glob("*.py")):
        yield kernel.stem, kernel
    for kernel in sorted((ROOT / "kernels" / "variants").glob("*.py")):
        yield "softmax", kernel


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with Evaluator() as ev:
        print(f"device: {ev.device}")
        print("| task | kernel | status | ms (mean) | reference ms | speedup | wall s |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for task_name, kernel in pairs():
            task = load_task_file(ROOT / "tasks" / f"{task_name}.py")
            t0 = time.monotonic()
            r = ev.evaluate(task, kernel.read_text())
            wall = time.monotonic() - t0
            ms = f"{r.timing.mean_ms:.4f}" if r.timing else "-"
            ref = f"{r.reference_timing.mean_ms:.4f}" if r.reference_timing else "-"
            sp = f"{r.speedup:.2f}x" if r.speedup else "-"
            print(f"| {task_name} | {kernel.relative_to(ROOT)} | {r.status.value} | {ms} | {ref} | {sp} | {wall:.1f} |")
            if args.json:
                print(to_json(r).decode(), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
