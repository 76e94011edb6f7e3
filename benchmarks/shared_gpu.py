"""Fair verdicts on a shared GPU: what one candidate's load does to another's verdict and runtime.

Runs on the GPU machine, in one process (the `Evaluator`, its workers and judge). Honest
candidates are the Triton kernels of benchmarks/candidates/level2 for six KernelBench level-2
tasks; every submission goes in at once, each task registered by its first submission, with
the eager baseline only. Phases (each runnable alone with --phases):

- quiet: 6 tasks x 5 identical copies (differing by a comment), on a fresh evaluator, --runs
  times. Bar: per task and run, max/min of the reported runtime (the statistic the speedup uses)
  <= 1.03.
- neighbours: the same 30 honest copies beside three hostile candidates (one takes nearly all
  free device memory in its forward, one launches a kernel that never ends, one queues ~20 s of
  matmuls on a side stream at each forward). Bar: every honest copy `correct`, its runtime
  within 3% of its task's quiet runtime, its latency at most 30 s above its quiet latency; each
  hostile one gets a verdict that says what it did.
- tiny: a ~10 us elementwise kernel (8 MB in, 8 MB out), 5 copies. Bar: max/min <= 1.10.
- loaded: `13_` alone, then again with the device filled (by another process) up to what
  admission lets other jobs hold beside it. Bar: within 3% of alone.

    python benchmarks/shared_gpu.py [--problems .kb] [--phases quiet,neighbours,tiny,loaded] [--runs 5]
        [--json-out FILE] [--markdown FILE] [--cpu-check]

--cpu-check runs the verdict side only, on shrunk tasks through Triton's interpreter (no
timing, no hostile neighbours that need a GPU), to check the script on a machine without one.
Markdown goes to stdout (and --markdown), progress to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
CANDIDATES = HERE / "candidates" / "level2"
HOSTILE = HERE / "candidates" / "hostile"

TASKS = ["13_ConvTranspose3d_Mean_Add_Softmax_Tanh_Scaling", "43_Conv3d_Max_LogSumExp_ReLU",
         "49_ConvTranspose3d_Softmax_Sigmoid", "61_ConvTranspose3d_ReLU_GroupNorm",
         "79_Conv3d_Multiply_InstanceNorm_Clamp_Multiply_Max", "85_Conv2d_GroupNorm_Scale_MaxPool_Clamp"]
COPIES = 5
SPREAD_BAR = 1.03
TINY_BAR = 1.10
RUNTIME_BAR = 0.03
LATENCY_BAR_S = 30.0
# Hostile neighbour -> the task whose honest kernel it wraps.
NEIGHBOURS = {"device_hog": "61_ConvTranspose3d_ReLU_GroupNorm", "endless_kernel": "49_ConvTranspose3d_Softmax_Sigmoid",
              "side_stream_flood": "85_Conv2d_GroupNorm_Scale_MaxPool_Clamp"}

TINY_TASK = '''"""An elementwise task of about 10 us on an H200: 8 MB in, 8 MB out."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * 2.0 + 1.0


def get_inputs():
    return [torch.randn(2 * 1024 * 1024)]


def get_init_inputs():
    return []
'''

TINY_KERNEL = '''"""Triton solution of the tiny elementwise task: one pass, 4096 elements a program."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_scale_shift(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0) * 2.0 + 1.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_scale_shift[(triton.cdiv(n, 4096),)](x, out, n, BLOCK=4096)
        return out
'''


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def honest_source(task: str) -> str:
    """The task's honest candidate: its first kernel file in benchmarks/candidates/level2."""
    files = sorted((CANDIDATES / task).glob("*.py"))
    if not files:
        raise SystemExit(f"no candidate for {task} in {CANDIDATES / task}")
    return files[0].read_text()


def tagged(source: str, tag: str) -> str:
    """The same kernel, told apart from its siblings only by a trailing comment."""
    return source.rstrip("\n") + f"\n# {tag}: only this comment differs\n"


def hostile_source(name: str) -> str:
    """A hostile neighbour: its task's honest kernel, wrapped by the misbehaviour in candidates/hostile."""
    wrapper = (HOSTILE / f"{name}.py").read_text()
    return honest_source(NEIGHBOURS[name]).rstrip("\n") + "\n\n\n" + wrapper


def spread(values: list[float | None]) -> float | None:
    """max/min of the values (None if any is missing)."""
    if not values or any(v is None or v <= 0 for v in values):
        return None
    return max(values) / min(values)  # type: ignore[type-var, operator]


# --- running submissions -------------------------------------------------------------------------

def make_evaluator(root: Path, name: str):
    from adaexplore.evaluator.evaluator import Evaluator

    return Evaluator(work_dir=root / name, baselines=("eager",), trace=True)


def submit_all(ev, tasks: dict, subs: list[dict]) -> list[dict]:
    """Every submission at once; the first of each task registers it (as an agent would)."""
    import threading

    t0 = time.monotonic()
    registered = {name: threading.Event() for name in tasks}
    claimed: set[str] = set()
    lock = threading.Lock()

    def register(name: str) -> None:
        with lock:
            if name in claimed:
                return
            claimed.add(name)
        try:
            ev.validate_task(tasks[name])
        finally:
            registered[name].set()

    def one(sub: dict) -> dict:
        register(sub["task"])
        registered[sub["task"]].wait()
        try:
            r = ev.evaluate(tasks[sub["task"]], sub["source"])
            row = {"status": r.status.value,
                   "median_ms": r.timing.median_ms if r.timing else None,
                   "mean_ms": r.timing.mean_ms if r.timing else None,
                   "speedup": r.speedup, "note": (r.timing_note or "")[:300],
                   "autotuned": r.autotune_configs,
                   "detail": (r.cheat_reason or (f"{r.error.error_class}: {r.error.message}" if r.error else ""))[:400]}
        except Exception as exc:  # noqa: BLE001 - one submission must not end the run
            row = {"status": f"harness_error: {type(exc).__name__}: {exc}"[:300]}
        row.update(key=sub["key"], task=sub["task"], role=sub.get("role", "honest"),
                   latency_s=round(time.monotonic() - t0, 3))
        log(f"  {row['key']}: {row['status']} {row.get('median_ms')} ms at {row['latency_s']:.1f} s "
            f"{row.get('detail', '')[:160]}")
        return row

    with ThreadPoolExecutor(max(1, len(subs))) as pool:
        return list(pool.map(one, subs))


def load_tasks(problems: Path, names: list[str], cpu_check: bool) -> dict:
    from adaexplore.evaluator.task import Task

    tasks = {}
    for name in names:
        source = (problems / f"{name}.py").read_text()
        if cpu_check:
            from vs_field import shrunk_source

            source = shrunk_source(source)
        tasks[name] = Task(name=name, source=source)
    return tasks


def honest_subs(tag: str) -> list[dict]:
    return [{"task": t, "key": f"{t}#{tag}.{k}", "source": tagged(honest_source(t), f"{tag} copy {k}")}
            for t in TASKS for k in range(COPIES)]


# --- phases ----------------------------------------------------------------------------------------

def phase_quiet(problems: Path, root: Path, args) -> dict:
    runs = []
    for r in range(args.runs):
        log(f"[quiet] run {r + 1} of {args.runs}")
        ev = make_evaluator(root, f"quiet{r}")
        try:
            ev.start()
            rows = submit_all(ev, load_tasks(problems, TASKS, args.cpu_check), honest_subs(f"quiet run {r}"))
        finally:
            ev.close()
        runs.append(rows)
    per_task = {}
    for t in TASKS:
        spreads = [spread([row.get("median_ms") for row in rows if row["task"] == t]) for rows in runs]
        mean_spreads = [spread([row.get("mean_ms") for row in rows if row["task"] == t]) for rows in runs]
        medians = [row.get("median_ms") for rows in runs for row in rows if row["task"] == t and row.get("median_ms")]
        latencies = [max(row["latency_s"] for row in rows if row["task"] == t) for rows in runs]
        per_task[t] = {"spreads": spreads, "mean_spreads": mean_spreads,
                       "quiet_ms": statistics.median(medians) if medians else None,
                       "quiet_latency_s": statistics.median(latencies),
                       "statuses": sorted({row["status"] for rows in runs for row in rows if row["task"] == t})}
    ok = all(s is not None and s <= SPREAD_BAR for v in per_task.values() for s in v["spreads"])
    return {"runs": runs, "per_task": per_task, "pass": ok and not args.cpu_check}


def phase_neighbours(problems: Path, root: Path, args, quiet: dict | None) -> dict:
    subs = honest_subs("beside neighbours")
    if not args.cpu_check:
        subs += [{"task": task, "key": f"{name}@{task}", "role": name, "source": hostile_source(name)}
                 for name, task in NEIGHBOURS.items()]
    ev = make_evaluator(root, "neighbours")
    try:
        ev.start()
        sandbox = ev.sandbox_info()
        log(f"[neighbours] sandbox {sandbox}")
        rows = submit_all(ev, load_tasks(problems, TASKS, args.cpu_check), subs)
    finally:
        ev.close()
    honest = [r for r in rows if r["role"] == "honest"]
    checks = []
    for row in honest:
        ref = (quiet or {}).get("per_task", {}).get(row["task"], {})
        quiet_ms, quiet_lat = ref.get("quiet_ms"), ref.get("quiet_latency_s")
        off = (row["median_ms"] / quiet_ms - 1.0) if row.get("median_ms") and quiet_ms else None
        late = row["latency_s"] - quiet_lat if quiet_lat is not None else None
        checks.append({"key": row["key"], "status": row["status"], "off": off, "late_s": late,
                       "ok": row["status"] == "correct" and off is not None and abs(off) <= RUNTIME_BAR
                       and late is not None and late <= LATENCY_BAR_S})
    hostile = [{"key": r["key"], "status": r["status"], "detail": r.get("detail", ""), "latency_s": r["latency_s"]}
               for r in rows if r["role"] != "honest"]
    named = all(h["status"] != "correct" and h["detail"] for h in hostile) and len(hostile) == len(NEIGHBOURS)
    return {"rows": rows, "checks": checks, "hostile": hostile, "sandbox": sandbox,
            "pass": bool(checks) and all(c["ok"] for c in checks) and named}


def phase_tiny(root: Path, args) -> dict:
    from adaexplore.evaluator.task import Task

    ev = make_evaluator(root, "tiny")
    task = Task(name="tiny_relu_scale", source=TINY_TASK)
    subs = [{"task": "tiny", "key": f"tiny#{k}", "source": tagged(TINY_KERNEL, f"tiny copy {k}")} for k in range(COPIES)]
    try:
        ev.start()
        rows = submit_all(ev, {"tiny": task}, subs)
    finally:
        ev.close()
    s = spread([r.get("median_ms") for r in rows])
    return {"rows": rows, "spread": s, "pass": s is not None and s <= TINY_BAR}


BALLAST = """
import sys, time, torch
n = int(sys.argv[1])
held = torch.empty(n, dtype=torch.uint8, device="cuda")
held.fill_(1)
torch.cuda.synchronize()
print("held", n, flush=True)
time.sleep(3600)
"""


def phase_loaded(problems: Path, root: Path, args) -> dict:
    """`13_` alone, then with another process holding the device up to what admission allows."""
    import torch

    name = TASKS[0]
    tasks = load_tasks(problems, [name], args.cpu_check)
    ev = make_evaluator(root, "loaded")
    ballast = None
    try:
        ev.start()
        alone = submit_all(ev, tasks, [{"task": name, "key": "13#alone", "source": tagged(honest_source(name), "alone")}])
        info: dict = {}
        if torch.cuda.is_available():
            from adaexplore.evaluator.runner import CONTEXT_BYTES

            memory = ev.device_memory()
            ref = ev.reference(tasks[name])
            reserve = memory.estimate(ref.peak_device_bytes, candidate=True, timing=True)
            free, total = torch.cuda.mem_get_info()
            # What admission lets others hold: the device less this job's share, its context,
            # the headroom it keeps (if any) and what the judge and this process hold now.
            keep = reserve + CONTEXT_BYTES + int(getattr(memory, "headroom", 0))
            hold = max(0, free - keep)
            info = {"free_gib": free / 2**30, "total_gib": total / 2**30, "reserve_gib": reserve / 2**30,
                    "held_gib": hold / 2**30, "capacity_gib": (memory.capacity or 0) / 2**30}
            ballast = subprocess.Popen([sys.executable, "-c", BALLAST, str(hold)], stdout=subprocess.PIPE, text=True)
            assert ballast.stdout is not None
            log(f"[loaded] ballast: {ballast.stdout.readline().strip()} ({info})")
        loaded = submit_all(ev, tasks, [{"task": name, "key": "13#loaded", "source": tagged(honest_source(name), "loaded")}])
    finally:
        if ballast is not None:
            ballast.kill()
            ballast.wait()
        ev.close()
    a, b = alone[0].get("median_ms"), loaded[0].get("median_ms")
    off = b / a - 1.0 if a and b else None
    return {"alone": alone, "loaded": loaded, "memory": info, "off": off,
            "pass": off is not None and abs(off) <= RUNTIME_BAR}


# --- report ------------------------------------------------------------------------------------------

def fmt(x, spec: str = ".4f") -> str:
    return "-" if x is None else format(x, spec)


def render(out: dict) -> str:
    lines = [f"# Fair verdicts on a shared GPU ({out['device']}, {out['date']})", ""]
    q = out.get("quiet")
    if q:
        lines += [f"## quiet: {COPIES} identical copies x {len(TASKS)} tasks, all at once, {len(q['runs'])} runs "
                  f"(bar: max/min <= {SPREAD_BAR}) -> {'PASS' if q['pass'] else 'FAIL'}", "",
                  "| task | max/min of the reported (median) runtime, per run | of the mean | quiet ms | statuses |",
                  "| --- | --- | --- | --- | --- |"]
        for t, v in q["per_task"].items():
            lines.append(f"| {t} | {', '.join(fmt(s) for s in v['spreads'])} | "
                         f"{', '.join(fmt(s) for s in v['mean_spreads'])} | {fmt(v['quiet_ms'])} | "
                         f"{', '.join(v['statuses'])} |")
        lines.append("")
    n = out.get("neighbours")
    if n:
        bad = [c for c in n["checks"] if not c["ok"]]
        offs = [abs(c["off"]) for c in n["checks"] if c["off"] is not None]
        lates = [c["late_s"] for c in n["checks"] if c["late_s"] is not None]
        lines += [f"## neighbours: the 30 honest copies beside {len(n['hostile'])} hostile candidates -> "
                  f"{'PASS' if n['pass'] else 'FAIL'}", "",
                  f"- honest `correct`: {sum(c['status'] == 'correct' for c in n['checks'])} of {len(n['checks'])}; "
                  f"largest runtime change against quiet: {fmt(max(offs) * 100 if offs else None, '.2f')}% "
                  f"(bar {RUNTIME_BAR:.0%}); largest latency over quiet: {fmt(max(lates) if lates else None, '.1f')} s "
                  f"(bar {LATENCY_BAR_S:.0f} s)"]
        for c in bad[:10]:
            lines.append(f"- over a bar: {c['key']}: {c['status']}, runtime {fmt((c['off'] or 0) * 100, '.2f')}%, "
                         f"late {fmt(c['late_s'], '.1f')} s")
        lines.append(f"- sandbox: {n.get('sandbox')}")
        for h in n["hostile"]:
            lines.append(f"- hostile {h['key']}: **{h['status']}** at {h['latency_s']:.1f} s: {h['detail'][:300]}")
        lines.append("")
    t = out.get("tiny")
    if t:
        lines += [f"## tiny: a ~10 us kernel, {COPIES} copies -> {'PASS' if t['pass'] else 'FAIL'}", "",
                  f"- medians: {', '.join(fmt(r.get('median_ms')) for r in t['rows'])} ms; max/min {fmt(t['spread'])} "
                  f"(bar {TINY_BAR})", ""]
    lo = out.get("loaded")
    if lo:
        lines += [f"## loaded: `13_` alone and beside memory held up to admission's limit -> "
                  f"{'PASS' if lo['pass'] else 'FAIL'}", "",
                  f"- alone {fmt(lo['alone'][0].get('median_ms'))} ms, loaded {fmt(lo['loaded'][0].get('median_ms'))} ms "
                  f"({fmt((lo['off'] or 0) * 100, '.2f')}%; bar {RUNTIME_BAR:.0%}); memory: "
                  + ", ".join(f"{k} {v:.1f}" for k, v in lo["memory"].items()), ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", default=str(REPO / ".kb"))
    parser.add_argument("--phases", default="quiet,neighbours,tiny,loaded")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json-out")
    parser.add_argument("--markdown")
    parser.add_argument("--cpu-check", action="store_true")
    parser.add_argument("--quiet-from", help="an earlier run's JSON whose quiet phase the neighbours are held to")
    args = parser.parse_args()
    if args.cpu_check:
        os.environ.setdefault("TRITON_INTERPRET", "1")
        args.runs = min(args.runs, 1)
    import torch

    problems = Path(args.problems) / "level2"
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    out: dict = {"device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
                 "date": time.strftime("%Y-%m-%d"), "phases": phases}
    def save() -> str:  # after every phase: a run cut short keeps what it measured
        text = render(out)
        if args.markdown:
            Path(args.markdown).write_text(text)
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(out, indent=1, default=str))
        return text

    with tempfile.TemporaryDirectory(prefix="shared-gpu-") as tmp:
        root = Path(tmp)
        t0 = time.monotonic()
        steps = {"quiet": lambda: phase_quiet(problems, root, args),
                 "neighbours": lambda: phase_neighbours(problems, root, args, out.get("quiet")),
                 "tiny": lambda: phase_tiny(root, args), "loaded": lambda: phase_loaded(problems, root, args)}
        if args.quiet_from and "quiet" not in phases:
            out["quiet"] = json.loads(Path(args.quiet_from).read_text())["quiet"]
            out["quiet"]["from"] = args.quiet_from
        for name in phases:
            t1 = time.monotonic()
            out[name] = steps[name]()
            out[name]["wall_s"] = round(time.monotonic() - t1, 1)
            log(f"[{name}] done in {out[name]['wall_s']} s")
            save()
        out["wall_s"] = time.monotonic() - t0
    print(save())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
