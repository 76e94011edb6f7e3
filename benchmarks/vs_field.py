"""Our evaluator against the field's harness, side by side, on KernelBench level-2 tasks.

Runs on the GPU machine, in one process (ours: the `Evaluator`, its forked workers and judge;
the field's: one fresh `run_harness.py` process per candidate, one after another). Candidates
are the honest Triton kernels of benchmarks/candidates/level2. Two shapes, each runnable alone:

- search: 6 tasks (three GEMM epilogues, three convolutions) x 5 candidates (a task with fewer
  kernels has its first one again under new text, which Triton compiles anew), plus 5 identical
  copies (differing by a comment) of one per task, all submitted to our evaluator at once
  (registration included); --repeat N runs this N times in a row, each cold;
- first: 17 distinct tasks, one candidate each, cold: a fresh work directory, so no stored
  baselines and an empty Triton cache (the field side gets its own empty Triton cache too).

With --steady the search shape has a second round, as a search's later rounds are: every distinct
candidate again with its kernels' text changed (so they compile again), all submitted at once to
the tasks registered in round 1; its rate is rated against the same field rate.

Ours runs first, alone on the GPU; then the field's harness, serially as the field runs it,
in the time left before --deadline-s. If that time cannot cover every distinct candidate, the
field side runs a subsample (round-robin over tasks) and its rate is estimated from the mean
wall time of the candidates it ran; the report says so. The field is given our tolerance
(--field-tol, default 0.01) so that verdicts compare like with like.

    python benchmarks/vs_field.py [--shape search|first|both] [--problems .kb]
        [--field-harness ../shared/kernelbench/run_harness.py] [--deadline-s 480]
        [--json-out FILE] [--markdown FILE] [--field-parallel N] [--field-repeats N] [--cpu-check] [--steady] [--two-process]
        [--parallel N] [--ours-only]

--cpu-check runs only our side, on shrunk tasks through Triton's interpreter (no timing), to
check on a machine without a GPU that every candidate is judged `correct` and none is called a
cheat. Markdown goes to stdout (and --markdown), progress to stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
CANDIDATES = HERE / "candidates" / "level2"

SEARCH_TASKS = ["12_Gemm_Multiply_LeakyReLU", "63_Gemm_ReLU_Divide", "86_Matmul_Divide_GELU",
                "49_ConvTranspose3d_Softmax_Sigmoid", "61_ConvTranspose3d_ReLU_GroupNorm",
                "85_Conv2d_GroupNorm_Scale_MaxPool_Clamp"]
COPIED_VARIANT = "v1_flat_b1024_inplace"  # the kernel submitted five times per task (else the task's first)
VARIANTS = 5  # distinct candidates per task; a task with fewer kernels has its first one under new text
COPIES = 5
# First contact: one candidate per task, the variant chosen to mix kernel shapes.
FIRST = [("12_Gemm_Multiply_LeakyReLU", "v5_triton_gemm_128x128"), ("63_Gemm_ReLU_Divide", "v4_autotuned"),
         ("86_Matmul_Divide_GELU", "v3_tiled_16x256"), ("9_Matmul_Subtract_Multiply_ReLU", "v2_flat_b4096_w8"),
         ("81_Gemm_Swish_Divide_Clamp_Tanh_Clamp", "v1_flat_b1024_inplace"),
         ("53_Gemm_Scaling_Hardtanh_GELU", "v5_triton_gemm_128x128"),
         ("76_Gemm_Add_ReLU", "v1_flat_b1024_inplace"), ("29_Matmul_Mish_Mish", "v1_flat_b1024_inplace"),
         ("40_Matmul_Scaling_ResidualAdd", "v1_flat_b1024_inplace"),
         ("14_Gemm_Divide_Sum_Scaling", "v1_colsum_then_gemv"), ("99_Matmul_GELU_Softmax", "v1_row_gelu_softmax"),
         ("45_Gemm_Sigmoid_LogSumExp", "v1_two_epilogues"), ("1_Conv2D_ReLU_BiasAdd", "v1_conv_epilogue"),
         ("61_ConvTranspose3d_ReLU_GroupNorm", "v2_autotuned"), ("85_Conv2d_GroupNorm_Scale_MaxPool_Clamp", "v1_epilogue"),
         ("49_ConvTranspose3d_Softmax_Sigmoid", "v1_epilogue"), ("43_Conv3d_Max_LogSumExp_ReLU", "v1_epilogue")]
MIN_MS = 0.1  # runtimes below this are not held to the agreement bar
GRACE_S = 40.0  # how long a field run started before the deadline may go on past it


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- what runs: (task, candidate) submissions -----------------------------------------------------

def submissions(shape: str) -> list[dict]:
    """The submissions of one shape: {"task", "variant", "path", "copy_of"} (copy_of: None or the
    variant a comment-only copy repeats; copies get their path when written)."""
    if shape == "first":
        return [{"task": t, "variant": v, "path": CANDIDATES / t / f"{v}.py", "copy_of": None} for t, v in FIRST]
    subs = []
    for task in SEARCH_TASKS:
        files = sorted((CANDIDATES / task).glob("v*.py"))
        copied = copied_variant(task)
        for path in files:
            subs.append({"task": task, "variant": path.stem, "path": path, "copy_of": None})
        for k in range(1, VARIANTS - len(files) + 1):  # the same kernels compiled anew, as a new candidate's are
            subs.append({"task": task, "variant": f"{files[0].stem}#text{k}", "path": None, "copy_of": None,
                         "retext_of": files[0].stem})
        for k in range(1, COPIES + 1):
            subs.append({"task": task, "variant": f"{copied}#copy{k}", "path": None, "copy_of": copied})
    return subs


def copied_variant(task: str) -> str:
    """The variant a task's identical copies repeat: COPIED_VARIANT where the task has it, else its first."""
    names = sorted(p.stem for p in (CANDIDATES / task).glob("v*.py"))
    return COPIED_VARIANT if COPIED_VARIANT in names else names[0]


def copy_source(source: str, k: int) -> str:
    """The same kernel, told apart from its siblings only by a trailing comment."""
    return source.rstrip("\n") + f"\n# identical copy {k} of {COPIES}: only this comment differs\n"


def recompiled_source(source: str, tag: str) -> str:
    """The same kernels under new text: a comment on each jitted function's `def` line changes
    the source Triton keys its compile cache on, so they compile again, as a new candidate's do."""
    out, decorated = [], False
    for line in source.split("\n"):
        stripped = line.strip()
        if stripped.startswith("@"):
            decorated = decorated or "jit" in stripped
        elif stripped.startswith("def ") and decorated:
            line, decorated = f"{line}  # {tag}", False
        elif stripped and not stripped.startswith("#"):
            decorated = False
        out.append(line)
    return "\n".join(out)


def field_order(subs: list[dict]) -> list[dict]:
    """Distinct candidates, round-robin over tasks: a cut-short run still covers every task."""
    by_task: dict[str, list[dict]] = {}
    for s in subs:
        if s["copy_of"] is None:
            by_task.setdefault(s["task"], []).append(s)
    out, i = [], 0
    while any(i < len(v) for v in by_task.values()):
        out += [v[i] for v in by_task.values() if i < len(v)]
        i += 1
    return out


def shrunk_source(source: str, exponent: float = 0.4) -> str:
    """A task's source with its size constants made small, for the CPU check: assignments
    appended at the end win, since get_inputs/get_init_inputs read the globals when called."""
    from check_candidates import shrink

    namespace: dict = {}
    exec(compile(source, "<task>", "exec"), namespace)  # noqa: S102 - our own checked-in task files
    module = type("Sizes", (), {})()
    for name, value in namespace.items():
        if not name.startswith("_") and isinstance(value, (int, tuple)):
            setattr(module, name, value)
    changed = shrink(module, exponent)
    return source.rstrip("\n") + "\n\n# sizes shrunk for a CPU check\n" + "".join(
        f"{name} = {value!r}\n" for name, value in changed.items())


# --- aggregation (pure) -------------------------------------------------------------------------

def per_hour(count: int, seconds: float | None) -> float | None:
    """Candidates per GPU-hour at `count` candidates in `seconds` of wall clock."""
    return count * 3600.0 / seconds if seconds and seconds > 0 and count else None


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0..100), linear between closest ranks; None for no values."""
    xs = sorted(v for v in values if v is not None)
    if not xs:
        return None
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def field_correct(row: dict | None) -> bool | None:
    """The field's verdict as a bool (None: not run or no answer)."""
    if not row or "correct" not in row:
        return None if not row or "error" not in row else False
    return bool(row.get("compiled")) and bool(row.get("correct"))


def field_timings(runs: list[dict], name: str) -> list[float]:
    """One timing (`runtime_ms`, `ref_runtime_ms`) of each of the field's correct runs of a candidate."""
    return [r[name] for r in runs if field_correct(r) and r.get(name) and r[name] > 0]


def field_median(runs: list[dict], name: str) -> float | None:
    """The median of one timing over the field's correct runs of a candidate (None if none)."""
    values = field_timings(runs, name)
    return statistics.median(values) if values else None


def agreement(ours: list[dict], field: dict[str, dict], field_runs: dict[str, list[dict]] | None = None) -> dict:
    """Verdicts and runtimes of our candidates next to the field's.

    `ours`: rows with key, task, variant, status, ms, ref_ms; `field`: key -> the harness's JSON
    row (its first run); `field_runs`: key -> every run of it, when the field ran candidates more
    than once: runtimes are then compared with the median of its correct runs, and the spread of
    those runs is the field's own disagreement with itself. Returns counts over the candidates
    both judged, and one row per candidate of ours with the runtime difference (%, ours against
    the field's) where both called it correct.
    """
    rows, agree, compared, worst = [], 0, 0, None
    for o in ours:
        f = field.get(o["key"])
        runs = (field_runs or {}).get(o["key"]) or ([f] if f else [])
        if f and len(runs) > 1:
            f = {**f, "runtime_ms": field_median(runs, "runtime_ms"),
                 "ref_runtime_ms": field_median(runs, "ref_runtime_ms")}
        timed = field_timings(runs, "runtime_ms")
        fc = field_correct(f)
        oc = o["status"] == "correct"
        if fc is not None:
            compared += 1
            agree += oc == fc
        diff = None
        if oc and fc and o.get("ms") and f.get("runtime_ms") and f["runtime_ms"] > 0:
            diff = (o["ms"] - f["runtime_ms"]) / f["runtime_ms"] * 100.0
            if min(o["ms"], f["runtime_ms"]) >= MIN_MS and (worst is None or abs(diff) > abs(worst[0])):
                worst = (diff, o["key"])
        ref_diff = None
        if o.get("ref_ms") and f and f.get("ref_runtime_ms"):
            ref_diff = (o["ref_ms"] - f["ref_runtime_ms"]) / f["ref_runtime_ms"] * 100.0
        rows.append({"key": o["key"], "task": o["task"], "variant": o["variant"], "ours": o["status"],
                     "field": "not run" if fc is None else "correct" if fc else (
                         "not compiled" if f.get("compiled") is False else "incorrect"),
                     "ours_ms": o.get("ms"), "field_ms": f.get("runtime_ms") if f else None, "diff_pct": diff,
                     "ours_ref_ms": o.get("ref_ms"), "field_ref_ms": f.get("ref_runtime_ms") if f else None,
                     "ref_diff_pct": ref_diff, "field_runs_ms": timed,
                     "field_spread": max(timed) / min(timed) if len(timed) > 1 else None})
    within = [r for r in rows if r["diff_pct"] is not None and min(r["ours_ms"], r["field_ms"]) >= MIN_MS]
    spreads = [r["field_spread"] for r in rows if r["field_spread"]]
    return {"compared": compared, "agree": agree, "rows": rows, "field_spread_max": max(spreads, default=None),
            "worst_diff_pct": worst[0] if worst else None, "worst_key": worst[1] if worst else None,
            "within_3pct": sum(1 for r in within if abs(r["diff_pct"]) <= 3.0), "timed_both": len(within)}


def copies_spread(ours: list[dict]) -> dict[str, dict]:
    """Per task, max/min of the mean runtimes of the identical copies (None if any was not timed)."""
    out: dict[str, dict] = {}
    for o in ours:
        if o.get("copy_of"):
            out.setdefault(o["task"], {"ms": [], "statuses": []})
            out[o["task"]]["ms"].append(o.get("ms"))
            out[o["task"]]["statuses"].append(o["status"])
    for v in out.values():
        ms = v["ms"]
        v["max_over_min"] = max(ms) / min(ms) if ms and all(m for m in ms) else None
    return out


def status_counts(rows: list[dict]) -> dict[str, int]:
    return dict(Counter(r["status"] for r in rows))


def summarize(shape: str, ours: dict, field: dict, field_total: int) -> dict:
    """Everything the report says about one shape, from the two sides' raw results."""
    rows = ours.get("rows", [])
    distinct = [r for r in rows if not r.get("copy_of")]
    ours_rate_all = per_hour(len(rows), ours.get("wall_s"))
    ours_rate_distinct = per_hour(len(distinct), ours.get("wall_s"))
    f_rows = field.get("rows", {})
    f_runs = field.get("runs") or {k: [r] for k, r in f_rows.items()}
    f_walls = [r["wall_s"] for rs in f_runs.values() for r in rs if r.get("wall_s") is not None]
    parallel = field.get("parallel", 1)
    if parallel > 1:
        field_rate = per_hour(len(f_walls), field.get("wall_s"))
    else:  # serial: the rate is set by the mean cost of one candidate, subsampled or not
        field_rate = 3600.0 / (sum(f_walls) / len(f_walls)) if f_walls else None
    ratio = ours_rate_distinct / field_rate if ours_rate_distinct and field_rate else None
    # A running server has started already: the same run less the evaluator's start-up.
    warm_s = ours["wall_s"] - ours["startup_s"] if ours.get("wall_s") and ours.get("startup_s") is not None else None
    ours_rate_started = per_hour(len(distinct), warm_s)
    ratio_all = ours_rate_all / field_rate if ours_rate_all and field_rate else None
    statuses = status_counts(rows)
    steady = ours.get("steady")
    steady_out = None
    if steady:
        steady_rate = per_hour(len(steady["rows"]), steady.get("wall_s"))
        steady_out = {"submitted": len(steady["rows"]), "wall_s": steady.get("wall_s"), "per_hour": steady_rate,
                      "ratio": steady_rate / field_rate if steady_rate and field_rate else None,
                      "statuses": dict(sorted(status_counts(steady["rows"]).items()))}
    return {
        "shape": shape,
        "ours": {"submitted": len(rows), "distinct": len(distinct), "wall_s": ours.get("wall_s"),
                 "startup_s": ours.get("startup_s"), "register_s": ours.get("register_s"),
                 "per_hour_all": ours_rate_all, "per_hour_distinct": ours_rate_distinct,
                 "latency_p50_s": percentile([r["latency_s"] for r in rows], 50),
                 "latency_p95_s": percentile([r["latency_s"] for r in rows], 95),
                 "statuses": statuses, "baselines": ours.get("baselines"), "one_process": ours.get("one_process"),
                 "parallel": ours.get("parallel"),
                 "registration_failed": {k: v.get("error") for k, v in (ours.get("registration") or {}).items()
                                         if not v.get("ok")},
                 "cheat_detected": [{"key": r["key"], "reason": r.get("detail")} for r in rows
                                    if r["status"] == "cheat_detected"]},
        "field": {"ran": len(f_rows), "runs": len(f_walls), "distinct_total": field_total, "parallel": parallel,
                  "subsampled": len(f_rows) < field_total, "wall_s": field.get("wall_s"),
                  "per_hour": field_rate, "tol": field.get("tol"), "skipped_reason": field.get("skipped_reason"),
                  "latency_p50_s": percentile(f_walls, 50), "latency_p95_s": percentile(f_walls, 95)},
        "ratio_distinct": ratio, "ratio_all": ratio_all, "steady": steady_out,
        "per_hour_started": ours_rate_started,
        "ratio_started": ours_rate_started / field_rate if ours_rate_started and field_rate else None,
        "agreement": agreement(distinct, f_rows, f_runs),
        "copies": copies_spread(rows),
    }


def fmt(x, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def render(summary: dict, device: str) -> str:
    """The markdown report of one shape."""
    s, o, f, a = summary, summary["ours"], summary["field"], summary["agreement"]
    target = ">= 10x" if s["shape"] == "search" else ">= 4x"
    lines = [f"## {'Search-shaped' if s['shape'] == 'search' else 'First contact'} ({device})", "",
             "| side | candidates | wall s | candidates per GPU-hour | p50 latency s | p95 latency s |",
             "| --- | --- | --- | --- | --- | --- |",
             f"| ours, all submissions at once | {o['submitted']} ({o['distinct']} distinct) | {fmt(o['wall_s'], '.1f')} | "
             f"{fmt(o['per_hour_all'], '.0f')} (distinct only: {fmt(o['per_hour_distinct'], '.0f')}) | "
             f"{fmt(o['latency_p50_s'])} | {fmt(o['latency_p95_s'])} |",
             f"| field harness, fresh process each, {'serial' if f['parallel'] == 1 else str(f['parallel']) + ' at once'}"
             f" | {f['ran']} of {f['distinct_total']} distinct"
             + (f" ({f['runs']} runs)" if f.get("runs", f["ran"]) > f["ran"] else "") + f" | {fmt(f['wall_s'], '.1f')} | {fmt(f['per_hour'], '.0f')} | "
             f"{fmt(f['latency_p50_s'])} | {fmt(f['latency_p95_s'])} |", "",
             f"**Ratio, ours / field: {fmt(s['ratio_distinct'], '.1f')}x** counting only our distinct candidates "
             f"against our whole wall clock ({fmt(s['ratio_all'], '.1f')}x counting every submission); target {target}. "
             f"Less the evaluator's start-up (a server that is already running): {fmt(s.get('per_hour_started'), '.0f')} "
             f"distinct per GPU-hour, {fmt(s.get('ratio_started'), '.1f')}x.",
             "",
             f"Our wall clock counts everything from constructing the evaluator: start-up "
             f"{fmt(o['startup_s'], '.1f')} s, task registration (baselines: {o['baselines']}; last task registered "
             f"at {fmt(o['register_s'], '.1f')} s; registration answers once the eager baseline is known, and "
             "torch.compile's is measured beside the candidates), all candidates"
             + ("; each candidate checked and first timed in one worker process" if o.get("one_process") else "")
             + (f"; {o['parallel']} worker processes at once" if o.get("parallel") else "")
             + ". Latency is from submission (all at t=0, "
             "registration included) to result. Statuses: "
             + ", ".join(f"{k}: {v}" for k, v in sorted(o["statuses"].items())) + "."]
    st = s.get("steady")
    if st:
        lines += ["", f"**Search round 2 (tasks registered, as in a search's later rounds): {st['submitted']} new "
                      f"candidates in {fmt(st['wall_s'], '.1f')} s, {fmt(st['per_hour'], '.0f')} per GPU-hour, "
                  f"{fmt(st['ratio'], '.1f')}x the field.** Each is a distinct candidate of round 1 with a comment on "
                  "each jitted function's `def` line, so its kernels compile again (Triton keys its cache on their "
                  "text), all submitted at once after round 1 ended. Statuses: "
                  + ", ".join(f"{k}: {v}" for k, v in st["statuses"].items()) + "."]
    if s.get("repeats"):
        lines += ["", f"**Round 1, run {len(s['repeats'])} times in a row**, each with a fresh evaluator and work "
                  "folder (start-up and registration included), against the same field rate:", "",
                  "| run | wall s | start-up s | last registered s | per GPU-hour (all) | ratio all | ratio distinct "
                  "| worst copies max/min | statuses |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for k, r in enumerate(s["repeats"], 1):
            spread = [c["max_over_min"] for c in r["copies"].values() if c["max_over_min"]]
            lines.append(f"| {k} | {fmt(r['wall_s'], '.1f')} | {fmt(r['startup_s'], '.1f')} | {fmt(r['register_s'], '.1f')} | "
                         f"{fmt(r['per_hour_all'], '.0f')} | {fmt(r['ratio_all'], '.1f')}x | {fmt(r['ratio_distinct'], '.1f')}x | "
                         f"{fmt(max(spread) if spread else None, '.4f')} | "
                         + ", ".join(f"{k2}: {v}" for k2, v in r["statuses"].items()) + " |")
    for task, err in o.get("registration_failed", {}).items():
        lines.append(f"Registration of {task} failed: {err}")
    if f.get("skipped_reason"):
        lines.append(f"Field side not run: {f['skipped_reason']}.")
    elif f["subsampled"]:
        lines.append(f"The field side ran {f['ran']} of {f['distinct_total']} distinct candidates (round-robin over "
                     "tasks) in the time left; its rate is 3600 / their mean wall time, an estimate for the rest.")
    if f.get("tol") is not None:
        lines.append(f"The field harness ran with tolerance {f['tol']} (ours: the task default, 0.01).")
    lines += ["", f"Verdicts agree on **{a['agree']} of {a['compared']}** candidates judged by both. "
              f"Runtimes of candidates correct in both and >= {MIN_MS} ms: {a['within_3pct']} of {a['timed_both']} "
              f"within 3%; largest difference {fmt(a['worst_diff_pct'], '+.2f')}% ({a['worst_key'] or '-'})."
              + (f" The field ran candidates more than once and is compared by its median; its own runs of one "
                 f"candidate differ by up to {fmt(a.get('field_spread_max'), '.4f')} (max/min)."
                 if a.get("field_spread_max") else ""), "",
              "| task | candidate | ours | field | ours ms | field ms | diff % | ours ref ms | field ref ms | ref diff % "
              "| field runs ms |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in a["rows"]:
        lines.append(f"| {r['task']} | {r['variant']} | {r['ours']} | {r['field']} | {fmt(r['ours_ms'], '.4f')} | "
                     f"{fmt(r['field_ms'], '.4f')} | {fmt(r['diff_pct'], '+.2f')} | {fmt(r['ours_ref_ms'], '.4f')} | "
                     f"{fmt(r['field_ref_ms'], '.4f')} | {fmt(r['ref_diff_pct'], '+.2f')} | "
                     + (", ".join(fmt(m, ".3f") for m in r.get("field_runs_ms") or []) or "-") + " |")
    if s["copies"]:
        lines += ["", f"Identical copies ({COPIES} per task, submitted with everything else): max/min of their mean "
                  "runtimes (target <= 1.03).", "", "| task | max/min | runtimes ms | statuses |", "| --- | --- | --- | --- |"]
        for task, c in s["copies"].items():
            lines.append(f"| {task} | {fmt(c['max_over_min'], '.4f')} | "
                         + ", ".join(fmt(m, ".4f") for m in c["ms"]) + " | " + ", ".join(sorted(set(c["statuses"]))) + " |")
    cheats = o["cheat_detected"]
    lines += ["", f"`cheat_detected` on these honest kernels: **{len(cheats)}**"
              + "".join(f"\n- {c['key']}: {c['reason']}" for c in cheats)]
    return "\n".join(lines) + "\n"


# --- the two sides ------------------------------------------------------------------------------

def run_ours(subs: list[dict], problems: Path, root: Path, args, steady: bool = False) -> dict:
    """Every submission to one fresh evaluator at once; tasks registered in the same threads.
    With `steady`, then every distinct candidate again, recompiled, all at once (round 2)."""
    from adaexplore.evaluator.evaluator import Evaluator
    from adaexplore.evaluator.task import Task, check_task_source

    t0 = time.monotonic()
    baselines = tuple(args.baselines.split(",")) if args.baselines else None
    ev = Evaluator(work_dir=root / "ours", baselines=baselines, cpu_timing=False, trace=True,
                   one_process=not args.two_process, max_parallel=args.parallel or None)
    out: dict = {"rows": [], "baselines": ",".join(ev.baselines), "one_process": ev.one_process,
                 "parallel": ev.max_parallel}
    try:
        ev.start()  # the warm parent and the judge side by side, as a server starts them
        out["startup_s"] = time.monotonic() - t0
        log(f"[ours] evaluator ready in {out['startup_s']:.1f} s on {ev.device}, sandbox {ev.sandbox_level()}, "
            f"{ev.max_parallel} workers at once")
        tasks: dict[str, Task] = {}
        for name in sorted({s["task"] for s in subs}):
            source = (problems / f"{name}.py").read_text()
            if args.cpu_check:
                source = shrunk_source(source)
            check_task_source(source)
            tasks[name] = Task(name=name, source=source)
        registered: dict[str, threading.Event] = {name: threading.Event() for name in tasks}
        reg_lock = threading.Lock()
        reg_claimed: set[str] = set()
        reg_info: dict[str, dict] = {}
        last_reg = [0.0]

        def register(name: str) -> None:
            with reg_lock:
                if name in reg_claimed:
                    return
                reg_claimed.add(name)
            try:
                v = ev.validate_task(tasks[name])
                reg_info[name] = {"ok": v.ok, "flags": [fl.code for fl in v.flags],
                                  "eager_ms": v.reference_timing.mean_ms if v.reference_timing else None,
                                  "error": v.error.message[:300] if v.error else None}
            except Exception as exc:  # noqa: BLE001 - recorded, the candidates still run
                reg_info[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
            finally:
                last_reg[0] = max(last_reg[0], time.monotonic() - t0)
                registered[name].set()

        def one(sub: dict) -> dict:
            # The first submission of a task registers it, as an agent would before submitting.
            register(sub["task"])
            registered[sub["task"]].wait()
            source = sub["source"]
            try:
                r = ev.evaluate(tasks[sub["task"]], source)
                row = {"status": r.status.value, "ms": r.timing.mean_ms if r.timing else None,
                       "median_ms": r.timing.median_ms if r.timing else None,
                       "ref_ms": r.reference_timing.mean_ms if r.reference_timing else None,
                       "speedup": r.speedup, "autotune": r.autotune_configs,
                       "detail": (r.cheat_reason or (r.error.message if r.error else "") or "")[:300]}
            except Exception as exc:  # noqa: BLE001 - one submission must not end the run
                row = {"status": f"harness_error: {type(exc).__name__}: {exc}"[:200], "ms": None}
            row.update(key=sub["key"], task=sub["task"], variant=sub["variant"], copy_of=sub["copy_of"],
                       latency_s=round(time.monotonic() - t0, 3))
            log(f"[ours] {sub['key']}: {row['status']} {fmt(row.get('ms'), '.4f')} ms at {row['latency_s']:.1f} s")
            return row

        with ThreadPoolExecutor(max(1, len(subs))) as pool:
            out["rows"] = list(pool.map(one, subs))
        out["wall_s"] = time.monotonic() - t0
        if steady:
            again = [{**sub, "source": recompiled_source(sub["source"], "round 2"), "variant": sub["variant"] + "#r2",
                      "key": sub["key"] + "#r2", "copy_of": None} for sub in subs if not sub["copy_of"]]
            t2 = time.monotonic()
            with ThreadPoolExecutor(max(1, len(again))) as pool:
                rows2 = list(pool.map(one, again))
            out["steady"] = {"rows": rows2, "wall_s": time.monotonic() - t2}
        out["register_s"] = last_reg[0]
        out["registration"] = reg_info
        out["trace"] = ev.trace or []
    finally:
        ev.close()
    return out


def run_field(order: list[dict], harness: Path, root: Path, args, deadline: float) -> dict:
    """The field's harness on each distinct candidate, a fresh process each, until the deadline."""
    cache = root / "field-triton-cache"
    cache.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, TRITON_CACHE_DIR=str(cache))
    env.pop("TRITON_INTERPRET", None)
    out: dict = {"rows": {}, "runs": {}, "parallel": args.field_parallel, "tol": args.field_tol}
    walls: list[float] = []
    lock = threading.Lock()
    t0 = time.monotonic()

    def expected_next() -> float:
        with lock:  # nothing measured yet: the first always starts, so the field has a rate
            return (sum(walls) / len(walls)) if walls else 0.0

    def one(sub: dict) -> None:
        if time.monotonic() + expected_next() > deadline:
            return
        cmd = [sys.executable, str(harness), str(sub["task_path"]), str(sub["path"])]
        if args.field_tol is not None:
            cmd += ["--tol", str(args.field_tol)]
        s0 = time.monotonic()
        # A run still going GRACE_S past the deadline is cut and left out: the report must get written.
        limit = min(args.field_timeout, max(1.0, deadline + GRACE_S - s0))
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=limit)
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
            row = json.loads(lines[-1]) if lines else {"error": (proc.stderr or proc.stdout)[-400:]}
        except subprocess.TimeoutExpired:
            if limit < args.field_timeout:
                log(f"[field] {sub['key']}: cut at the deadline after {time.monotonic() - s0:.1f} s, left out")
                return
            row = {"error": f"timed out after {args.field_timeout} s", "compiled": False, "correct": False}
        except (OSError, ValueError) as exc:
            row = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        row.setdefault("wall_s", round(time.monotonic() - s0, 2))
        with lock:
            out["rows"].setdefault(sub["key"], row)
            out["runs"].setdefault(sub["key"], []).append(row)
            walls.append(row["wall_s"])
        log(f"[field] {sub['key']}: correct={row.get('correct')} {row.get('runtime_ms')} ms in {row['wall_s']:.1f} s")

    with ThreadPoolExecutor(max(1, args.field_parallel)) as pool:  # every candidate once, then again
        list(pool.map(one, order * max(1, args.field_repeats)))
    out["wall_s"] = time.monotonic() - t0
    return out


def run_shape(shape: str, problems: Path, harness: Path | None, root: Path, args, deadline: float) -> dict:
    subs = submissions(shape)
    copies_dir = root / "copies"
    for s in subs:
        s["task_path"] = problems / f"{s['task']}.py"
        if s["copy_of"]:
            k = int(s["variant"].rsplit("copy", 1)[1])
            s["source"] = copy_source((CANDIDATES / s["task"] / f"{s['copy_of']}.py").read_text(), k)
            s["path"] = copies_dir / s["task"] / f"copy{k}.py"
            s["path"].parent.mkdir(parents=True, exist_ok=True)
            s["path"].write_text(s["source"])
        elif s.get("retext_of"):
            k = int(s["variant"].rsplit("#text", 1)[1])
            s["source"] = recompiled_source((CANDIDATES / s["task"] / f"{s['retext_of']}.py").read_text(), f"text {k}")
            s["path"] = copies_dir / s["task"] / f"text{k}.py"
            s["path"].parent.mkdir(parents=True, exist_ok=True)
            s["path"].write_text(s["source"])
        else:
            s["source"] = s["path"].read_text()
        s["key"] = f"{s['task']}/{s['variant']}"
    log(f"[{shape}] {len(subs)} submissions over {len({s['task'] for s in subs})} tasks")
    ours = run_ours(subs, problems, root / shape, args, steady=args.steady and shape == "search")
    again = [run_ours(subs, problems, root / shape / f"again{k}", args) for k in range(1, max(1, args.repeat))]
    order = field_order(subs)
    if args.cpu_check:
        field = {"rows": {}, "skipped_reason": "--cpu-check (the field's harness needs a CUDA device)"}
    elif args.ours_only:
        field = {"rows": {}, "skipped_reason": "--ours-only"}
    elif harness is None:
        field = {"rows": {}, "skipped_reason": "no field harness found"}
    else:
        field = run_field(order, harness, root / shape, args, deadline)
    summary = summarize(shape, ours, field, len(order))
    summary["repeats"] = [repeat_row(summary, run) for run in [ours, *again]] if again else []
    return {"summary": summary, "ours": ours, "field": field, "ours_again": again}


def repeat_row(summary: dict, ours: dict) -> dict:
    """One cold run of ours (a fresh evaluator and work folder) against the shape's field rate."""
    rows, field_rate = ours.get("rows", []), summary["field"]["per_hour"]
    rate_all = per_hour(len(rows), ours.get("wall_s"))
    rate_distinct = per_hour(len([r for r in rows if not r.get("copy_of")]), ours.get("wall_s"))
    return {"wall_s": ours.get("wall_s"), "startup_s": ours.get("startup_s"), "register_s": ours.get("register_s"),
            "per_hour_all": rate_all, "ratio_all": rate_all / field_rate if rate_all and field_rate else None,
            "ratio_distinct": rate_distinct / field_rate if rate_distinct and field_rate else None,
            "statuses": dict(sorted(status_counts(rows).items())), "copies": copies_spread(rows)}


def where_time_went(trace: list[dict]) -> str:
    """Our worker jobs by kind, mean (max) seconds per phase (the throughput benchmark's table)."""
    try:
        from eval_throughput import trace_table
    except ImportError as exc:  # the table is a diagnostic; the report stands without it
        return f"(no phase table: {exc})\n"
    return "\n".join(["Where our worker jobs spent their time, mean (max) seconds:", "", *trace_table(trace)]) + "\n"


def first_existing(*paths: Path) -> Path | None:
    return next((p for p in paths if p.exists()), None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", choices=["search", "first", "both"], default="search")
    ap.add_argument("--problems", type=Path, default=None,
                    help="KernelBench problems folder (holding level2/); default .kb, else ../shared/kernelbench/problems")
    ap.add_argument("--field-harness", type=Path, default=None,
                    help="default ../shared/kernelbench/run_harness.py (else shared/kernelbench/run_harness.py)")
    ap.add_argument("--deadline-s", type=float, default=480.0, help="seconds from start after which the field side starts nothing")
    ap.add_argument("--json-out", type=Path)
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("--field-parallel", type=int, default=1, help="field harness processes at once (the field: 1)")
    ap.add_argument("--field-repeats", type=int, default=1,
                    help="run the field's harness on every candidate this many times (all once, then again), "
                         "compare with the median of its runs and report their spread")
    ap.add_argument("--field-tol", type=float, default=0.01, help="tolerance given to the field harness")
    ap.add_argument("--field-timeout", type=float, default=300.0)
    ap.add_argument("--baselines", default="", help="our baselines (default: the evaluator's own, as a user gets)")
    ap.add_argument("--cpu-check", action="store_true", help="ours only, shrunk tasks, Triton's interpreter")
    ap.add_argument("--steady", action="store_true",
                    help="then a second round: every distinct candidate again, recompiled, submitted at once to the "
                         "registered tasks (a search's later rounds)")
    ap.add_argument("--two-process", action="store_true",
                    help="ours checks each candidate in one worker process and times it in another "
                         "(Evaluator(one_process=False)); by default one process does both")
    ap.add_argument("--parallel", type=int, default=0, help="our worker processes at once (default: the evaluator's)")
    ap.add_argument("--ours-only", action="store_true", help="skip the field's side (a diagnostic: no ratio)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run our side (round 1) this many times in a row, each cold, against one field rate")
    args = ap.parse_args()

    start = time.monotonic()
    if args.cpu_check:
        os.environ["TRITON_INTERPRET"] = "1"
    problems = args.problems or first_existing(REPO / ".kb", REPO.parent / "shared" / "kernelbench" / "problems")
    if problems is None:
        ap.error("no KernelBench problems folder: pass --problems")
    problems = problems / "level2" if (problems / "level2").is_dir() else problems
    harness = args.field_harness or first_existing(REPO.parent / "shared" / "kernelbench" / "run_harness.py",
                                                   REPO / "shared" / "kernelbench" / "run_harness.py")
    if harness is not None:
        harness = harness.resolve()
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() and not args.cpu_check else "cpu (interpreter)"
    root = Path(tempfile.mkdtemp(prefix="adaexplore-vs-field-"))
    log(f"problems {problems}, field harness {harness}, scratch {root}, device {device}")
    shapes = ["search", "first"] if args.shape == "both" else [args.shape]
    results = {}
    for i, shape in enumerate(shapes):
        # Two shapes in one call share the deadline evenly: the first must leave the second its part.
        shape_deadline = start + args.deadline_s * (i + 1) / len(shapes)
        results[shape] = run_shape(shape, problems, harness, root, args, shape_deadline)
    parts = []
    for r in results.values():
        parts.append(render(r["summary"], device))
        if r["ours"].get("trace"):
            parts.append(where_time_went(r["ours"]["trace"]))
    text = f"# Our evaluator against the field's harness ({device})\n\n" + "\n".join(parts)
    text += f"\nCommand: `python benchmarks/vs_field.py {' '.join(sys.argv[1:])}`; total {time.monotonic() - start:.0f} s.\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    if args.json_out:
        args.json_out.write_text(json.dumps({"device": device, "results": results}, indent=1, default=str))
    bad = [r for res in results.values() for r in res["ours"].get("rows", []) if r["status"] != "correct"]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
