"""Timing fidelity: repeatability of the evaluator's timings and agreement with do_bench.

    python3 benchmarks/timing_fidelity.py [--quick] [--cpu-check] [--json-out FILE]

For each kernel: the same candidate is evaluated 5 times through one evaluator (a trailing
comment makes each submission new, so the result cache does not answer) and the spread of
the 5 trimmed means is reported (target: within 2% for kernels of at least 0.1 ms). Then a
separate process loads the candidate, builds the same inputs and times it with
`triton.testing.do_bench` (which also flushes L2 before each run); the evaluator's figures
should be within 5% of its median. The torch.compile baseline of each task is reported too.
Markdown on stdout, progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "throughput"))
import mix  # noqa: E402

MIN_MS = 0.1
QUICK = ["matmul_tiled", "rownorm_row", "softmax_row"]
FULL = ["matmul_tiled", "matmul_autotune", "matmul_slow", "rownorm_row", "rownorm_tile", "lse_online",
        "lse_two_pass", "softmax_row", "softmax_online"]


def do_bench_child(args) -> int:
    """Runs in its own process: load the candidate, build the timing inputs, time with do_bench."""
    import importlib.util

    import torch

    from adaexplore.evaluator.task import load_task_file
    from adaexplore.evaluator.worker import harness

    result: dict = {}
    try:
        task_def = load_task_file(args.task)
        protocol = task_def.protocol
        device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
        task = harness.load_task(task_def.source)
        spec = importlib.util.spec_from_file_location("candidate_under_bench", args.kernel)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        model = harness.build_model(module.ModelNew, task, protocol, device)
        inputs = harness.make_inputs(task, harness.timing_seed(protocol, 0), device)

        def fn():
            with torch.no_grad():
                return model(*inputs)

        if device.type == "cuda":
            import triton.testing

            try:
                ms = triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
            except TypeError:  # an older signature
                ms = triton.testing.do_bench(fn, warmup=25, rep=100, quantiles=[0.5])
            result = {"median_ms": float(ms[0] if isinstance(ms, (list, tuple)) else ms), "method": "do_bench"}
        else:  # no do_bench without a GPU: host clocks, only to exercise this path
            fn()
            samples = []
            for _ in range(5):
                t0 = time.perf_counter()
                fn()
                samples.append((time.perf_counter() - t0) * 1e3)
            result = {"median_ms": sorted(samples)[len(samples) // 2], "method": "host_clock"}
    except Exception as exc:  # noqa: BLE001
        result = {"error": f"{type(exc).__name__}: {exc}"[:400]}
    Path(args.out).write_text(json.dumps(result))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    parser.add_argument("--cpu-check", action="store_true", help="shrunk tasks through the interpreter")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--kernels", default=None, help="comma-separated kernel names")
    parser.add_argument("--json-out", default=None)
    parser.add_argument("--do-bench-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--task", help=argparse.SUPPRESS)
    parser.add_argument("--kernel", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cpu_check:
        os.environ["TRITON_INTERPRET"] = "1"
    mix.ensure_importable()
    if args.do_bench_child:
        return do_bench_child(args)

    import torch

    from adaexplore.evaluator.evaluator import Evaluator
    from adaexplore.evaluator.results import EvalProtocol
    from adaexplore.evaluator.task import load_task_file

    kernels = args.kernels.split(",") if args.kernels else (QUICK if args.quick else FULL)
    task_of = {k: t for t, k, _ in mix.PAIRS}
    kernels = [k for k in kernels if k in task_of]
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    root = Path(tempfile.mkdtemp(prefix="adaexplore-fidelity-"))
    protocol = EvalProtocol(warmup_runs=2, timed_runs=10, timeout_s=300) if args.cpu_check else None
    task_paths = mix.materialize_tasks(root / "tasks", small=args.cpu_check)
    tasks = {n: load_task_file(p) for n, p in task_paths.items()}
    if protocol is not None:
        tasks = {n: t.model_copy(update={"protocol": protocol}) for n, t in tasks.items()}
    mix.log(f"{len(kernels)} kernels x {args.repeats} evaluations on {device}; scratch {root}")

    rows: list[dict] = []
    baselines: dict[str, dict] = {}
    ev = Evaluator(work_dir=root / "warm", cpu_timing=args.cpu_check,
                   baselines=("eager", "compile") if torch.cuda.is_available() else ("eager",),
                   wait_for_compile=True)  # both baselines are in the report
    try:
        for kernel in kernels:
            task = tasks[task_of[kernel]]
            row: dict = {"kernel": kernel, "task": task_of[kernel], "means": [], "medians": []}
            try:
                if task.name not in baselines:
                    v = ev.validate_task(task)
                    baselines[task.name] = {
                        "eager": v.reference_timing.mean_ms if v.reference_timing else None,
                        "compile": v.compile_timing.mean_ms if v.compile_timing else None,
                        "note": v.compile_note or (v.error.message[:200] if v.error else None)}
                    mix.log(f"[baseline] {task.name}: {baselines[task.name]}")
                source = mix.kernel_source(kernel)
                for i in range(args.repeats):
                    r = ev.evaluate(task, source + f"\n# fidelity run {i}\n")
                    if r.timing is None:
                        row["error"] = f"{r.status.value}: {r.feedback(200)}"
                        break
                    row["means"].append(r.timing.mean_ms)
                    row["medians"].append(r.timing.median_ms)
                    mix.log(f"[eval] {kernel} run {i}: {r.timing.mean_ms:.4f} ms")
            except Exception as exc:  # noqa: BLE001
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
            # do_bench in a fresh process on the same inputs
            out = root / f"bench-{kernel}.json"
            cmd = [sys.executable, __file__, "--do-bench-child", "--task", str(task_paths[task_of[kernel]]),
                   "--kernel", str(mix.KERNELS / f"{kernel}.py"), "--out", str(out)]
            if args.cpu_check:
                cmd.append("--cpu-check")
            env = dict(os.environ, TRITON_CACHE_DIR=str(root / "bench-triton-cache"))
            try:
                subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
                row["bench"] = json.loads(out.read_text()) if out.exists() else {"error": "no result"}
            except (subprocess.TimeoutExpired, OSError, ValueError) as exc:
                row["bench"] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
            mix.log(f"[do_bench] {kernel}: {row['bench']}")
            rows.append(row)
    finally:
        ev.close()

    lines = [f"# Timing fidelity ({'CPU check, shrunk tasks, host clocks' if args.cpu_check else device})", "",
             f"{args.repeats} evaluations per kernel (trimmed means); do_bench median in a separate process.", "",
             "| kernel | trimmed means (ms) | spread | do_bench median (ms) | evaluator median of means (ms) "
             "| vs do_bench | >= 0.1 ms |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    worst_spread = worst_bench = 0.0
    for row in rows:
        means = row["means"]
        bench = row.get("bench", {}).get("median_ms")
        if not means:
            lines.append(f"| {row['kernel']} | {row.get('error', 'no timing')} | - | {bench or '-'} | - | - | - |")
            continue
        mid = sorted(means)[len(means) // 2]
        spread = (max(means) - min(means)) / min(means)
        vs = (mid - bench) / bench if bench else None
        big = mid >= MIN_MS
        if big or args.cpu_check:
            worst_spread = max(worst_spread, spread)
            if vs is not None:
                worst_bench = max(worst_bench, abs(vs))
        lines.append(f"| {row['kernel']} | {', '.join(f'{m:.4f}' for m in means)} | {spread * 100:.2f}% | "
                     f"{f'{bench:.4f}' if bench else row.get('bench', {}).get('error', '-')} | {mid:.4f} | "
                     f"{f'{vs * 100:+.2f}%' if vs is not None else '-'} | {'yes' if big else 'no'} |")
    lines += ["", f"**Largest spread of the 5 trimmed means: {worst_spread * 100:.2f}%** (target <= 2%)",
              f"**Largest difference from do_bench: {worst_bench * 100:.2f}%** (target <= 5%)", "",
              "| task | eager ms | torch.compile ms | note |", "| --- | --- | --- | --- |"]
    for name, b in baselines.items():
        eager = "-" if b["eager"] is None else f"{b['eager']:.4f}"
        compiled = "-" if b["compile"] is None else f"{b['compile']:.4f}"
        lines.append(f"| {name} | {eager} | {compiled} | {b['note'] or ''} |")
    print("\n".join(lines) + "\n")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"rows": rows, "baselines": baselines, "device": device},
                                                  indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
