"""Candidates per GPU-hour: the warm evaluator against a cold process per candidate.

    python3 benchmarks/eval_throughput.py [--quick] [--cpu-check] [--json-out FILE]

Runs a fixed mix of (task, candidate) pairs (benchmarks/throughput/: correct, wrong,
non-compiling, slow and autotuned kernels) through
  (a) the evaluator: warm forked workers, candidates submitted concurrently, one device;
  (b) one fresh `python` process per candidate (evaluator/coldrun.py): the same jobs, the
      same protocol and timing code, nothing reused but the on-disk Triton cache.
Each mode starts from its own empty Triton cache. Prints markdown on stdout (progress on
stderr): throughput of both, their ratio, per-candidate latency, and for every correct
candidate of at least 0.1 ms its runtime in both modes and their largest disagreement.

--cpu-check shrinks every task and runs both modes through Triton's interpreter (host-clock
timing), checking that each pair gets its expected status. --quick runs the cold mode on a
stratified subset of 6 pairs and derives its rate from their mean latency.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "throughput"))
import mix  # noqa: E402

MIN_MS = 0.1


def run_warm(pairs, task_paths, protocol, args, root: Path) -> dict:
    from adaexplore.evaluator.evaluator import Evaluator
    from adaexplore.evaluator.task import load_task_file

    tasks = {name: load_task_file(path) for name, path in task_paths.items()}
    if protocol is not None:
        tasks = {n: t.model_copy(update={"protocol": protocol}) for n, t in tasks.items()}
    ev = Evaluator(work_dir=root / "warm", max_parallel=args.max_parallel, baselines=("eager",),
                   cpu_timing=args.cpu_check, quiet_timing=not args.shared_gpu, trace=True)
    out: dict = {"results": {}, "latency": {}}
    try:
        t0 = time.monotonic()
        ev.pool.ensure_started()
        out["startup_s"] = time.monotonic() - t0
        mix.log(f"[warm] warm parent ready in {out['startup_s']:.1f} s on {ev.device}")

        def one(pair):
            task_name, kernel, _ = pair
            s0 = time.monotonic()
            try:
                r = ev.evaluate(tasks[task_name], mix.kernel_source(kernel))
                res = {"status": r.status.value, "ms": r.timing.mean_ms if r.timing else None,
                       "ref_ms": r.reference_timing.mean_ms if r.reference_timing else None,
                       "speedup": r.speedup, "autotune": r.autotune_configs, "feedback": r.feedback(400)}
            except Exception as exc:  # noqa: BLE001 - one pair must not end the run
                res = {"status": f"harness_error: {type(exc).__name__}: {exc}"[:200], "ms": None}
            lat = time.monotonic() - s0
            mix.log(f"[warm] {kernel}: {res['status']} in {lat:.1f} s {res.get('autotune') or ''}")
            return kernel, res, lat

        t1 = time.monotonic()
        with ThreadPoolExecutor(max(1, args.workers or len(pairs))) as pool:
            for kernel, res, lat in pool.map(one, pairs):
                out["results"][kernel] = res
                out["latency"][kernel] = lat
        out["wall_s"] = time.monotonic() - t1
        out["trace"] = [{**e, "at": round(e["at"] - t1, 3)} for e in ev.trace or []]
    finally:
        ev.close()
    return out


def trace_table(trace: list[dict]) -> list[str]:
    """Where the warm mode's worker jobs spent their time, by kind: mean (max) seconds. The
    evaluator's own clock first (queued, set up, waiting for and holding the GPU, the whole run),
    then the phases the workers report (see `Phase`), where any did."""
    from adaexplore.common.vocab import Phase

    phases = ["queued_s", "setup_s", "gpu_wait_s", "measure_s", "run_s"]
    phases += [p.value for p in Phase if any(p.value in e for e in trace)]
    groups: dict[str, list[dict]] = {}
    for e in trace:
        name = e["kind"] + (" (candidate)" if e["kind"] == "timing" and e["candidate"] else
                            " (torch.compile baseline)" if e["kind"] == "timing" and e.get("compile") else
                            " (baseline)" if e["kind"] == "timing" else "")
        if e.get("paused") == 0.0:  # measured again: the paused measurement saw a shared GPU
            name += ", measured again after the others finished"
        groups.setdefault(name, []).append(e)
    lines = ["| warm job | count | " + " | ".join(p.removesuffix("_s") + " s" for p in phases) + " |",
             "| --- | --- |" + " --- |" * len(phases)]
    for name, items in sorted(groups.items()):
        cells = []
        for p in phases:
            xs = [e[p] for e in items if p in e]
            cells.append(f"{sum(xs) / len(xs):.2f} ({max(xs):.2f})" if xs else "-")
        lines.append(f"| {name} | {len(items)} | " + " | ".join(cells) + " |")
    return lines


def run_cold(pairs, task_paths, protocol, args, root: Path) -> dict:
    cache = root / "cold-triton-cache"
    cache.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, TRITON_CACHE_DIR=str(cache))
    if args.cpu_check:
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    out: dict = {"results": {}, "latency": {}}
    t0 = time.monotonic()
    for task_name, kernel, _ in pairs:
        result_file = root / f"cold-{kernel}.json"
        cmd = [sys.executable, "-m", "adaexplore.evaluator.coldrun", "--task", str(task_paths[task_name]),
               "--candidate", str(mix.KERNELS / f"{kernel}.py"), "--out", str(result_file)]
        if protocol is not None:
            cmd += ["--protocol", protocol.model_dump_json()]
        if args.cpu_check:
            cmd += ["--cpu-timing", "--device", "cpu"]
        s0 = time.monotonic()
        try:
            proc = subprocess.run(cmd, env=env, cwd=str(root), capture_output=True, text=True,
                                  timeout=args.cold_timeout)
            if result_file.exists():
                r = json.loads(result_file.read_text())
                timing = r.get("timing") or {}
                res = {"status": r.get("status"), "ms": timing.get("mean_ms"), "autotune": r.get("autotune_configs")}
            else:
                res = {"status": "runtime_error", "ms": None,
                       "note": f"process ended ({proc.returncode}) without a result: {proc.stderr[-300:]}"}
        except subprocess.TimeoutExpired:
            res = {"status": "timeout", "ms": None}
        except Exception as exc:  # noqa: BLE001
            res = {"status": f"harness_error: {type(exc).__name__}: {exc}"[:200], "ms": None}
        lat = time.monotonic() - s0
        mix.log(f"[cold] {kernel}: {res['status']} in {lat:.1f} s {res.get('autotune') or ''}")
        out["results"][kernel] = res
        out["latency"][kernel] = lat
    out["wall_s"] = time.monotonic() - t0
    return out


def fmt(x, spec=".4f") -> str:
    return "-" if x is None else format(x, spec)


def report(pairs, warm: dict, cold: dict, args, device: str) -> tuple[str, bool]:
    lines = [f"# Evaluator throughput ({'CPU check, shrunk tasks' if args.cpu_check else device})", ""]
    n_warm = len(warm.get("results", {}))
    warm_rate = n_warm / warm["wall_s"] * 3600 if warm.get("wall_s") else None
    cold_lat = list(cold.get("latency", {}).values())
    cold_rate = 3600 / (sum(cold_lat) / len(cold_lat)) if cold_lat else None
    ratio = warm_rate / cold_rate if warm_rate and cold_rate else None
    wl = list(warm.get("latency", {}).values())
    lines += ["| mode | candidates | wall s | candidates per GPU-hour | p50 latency s | p95 latency s |",
              "| --- | --- | --- | --- | --- | --- |",
              f"| warm evaluator ({args.max_parallel or 'default'} workers, concurrent) | {n_warm} | "
              f"{fmt(warm.get('wall_s'), '.1f')} | {fmt(warm_rate, '.0f')} | {fmt(mix.pct(wl, 50), '.2f')} | "
              f"{fmt(mix.pct(wl, 95), '.2f')} |",
              f"| cold process per candidate | {len(cold_lat)} | {fmt(cold.get('wall_s'), '.1f')} | "
              f"{fmt(cold_rate, '.0f')} | {fmt(mix.pct(cold_lat, 50), '.2f')} | {fmt(mix.pct(cold_lat, 95), '.2f')} |",
              "", f"**Ratio (warm / cold): {fmt(ratio, '.1f')}x** (target >= 10)",
              f"Warm parent start-up, not counted above: {fmt(warm.get('startup_s'), '.1f')} s.", ""]
    if args.quick and not args.cpu_check:
        lines.append(f"Cold mode ran on {len(cold_lat)} of {len(pairs)} pairs (--quick); its rate is "
                     "3600 / mean latency of those.")
        lines.append("")
    lines += ["| task | kernel | expected | warm status | cold status | warm ms | cold ms | rel. diff |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    worst = None
    statuses_ok = True
    for task_name, kernel, expected in pairs:
        w = warm.get("results", {}).get(kernel, {})
        c = cold.get("results", {}).get(kernel)
        diff = None
        if w.get("ms") and c and c.get("ms") and w["status"] == c["status"] == "correct":
            diff = abs(w["ms"] - c["ms"]) / c["ms"]
            if (args.cpu_check or min(w["ms"], c["ms"]) >= MIN_MS) and (worst is None or diff > worst[0]):
                worst = (diff, kernel)
        if w.get("status") != expected or (c is not None and c.get("status") != expected):
            statuses_ok = False
        lines.append(f"| {task_name} | {kernel} | {expected} | {w.get('status', '-')} | "
                     f"{c.get('status') if c else '-'} | {fmt(w.get('ms'))} | {fmt(c.get('ms') if c else None)} | "
                     f"{fmt(diff * 100 if diff is not None else None, '.2f')}{'%' if diff is not None else ''} |")
    lines.append("")
    if worst:
        scope = "all timed kernels (host clock, interpreter)" if args.cpu_check else f"kernels >= {MIN_MS} ms"
        lines.append(f"**Largest warm/cold disagreement over {scope}: {worst[0] * 100:.2f}% ({worst[1]})** "
                     "(target <= 3%)")
    else:
        lines.append("No correct candidate was timed in both modes.")
    lines.append(f"Every pair got its expected status in both modes: {'yes' if statuses_ok else 'NO'}")
    if warm.get("trace"):
        lines += ["", "Warm worker jobs, mean (max) seconds: waiting for a slot and the GPU, preparing "
                  "(timing jobs, before their gate), waiting for the exclusive GPU, measuring, running:", ""]
        lines += trace_table(warm["trace"])
    return "\n".join(lines) + "\n", statuses_ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="cold mode on a 6-pair subset")
    parser.add_argument("--cpu-check", action="store_true", help="shrunk tasks through the interpreter")
    parser.add_argument("--max-parallel", type=int, default=None, help="warm worker processes at once")
    parser.add_argument("--workers", type=int, default=None, help="submitting threads (default: all pairs)")
    parser.add_argument("--cold-timeout", type=float, default=300.0)
    parser.add_argument("--skip-cold", action="store_true")
    parser.add_argument("--only", default=None, help="comma-separated kernel names")
    parser.add_argument("--json-out", default=None)
    parser.add_argument("--shared-gpu", action="store_true",
                        help="let correctness runs use the GPU while another candidate is timed")
    args = parser.parse_args()

    if args.cpu_check:
        os.environ["TRITON_INTERPRET"] = "1"
    mix.ensure_importable()
    import torch

    from adaexplore.evaluator.results import EvalProtocol

    pairs = mix.PAIRS
    if args.only:
        keep = set(args.only.split(","))
        pairs = [p for p in pairs if p[1] in keep]
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    protocol = EvalProtocol(warmup_runs=2, timed_runs=10, timeout_s=300) if args.cpu_check else None
    root = Path(tempfile.mkdtemp(prefix="adaexplore-throughput-"))
    task_paths = mix.materialize_tasks(root / "tasks", small=args.cpu_check)
    mix.log(f"{len(pairs)} pairs on {device}; scratch {root}")

    warm: dict = {}
    try:
        warm = run_warm(pairs, task_paths, protocol, args, root)
    except Exception as exc:  # noqa: BLE001
        mix.log(f"[warm] failed: {type(exc).__name__}: {exc}")
    cold: dict = {}
    if not args.skip_cold:
        cold_pairs = [p for p in pairs if p[1] in mix.QUICK_COLD] if args.quick and not args.cpu_check else pairs
        try:
            cold = run_cold(cold_pairs or pairs, task_paths, protocol, args, root)
        except Exception as exc:  # noqa: BLE001
            mix.log(f"[cold] failed: {type(exc).__name__}: {exc}")
    text, ok = report(pairs, warm, cold, args, device)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"warm": warm, "cold": cold, "device": device}, indent=1,
                                                  default=str))
    return 0 if ok or not args.cpu_check else 1


if __name__ == "__main__":
    raise SystemExit(main())
