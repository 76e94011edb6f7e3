"""Evaluation throughput of an EvaluatorFleet with 1 GPU and with 2 GPUs of one host, in one run.

    python3 benchmarks/fleet_scaling.py [--gpus 1,2] [--copies 2] [--max-parallel N]
                                        [--only k1,k2] [--json-out FILE] [--cpu-check]

For each GPU count n: a fresh fleet over cuda:0..n-1 with its own empty work_dir (Triton cache,
baselines, locks), its pools started before the clock, then the mix of benchmarks/throughput/
repeated --copies times, every candidate submitted at once through `fleet.evaluate`. Copies
differ by a trailing comment, so the result cache never answers. Prints markdown on stdout
(progress on stderr): candidates per hour per phase and the scaling ratio; for the largest
fleet, each GPU's own reference timings and, after the clock stops, every correct kernel
evaluated on each GPU explicitly and their largest runtime disagreement.

--cpu-check runs the same logic through Triton's interpreter on shrunk tasks with CPU members
standing in for GPUs (host-clock timing), and exits 1 if any pair got an unexpected status.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "throughput"))
import mix  # noqa: E402

MIN_MS = 0.1


def make_fleet(n: int, args, work: Path):
    from adaexplore.evaluator.fleet import EvaluatorFleet
    from adaexplore.evaluator.service import Evaluator

    if args.cpu_check:
        # The fleet refuses two CPU devices by name, so members come prebuilt. Each gets its own
        # work_dir: the baseline key names the GPU ("cpu" for both), and a shared store would
        # let member 1 reuse member 0's reference timing instead of measuring its own.
        return EvaluatorFleet(members=[
            Evaluator(device="cpu", work_dir=work / f"member{i}", cpu_timing=True, baselines=("eager",),
                      max_parallel=args.max_parallel or 1) for i in range(n)])
    return EvaluatorFleet(devices=[f"cuda:{i}" for i in range(n)], work_dir=work,
                          max_parallel=args.max_parallel, baselines=("eager",))


def tagged(kernel: str, tag: str) -> str:
    """The kernel's source with a distinct last line, so no result cache answers for it."""
    return mix.kernel_source(kernel).rstrip("\n") + f"\n# {tag}\n"


def submit(evaluate, task, source) -> dict:
    """One evaluation; a harness failure becomes a status so one pair cannot end the run."""
    s0 = time.monotonic()
    try:
        r = evaluate(task, source)
        res = {"status": r.status.value, "ms": r.timing.mean_ms if r.timing else None}
    except Exception as exc:  # noqa: BLE001
        res = {"status": f"harness_error: {type(exc).__name__}: {exc}"[:200], "ms": None}
    res["latency_s"] = time.monotonic() - s0
    return res


def cross_check(fleet, pairs, tasks) -> dict:
    """Every correct kernel of the mix on each member explicitly: kernel -> per-member results."""
    n = len(fleet.members)
    jobs = [(t, k, i) for t, k, expected in pairs if expected == "correct" for i in range(n)]

    def one(job):
        t, k, i = job
        res = submit(fleet.members[i].evaluate, tasks[t], tagged(k, f"on gpu {i}"))
        mix.log(f"[cross] {k} on member {i}: {res['status']} {res['ms']}")
        return job, res

    out: dict = {}
    with ThreadPoolExecutor(max(1, len(jobs))) as ex:
        for (t, k, i), res in ex.map(one, jobs):
            out.setdefault(k, {"task": t, "runs": [None] * n})["runs"][i] = res
    return out


def run_phase(n: int, pairs, tasks, args, root: Path, cross: bool) -> dict:
    fleet = make_fleet(n, args, root / f"fleet-{n}")
    out: dict = {"gpus": n, "devices": fleet.devices}
    try:
        t0 = time.monotonic()
        for m in fleet.members:
            m.pool.ensure_started()
        out["startup_s"] = time.monotonic() - t0
        mix.log(f"[{n}] {n} member(s) ready in {out['startup_s']:.1f} s on {fleet.devices}")
        jobs = [(f"{k}#{c}", t, k, tagged(k, f"copy {c}"))
                for c in range(1, args.copies + 1) for t, k, _ in pairs]

        def one(job):
            label, t, k, src = job
            res = submit(fleet.evaluate, tasks[t], src)
            # The member that ran it is the one whose result cache now holds it.
            res.update(task=t, kernel=k, member=next(
                (i for i, m in enumerate(fleet.members) if m.cached(tasks[t], src) is not None), None))
            mix.log(f"[{n}] {label}: {res['status']} in {res['latency_s']:.1f} s on member {res['member']}")
            return label, res

        t1 = time.monotonic()
        with ThreadPoolExecutor(len(jobs)) as ex:
            out["candidates"] = dict(ex.map(one, jobs))
        out["wall_s"] = time.monotonic() - t1
        if cross:
            out["cross"] = cross_check(fleet, pairs, tasks)
            # Cached by now for every task a member has seen; measured here (off the clock) if not.
            out["ref_ms"] = {}
            for t in sorted({t for t, _, _ in pairs}):
                refs = [m.reference(tasks[t]) for m in fleet.members]
                out["ref_ms"][t] = [r.timing.mean_ms if r.timing else None for r in refs]
    finally:
        fleet.close()
    return out


def fmt(x, spec=".4f") -> str:
    return "-" if x is None else format(x, spec)


def rel(d: float | None) -> str:
    return "-" if d is None else f"{d * 100:.2f}%"


def spread(values) -> float | None:
    """(max - min) / min over members, or None unless every value is a positive number."""
    if not values or any(v is None or v <= 0 for v in values):
        return None
    return (max(values) - min(values)) / min(values)


def report(phases: list[dict], pairs, args, device: str) -> tuple[str, bool]:
    unit = "members (CPU)" if args.cpu_check else "GPUs"
    lines = [f"# Fleet scaling ({'CPU check, shrunk tasks, interpreter' if args.cpu_check else device})", "",
             f"Mix: {len(pairs)} pairs x {args.copies} copies, all submitted at once; a fresh fleet and "
             "work_dir per phase.", "",
             f"| {unit} | candidates | wall s | candidates/hour | p50 latency s | p95 latency s | "
             "candidates per member | start-up s |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    rates, problems = {}, []
    for ph in phases:
        if "wall_s" not in ph:
            lines.append(f"| {ph['gpus']} | failed: {ph.get('error', '?')} | | | | | | |")
            problems.append(f"{ph['gpus']}-member phase failed")
            continue
        c = ph["candidates"]
        lat = [r["latency_s"] for r in c.values()]
        rates[ph["gpus"]] = len(c) / ph["wall_s"] * 3600
        per = [sum(r["member"] == i for r in c.values()) for i in range(ph["gpus"])]
        lines.append(f"| {ph['gpus']} | {len(c)} | {ph['wall_s']:.1f} | {rates[ph['gpus']]:.0f} | "
                     f"{mix.pct(lat, 50):.2f} | {mix.pct(lat, 95):.2f} | {' / '.join(map(str, per))} | "
                     f"{fmt(ph.get('startup_s'), '.1f')} |")
        expected = {k: e for _, k, e in pairs}
        problems += [f"{label}: {r['status']} (expected {expected[r['kernel']]}) on {ph['gpus']}-member fleet"
                     for label, r in c.items() if r["status"] != expected[r["kernel"]]]
    lines.append("")
    for n, rate in sorted(rates.items()):
        if n > 1 and 1 in rates:
            lines.append(f"**Scaling ({n} {unit} / 1): {rate / rates[1]:.2f}x** (target >= {0.9 * n:.1f})")
    big = next((ph for ph in reversed(phases) if ph.get("cross")), None)
    if big:
        n = big["gpus"]
        cols = " | ".join(f"member {i} ({d})" for i, d in enumerate(big["devices"]))
        sep = " | ".join(["---"] * (n + 2))
        lines += ["", f"## Reference (eager) mean ms, measured by each member of the {n}-member fleet", "",
                  f"| task | {cols} | spread |", f"| {sep} |"]
        for t, ms in big["ref_ms"].items():
            d = spread(ms)
            lines.append(f"| {t} | {' | '.join(fmt(v) for v in ms)} | {rel(d)} |")
        lines += ["", "## Correct kernels evaluated on each member (after the clock)", "",
                  f"| task | kernel | {cols} | spread |", f"| --- | {sep} |"]
        worst = None
        for k, entry in big["cross"].items():
            runs = entry["runs"]
            ms = [r["ms"] if r and r["status"] == "correct" else None for r in runs]
            d = spread(ms)
            if d is not None and (args.cpu_check or min(ms) >= MIN_MS) and (worst is None or d > worst[0]):
                worst = (d, k)
            problems += [f"{k} on member {i}: {r['status'] if r else 'not run'} (expected correct)"
                         for i, r in enumerate(runs) if not r or r["status"] != "correct"]
            cells = " | ".join(fmt(v) if v is not None else (r or {}).get("status", "-") for v, r in zip(ms, runs))
            lines.append(f"| {entry['task']} | {k} | {cells} | {rel(d)} |")
        scope = "all timed kernels (host clock)" if args.cpu_check else f"kernels >= {MIN_MS} ms"
        lines.append("")
        lines.append(f"**Largest cross-member disagreement over {scope}: {worst[0] * 100:.2f}% ({worst[1]})** "
                     "(target <= 3%)" if worst else f"No correct kernel over {scope} was timed on every member.")
    lines.append(f"Every pair got its expected status: {'yes' if not problems else 'NO'}")
    lines += [f"- {p}" for p in problems]
    return "\n".join(lines) + "\n", not problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", default="1,2", help="comma-separated GPU counts, one phase each")
    parser.add_argument("--copies", type=int, default=2, help="times the mix is repeated per phase")
    parser.add_argument("--max-parallel", type=int, default=None, help="worker processes per member")
    parser.add_argument("--only", default=None, help="comma-separated kernel names")
    parser.add_argument("--json-out", default=None)
    parser.add_argument("--cpu-check", action="store_true", help="shrunk tasks through the interpreter")
    args = parser.parse_args()

    if args.cpu_check:  # before anything imports triton
        os.environ["TRITON_INTERPRET"] = "1"
    mix.ensure_importable()
    import torch

    from adaexplore.evaluator.results import EvalProtocol
    from adaexplore.evaluator.task import load_task_file

    pairs = [p for p in mix.PAIRS if not args.only or p[1] in set(args.only.split(","))]
    counts = sorted({int(g) for g in args.gpus.split(",")})
    available = torch.cuda.device_count() if torch.cuda.is_available() else 0
    device = f"{available} x {torch.cuda.get_device_name(0)}" if available else "cpu"
    root = Path(tempfile.mkdtemp(prefix="adaexplore-fleet-"))
    task_paths = mix.materialize_tasks(root / "tasks", small=args.cpu_check)
    tasks = {name: load_task_file(path) for name, path in task_paths.items()}
    if args.cpu_check:
        protocol = EvalProtocol(warmup_runs=2, timed_runs=10, timeout_s=300)
        tasks = {n: t.model_copy(update={"protocol": protocol}) for n, t in tasks.items()}
    mix.log(f"{len(pairs)} pairs x {args.copies} copies, phases {counts} on {device}; scratch {root}")

    phases = []
    for n in counts:
        if not args.cpu_check and n > available:
            phases.append({"gpus": n, "error": f"only {available} GPU(s) visible"})
            continue
        try:
            phases.append(run_phase(n, pairs, tasks, args, root, cross=n == counts[-1] and n > 1))
        except Exception as exc:  # noqa: BLE001 - report the other phases anyway
            mix.log(f"[{n}] failed: {type(exc).__name__}: {exc}")
            phases.append({"gpus": n, "error": f"{type(exc).__name__}: {exc}"[:200]})
    text, ok = report(phases, pairs, args, device)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"device": device, "phases": phases}, indent=1, default=str))
    return 0 if ok or not args.cpu_check else 1


if __name__ == "__main__":
    raise SystemExit(main())
