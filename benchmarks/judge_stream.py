"""How fast a task's outputs reach the judge: one synthetic task with outputs of a chosen size.

Runs on a GPU machine (or the CPU, slowly). It registers a task whose forward returns an output of
`--gb` gigabytes (an elementwise op: the forward itself costs nothing next to the transfer), then
evaluates a pass-through candidate, and reports the reference job's time, the candidate's, and
where the judge's time went (waiting for bytes, copying them in, comparing, flags) with the relay's
rate. The numbers say whether moving outputs is what bounds registration.

    python benchmarks/judge_stream.py [--gb 1.0] [--tasks 1] [--modes ring stream]

Each mode runs with an evaluator of its own, one after the other in the same process: `ring`
(outputs through each job's ring of shared device memory, the default) and `stream` (through the
job's pipe and the judge's socket).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelbench_suite import PASS_THROUGH, judge_line, where_time_went  # noqa: E402

TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * {scale} + 1.0


def get_inputs():
    return [torch.rand({numel})]


def get_init_inputs():
    return []
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=1.0, help="size of the task's output, in GB")
    ap.add_argument("--tasks", type=int, default=1, help="distinct tasks, run one after another")
    ap.add_argument("--modes", nargs="+", default=["ring"], choices=["ring", "stream"])
    args = ap.parse_args()
    for mode in args.modes:
        print(f"== outputs through {'rings' if mode == 'ring' else 'pipes and the socket'}", flush=True)
        run(args, output_ring=mode == "ring")
    return 0


def run(args, output_ring: bool) -> None:
    from adaexplore.evaluator.evaluator import Evaluator
    from adaexplore.evaluator.task import load_task_file

    numel = int(args.gb * 1e9 / 4)
    ev = Evaluator(trace=True, output_ring=output_ring)
    start = time.monotonic()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.tasks):
                path = Path(tmp) / f"stream_{i}.py"
                path.write_text(TASK.format(scale=2.0 + i, numel=numel))
                task = load_task_file(path)
                t0 = time.monotonic()
                validation = ev.validate_task(task)
                t1 = time.monotonic()
                result = ev.evaluate(task, task.source + PASS_THROUGH)
                t2 = time.monotonic()
                print(f"task {i}: output {args.gb:.2f} GB; registered {validation.ok} in {t1 - t0:.1f} s; "
                      f"pass-through {result.status.value} in {t2 - t1:.1f} s", flush=True)
        print()
        print(where_time_went(ev.trace or [], time.monotonic() - start))
        print(judge_line(ev))
    finally:
        ev.close()


if __name__ == "__main__":
    sys.exit(main())
