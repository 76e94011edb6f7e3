"""Does a task's runtime change from one fresh process to the next, and where? (GPU machine.)

`61_ConvTranspose3d_ReLU_GroupNorm`'s honest candidate measures 2.73 ms in some processes and
2.95 ms in others, with the same autotuned configurations, in our evaluator and in the field's
harness alike. This runs the task's reference and that candidate in several fresh processes, one
after another with the GPU otherwise idle, and reports per process: the median of the transposed
convolution alone, the reference, the candidate, the device kernels one forward ran (with their
times), and the free device memory at the start. Half the processes set `cudnn.benchmark`.

    python3 benchmarks/cudnn_spread.py --problems .kb --task 61_ConvTranspose3d_ReLU_GroupNorm \
        --processes 8 --json-out spread.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def timed_ms(fn, runs: int = 40) -> float:
    import torch

    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def child(task_file: Path, candidate_file: Path, benchmark: bool) -> dict:
    import torch

    torch.backends.cudnn.benchmark = benchmark
    free0, total = torch.cuda.mem_get_info()
    scope: dict = {}
    exec(compile(task_file.read_text(), str(task_file), "exec"), scope)
    torch.manual_seed(0)
    ref = scope["Model"](*scope["get_init_inputs"]()).cuda().eval()
    cand_scope: dict = {}
    exec(compile(candidate_file.read_text(), str(candidate_file), "exec"), cand_scope)
    torch.manual_seed(0)
    cand = cand_scope["ModelNew"](*scope["get_init_inputs"]()).cuda().eval()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in scope["get_inputs"]()]
    conv = next(m for m in ref.modules() if isinstance(m, torch.nn.ConvTranspose3d | torch.nn.Conv3d | torch.nn.Conv2d))
    row: dict = {"benchmark": benchmark, "free_gib_at_start": round(free0 / 2**30, 1)}
    with torch.no_grad():
        row["conv_ms"] = round(timed_ms(lambda: conv(*inputs)), 4)
        row["reference_ms"] = round(timed_ms(lambda: ref(*inputs)), 4)
        row["candidate_ms"] = round(timed_ms(lambda: cand(*inputs)), 4)
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                cand(*inputs)
            torch.cuda.synchronize()
    kernels: dict[str, list[float]] = {}
    for ev in prof.events():
        if ev.device_type.name == "CUDA" and ev.device_time > 0:
            kernels.setdefault(ev.name[:90], []).append(ev.device_time / 1e3)
    row["kernels"] = {k: round(statistics.median(v), 4) for k, v in sorted(kernels.items(), key=lambda kv: -max(kv[1]))}
    row["pointers_mod_2mib"] = [(x.data_ptr() % (2 << 20)) for x in inputs if isinstance(x, torch.Tensor)]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", type=Path, default=Path(".kb"))
    parser.add_argument("--task", default="61_ConvTranspose3d_ReLU_GroupNorm")
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--deadline-s", type=float, default=120.0)
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--benchmark", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    task_file = args.problems / "level2" / f"{args.task}.py"
    if not task_file.exists():
        task_file = args.problems / f"{args.task}.py"
    candidate_file = sorted((HERE / "candidates" / "level2" / args.task).glob("*.py"))[0]
    if args.child:
        print(json.dumps(child(task_file, candidate_file, args.benchmark)))
        return 0
    rows, t0 = [], time.monotonic()
    for i in range(args.processes):
        if time.monotonic() - t0 > args.deadline_s:
            break
        cmd = [sys.executable, __file__, "--child", "--problems", str(args.problems), "--task", args.task]
        if i % 2:
            cmd.append("--benchmark")
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=max(10.0, args.deadline_s))
        try:
            row = json.loads(done.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            row = {"error": done.stderr[-600:]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json_out:
        args.json_out.write_text(json.dumps({"task": args.task, "rows": rows}, indent=1))
    for key in ("conv_ms", "reference_ms", "candidate_ms"):
        for bench in (False, True):
            vals = [r[key] for r in rows if key in r and r["benchmark"] == bench]
            if vals:
                print(f"{key} benchmark={bench}: {vals} max/min {max(vals) / min(vals):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
