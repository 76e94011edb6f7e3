"""Evaluation throughput of an EvaluatorFleet with 1 GPU and with 2 GPUs of one host, in one run.
Runs as a script in its own process; the fleet's members start their own workers.

    python3 benchmarks/fleet_scaling.py [--gpus 1,2] [--copies 2] [--max-parallel N]
                                        [--only k1,k2] [--json-out FILE] [--cpu-check]
                                        [--kb-level2 DIR [--kb-candidates DIR] [--cross-max N]]
                                        [--deadline-s S]

Workloads: by default the mix of benchmarks/throughput/; with --kb-level2 a search-shaped
KernelBench level-2 workload instead: every task of DIR (e.g. `.kb/level2`) that has honest
candidates in --kb-candidates (default benchmarks/candidates/level2/<task stem>/<variant>.py),
all its variants submitted at once. Without either folder it says so and exits 0.

For each GPU count n: a fresh fleet over cuda:0..n-1 with its own empty work_dir (Triton cache,
baselines, locks), its members (warm parents and judges) started together before the clock,
then the workload repeated --copies times, every candidate submitted at once through
`fleet.evaluate`. Copies differ by a trailing comment, so the result cache never answers.
Prints markdown on stdout (progress on stderr): candidates per hour per phase and the scaling
ratio; for the largest fleet, each GPU's own reference timings and, after the clock stops,
the correct kernels (at most --cross-max of them) evaluated on each GPU explicitly, their
spread (max/min - 1) and the largest; and every honest kernel called `cheat_detected`.
Past --deadline-s the phases and checks not yet begun are skipped and reported so.

--cpu-check runs the mix through Triton's interpreter on shrunk tasks with CPU members
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
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "throughput"))
import mix  # noqa: E402
from eval_throughput import trace_table  # noqa: E402

MIN_MS = 0.1
KB_CANDIDATES = Path(__file__).resolve().parent / "candidates" / "level2"


@dataclass
class Workload:
    """What one phase submits: (task, kernel, expected status) pairs, the tasks, the kernels' code."""

    title: str
    pairs: list[tuple[str, str, str]]
    tasks: dict = field(default_factory=dict)  # task name -> Task
    sources: dict[str, str] = field(default_factory=dict)  # kernel -> source


def kb_pairs(problems: Path, candidates: Path) -> tuple[list[tuple[str, Path, Path]], str | None]:
    """(task stem, problem file, candidate file) for every candidate whose task is among
    `problems`, sorted; or no pairs and the reason there is nothing to run."""
    if not problems.is_dir():
        return [], f"no KernelBench level-2 problems at {problems}"
    if not candidates.is_dir():
        return [], f"no level-2 candidates at {candidates} (expected <task stem>/<variant>.py)"
    out = []
    for folder in sorted(p for p in candidates.iterdir() if p.is_dir()):
        problem = problems / f"{folder.name}.py"
        if problem.is_file():
            out += [(folder.name, problem, c) for c in sorted(folder.glob("*.py"))]
    if not out:
        return [], f"no candidate under {candidates} names a task of {problems}"
    return out, None


def mix_workload(pairs, task_paths: dict) -> Workload:
    from adaexplore.evaluator.task import load_task_file

    return Workload(title=f"Mix: {len(pairs)} pairs", pairs=list(pairs),
                    tasks={name: load_task_file(path) for name, path in task_paths.items()},
                    sources={k: mix.kernel_source(k) for _, k, _ in pairs})


def kb_workload(found: list[tuple[str, Path, Path]]) -> Workload:
    """Honest candidates: each is expected `correct`."""
    from adaexplore.evaluator.task import load_task_file

    work = Workload(title=f"KernelBench level 2, search-shaped: {len({t for t, _, _ in found})} tasks, "
                          f"{len(found)} candidates", pairs=[])
    for stem, problem, cand in found:
        kernel = f"{stem}/{cand.stem}"
        work.tasks.setdefault(stem, load_task_file(problem))
        work.sources[kernel] = cand.read_text()
        work.pairs.append((stem, kernel, "correct"))
    return work


def make_fleet(n: int, args, work: Path):
    from adaexplore.evaluator.evaluator import Evaluator
    from adaexplore.evaluator.fleet import EvaluatorFleet

    if args.cpu_check:
        # The fleet refuses two CPU devices by name, so members come prebuilt. Each gets its own
        # work_dir: the baseline key names the GPU ("cpu" for both), and a shared store would
        # let member 1 reuse member 0's reference timing instead of measuring its own.
        return EvaluatorFleet(members=[
            Evaluator(device="cpu", work_dir=work / f"member{i}", cpu_timing=True, baselines=("eager",),
                      max_parallel=args.max_parallel or 1, trace=True) for i in range(n)])
    return EvaluatorFleet(devices=[f"cuda:{i}" for i in range(n)], work_dir=work,
                          max_parallel=args.max_parallel, baselines=("eager",), trace=True)


def tagged(work: Workload, kernel: str, tag: str) -> str:
    """The kernel's source with a distinct last line, so no result cache answers for it."""
    return work.sources[kernel].rstrip("\n") + f"\n# {tag}\n"


def submit(evaluate, task, source) -> dict:
    """One evaluation; a harness failure becomes a status so one pair cannot end the run."""
    s0 = time.monotonic()
    try:
        r = evaluate(task, source)
        res = {"status": r.status.value, "ms": r.timing.mean_ms if r.timing else None,
               "autotune": list(r.autotune_configs)}
    except Exception as exc:  # noqa: BLE001
        res = {"status": f"harness_error: {type(exc).__name__}: {exc}"[:200], "ms": None}
    res["latency_s"] = time.monotonic() - s0
    return res


def cross_check(fleet, work: Workload, limit: int | None) -> dict:
    """Correct kernels (the first `limit`, or all) on each member explicitly: kernel -> per-member results."""
    n = len(fleet.members)
    kernels = [(t, k) for t, k, expected in work.pairs if expected == "correct"][:limit or None]
    jobs = [(t, k, i) for t, k in kernels for i in range(n)]

    def one(job):
        t, k, i = job
        res = submit(fleet.members[i].evaluate, work.tasks[t], tagged(work, k, f"on gpu {i}"))
        mix.log(f"[cross] {k} on member {i}: {res['status']} {res['ms']}")
        return job, res

    out: dict = {}
    with ThreadPoolExecutor(max(1, len(jobs))) as ex:
        for (t, k, i), res in ex.map(one, jobs):
            out.setdefault(k, {"task": t, "runs": [None] * n})["runs"][i] = res
    return out


def run_phase(n: int, work: Workload, args, root: Path, cross: bool, deadline: float) -> dict:
    tasks = work.tasks
    fleet = make_fleet(n, args, root / f"fleet-{n}")
    out: dict = {"gpus": n, "devices": fleet.devices}
    try:
        out["startup_s"] = fleet.start()  # warm parents and judges of all members, side by side
        mix.log(f"[{n}] {n} member(s) ready in {out['startup_s']:.1f} s on {fleet.devices}")
        jobs = [(f"{k}#{c}", t, k, tagged(work, k, f"copy {c}"))
                for c in range(1, args.copies + 1) for t, k, _ in work.pairs]

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
        # Where each member's jobs spent their time on the clock (the checks after it not included).
        out["trace"] = [[{**e, "at": round(e["at"] - t1, 3)} for e in list(m.trace or [])] for m in fleet.members]
        names = {task.task_id: name for name, task in tasks.items()}
        out["homes"] = {names.get(t, t): sorted(ms) for (t, _), ms in fleet.dispatch.homes.items()}
        if cross and time.monotonic() > deadline:
            out["cross_skipped"] = "past the deadline"
        elif cross:
            out["cross"] = cross_check(fleet, work, args.cross_max)
            # Cached by now for every task a member has seen; measured here (off the clock) if not.
            out["ref_ms"] = {}
            for t in sorted({t for t, _, _ in work.pairs}):
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


def report(phases: list[dict], work: Workload, args, device: str) -> tuple[str, bool]:
    unit = "members (CPU)" if args.cpu_check else "GPUs"
    shrunk = ", shrunk tasks" if not args.kb_level2 else ""
    lines = [f"# Fleet scaling ({f'CPU check{shrunk}, interpreter' if args.cpu_check else device})", "",
             f"{work.title} x {args.copies} copies, all submitted at once; a fresh fleet and work_dir per phase.",
             "", f"| {unit} | candidates | wall s | candidates/hour | p50 latency s | p95 latency s | "
             "candidates per member | tasks whose reference is on 2+ members | start-up s | first correct s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    rates, steady, problems, cheats = {}, {}, [], []
    expected = {k: e for _, k, e in work.pairs}
    for ph in phases:
        if "wall_s" not in ph:
            lines.append(f"| {ph['gpus']} | failed: {ph.get('error', '?')} | | | | | | | | |")
            problems.append(f"{ph['gpus']}-member phase failed or was skipped")
            continue
        c = ph["candidates"]
        lat = [r["latency_s"] for r in c.values()]
        rates[ph["gpus"]] = len(c) / ph["wall_s"] * 3600
        # The rate once results flow: from the first timed (correct) result, when references are
        # built and the first kernels compiled, to the last (failures found early come sooner).
        first = min((r["latency_s"] for r in c.values() if r["status"] == "correct"), default=min(lat))
        after = [x for x in lat if x > first]
        if after:
            steady[ph["gpus"]] = len(after) / (max(lat) - first) * 3600
        per = [sum(r["member"] == i for r in c.values()) for i in range(ph["gpus"])]
        shared = sum(len(ms) > 1 for ms in ph.get("homes", {}).values())
        lines.append(f"| {ph['gpus']} | {len(c)} | {ph['wall_s']:.1f} | {rates[ph['gpus']]:.0f} | "
                     f"{mix.pct(lat, 50):.2f} | {mix.pct(lat, 95):.2f} | {' / '.join(map(str, per))} | "
                     f"{shared} of {len(ph.get('homes', {}))} | {fmt(ph.get('startup_s'), '.1f')} | {first:.1f} |")
        problems += [f"{label}: {r['status']} (expected {expected[r['kernel']]}) on {ph['gpus']}-member fleet"
                     for label, r in c.items() if r["status"] != expected[r["kernel"]]]
        cheats += [f"{label} ({ph['gpus']}-member fleet, {fmt(r['ms'])} ms)" for label, r in c.items()
                   if r["status"] == "cheat_detected" and expected[r["kernel"]] == "correct"]
    lines.append("")
    for n, rate in sorted(rates.items()):
        if n > 1 and 1 in rates:
            lines.append(f"**Scaling ({n} {unit} / 1): {rate / rates[1]:.2f}x** (target >= {0.9 * n:.1f})")
            if n in steady and 1 in steady:
                lines.append(f"From each phase's first correct result to its last: {steady[n] / steady[1]:.2f}x "
                             f"({steady[1]:.0f} and {steady[n]:.0f} candidates/hour).")
    for ph in phases:
        for i, trace in enumerate(ph.get("trace") or []):
            if trace:
                lines += ["", f"Where member {i}'s jobs spent their time, {ph['gpus']}-member fleet, "
                          "mean (max) seconds:", "", *trace_table(trace)]
    big = next((ph for ph in reversed(phases) if ph.get("cross")), None)
    skipped = next((ph for ph in phases if ph.get("cross_skipped")), None)
    if skipped:
        lines += ["", f"Cross-member check skipped: {skipped['cross_skipped']}."]
        problems.append("cross-member check skipped")
    if big:
        n = big["gpus"]
        cols = " | ".join(f"member {i} ({d})" for i, d in enumerate(big["devices"]))
        sep = " | ".join(["---"] * (n + 2))
        lines += ["", f"## Reference (eager) mean ms, measured by each member of the {n}-member fleet", "",
                  f"| task | {cols} | spread |", f"| {sep} |"]
        for t, ms in big["ref_ms"].items():
            d = spread(ms)
            lines.append(f"| {t} | {' | '.join(fmt(v) for v in ms)} | {rel(d)} |")
        lines += ["", "## Correct kernels evaluated on each member (after the clock); spread = max/min - 1", "",
                  f"| task | kernel | {cols} | spread |", f"| --- | {sep} |"]
        worst, tuned_apart = None, []
        for k, entry in big["cross"].items():
            runs = entry["runs"]
            ms = [r["ms"] if r and r["status"] == "correct" else None for r in runs]
            d = spread(ms)
            if d is not None and (args.cpu_check or min(ms) >= MIN_MS) and (worst is None or d > worst[0]):
                worst = (d, k)
            problems += [f"{k} on member {i}: {r['status'] if r else 'not run'} (expected correct)"
                         for i, r in enumerate(runs) if not r or r["status"] != "correct"]
            cheats += [f"{k} on member {i} (after the clock, {fmt(r['ms'])} ms)" for i, r in enumerate(runs)
                       if r and r["status"] == "cheat_detected"]
            cells = " | ".join(fmt(v) if v is not None else (r or {}).get("status", "-") for v, r in zip(ms, runs))
            lines.append(f"| {entry['task']} | {k} | {cells} | {rel(d)} |")
            configs = [tuple((r or {}).get("autotune") or ()) for r in runs]
            if any(configs) and len(set(configs)) > 1:
                tuned_apart.append(f"- {k}: " + "; ".join(f"member {i} chose {', '.join(c) or '-'}"
                                                         for i, c in enumerate(configs)))
        scope = "all timed kernels (host clock)" if args.cpu_check else f"kernels >= {MIN_MS} ms"
        lines.append("")
        lines.append(f"**Largest cross-member disagreement over {scope}: {worst[0] * 100:.2f}% ({worst[1]})** "
                     "(target <= 3%)" if worst else f"No correct kernel over {scope} was timed on every member.")
        if tuned_apart:
            lines += ["", "Autotuned kernels whose members chose different configs:", *tuned_apart]
    lines.append(f"Honest kernels called `cheat_detected`: {'none' if not cheats else len(cheats)}")
    lines += [f"- {c}" for c in cheats]
    lines.append(f"Every pair got its expected status: {'yes' if not problems else 'NO'}")
    lines += [f"- {p}" for p in problems]
    return "\n".join(lines) + "\n", not problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", default="1,2", help="comma-separated GPU counts, one phase each")
    parser.add_argument("--copies", type=int, default=2, help="times the workload is repeated per phase")
    parser.add_argument("--max-parallel", type=int, default=None, help="worker processes per member")
    parser.add_argument("--only", default=None, help="comma-separated kernel names (of the mix)")
    parser.add_argument("--json-out", default=None)
    parser.add_argument("--cpu-check", action="store_true", help="shrunk tasks through the interpreter")
    parser.add_argument("--kb-level2", type=Path, default=None,
                        help="folder of KernelBench level-2 problems: run the search-shaped level-2 workload")
    parser.add_argument("--kb-candidates", type=Path, default=KB_CANDIDATES,
                        help="folder of <task stem>/<variant>.py honest candidates")
    parser.add_argument("--cross-max", type=int, default=None, help="correct kernels checked on every member")
    parser.add_argument("--deadline-s", type=float, default=None,
                        help="skip phases and checks not begun this many seconds after the start")
    args = parser.parse_args()
    started = time.monotonic()
    deadline = started + args.deadline_s if args.deadline_s else float("inf")

    found: list = []
    if args.kb_level2 is not None:
        found, reason = kb_pairs(args.kb_level2, args.kb_candidates)
        if reason:
            print(f"# Fleet scaling, KernelBench level 2: skipped\n\n{reason}.")
            return 0
    if args.cpu_check:  # before anything imports triton
        os.environ["TRITON_INTERPRET"] = "1"
    mix.ensure_importable()
    import torch

    from adaexplore.evaluator.results import EvalProtocol

    counts = sorted({int(g) for g in args.gpus.split(",")})
    available = torch.cuda.device_count() if torch.cuda.is_available() else 0
    device = f"{available} x {torch.cuda.get_device_name(0)}" if available else "cpu"
    root = Path(tempfile.mkdtemp(prefix="adaexplore-fleet-"))
    if found:
        work = kb_workload(found)
    else:
        pairs = [p for p in mix.PAIRS if not args.only or p[1] in set(args.only.split(","))]
        work = mix_workload(pairs, mix.materialize_tasks(root / "tasks", small=args.cpu_check))
    if args.cpu_check:
        protocol = EvalProtocol(warmup_runs=2, timed_runs=10, timeout_s=300)
        work.tasks = {n: t.model_copy(update={"protocol": protocol}) for n, t in work.tasks.items()}
    mix.log(f"{work.title} x {args.copies} copies, phases {counts} on {device}; scratch {root}")

    phases = []
    for n in counts:
        if not args.cpu_check and n > available:
            phases.append({"gpus": n, "error": f"only {available} GPU(s) visible"})
            continue
        if time.monotonic() > deadline:
            phases.append({"gpus": n, "error": "skipped: past the deadline"})
            continue
        try:
            phases.append(run_phase(n, work, args, root, cross=n == counts[-1] and n > 1, deadline=deadline))
        except Exception as exc:  # noqa: BLE001 - report the other phases anyway
            mix.log(f"[{n}] failed: {type(exc).__name__}: {exc}")
            phases.append({"gpus": n, "error": f"{type(exc).__name__}: {exc}"[:200]})
    text, ok = report(phases, work, args, device)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"device": device, "workload": work.title, "phases": phases},
                                                  indent=1, default=str))
    return 0 if ok or not args.cpu_check else 1


if __name__ == "__main__":
    raise SystemExit(main())
