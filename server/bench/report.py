"""`adaexplore report RUN_DIR`: the tables (Markdown, JSON) and plots of a finished or running bench.

Runs in the bench process at the end of a run, or alone on a run folder; it reads only the step logs and task
lists (see state.py), so it works while a bench is still writing them.
"""

from __future__ import annotations

import datetime
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from . import plots
from .metrics import FAST_P, Aggregate, aggregate, best_so_far, quantiles, task_best, verdict_shares
from .state import VariantState, read_steps, variants_in

BASELINES = ("eager", "compile")
BASELINE_TITLES = {"eager": "eager PyTorch", "compile": "torch.compile"}


def _budget(run_dir: Path, states: list[VariantState]) -> int:
    """Steps per task: the latest invocation's budget, else the most steps any task took."""
    try:
        return int(orjson.loads((run_dir / "bench.json").read_bytes())["budget"]["steps"])
    except (OSError, KeyError, ValueError, TypeError, orjson.JSONDecodeError):
        return max((s.step for st in states for s in st.steps), default=1)


def collect(run_dir: Path) -> dict[str, Any]:
    """Everything the report says, as plain data (what report.json holds)."""
    states = [VariantState(run_dir, v) for v in variants_in(run_dir)]
    budget = _budget(run_dir, states)
    out: dict[str, Any] = {"run_dir": str(run_dir), "steps_per_task": budget,
                           "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                           "variants": {}}
    for st in states:
        names = list(dict.fromkeys([*st.tasks, *(s.task for s in st.steps)]))
        per_task = {n: st.steps_of(n) for n in names}
        v: dict[str, Any] = {"tasks": len(names), "steps": len(st.steps), "tokens": st.tokens(),
                             "wall_s": round(sum(s.wall_s for s in st.steps), 1),
                             "verdicts": verdict_shares(st.steps), "per_task": [], "summary": {}, "curves": {}}
        for b in BASELINES:
            bests = [task_best(n, per_task[n], b) for n in names]
            v["summary"][b] = aggregate(bests, b).model_dump()
            curves = [best_so_far(per_task[n], budget, b) for n in names]
            cols = list(zip(*curves)) if curves else []
            qs = [quantiles(col) for col in cols]
            v["curves"][b] = {"q25": [q[0] for q in qs], "median": [q[1] for q in qs], "q75": [q[2] for q in qs]}
            if b == "eager":
                v["per_task"] = [t.model_dump() for t in bests]
            else:
                for row, t in zip(v["per_task"], bests):
                    row["best_vs_compile"] = t.speedup_compile
                    row["best_vs_compile_node"] = t.node_id
        adapted = read_steps(st.dir / "adapt.jsonl")
        if adapted:
            v["adapt"] = {"tasks": len(adapted), "verdicts": dict(Counter(s.status for s in adapted))}
        out["variants"][st.variant] = v
    return out


def _f(x: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def markdown(data: dict[str, Any], figures: list[str], notes: list[str]) -> str:
    """The report as Markdown."""
    lines = ["# Bench report", "",
             f"Run folder `{data['run_dir']}`, {data['steps_per_task']} steps per task, generated {data['generated']}.",
             ""]
    variants = data["variants"]
    for b in BASELINES:
        lines += [f"## Against {BASELINE_TITLES[b]}", "",
                  "| variant | tasks | steps | accuracy | " + " | ".join(f"fast_{p:g}" for p in FAST_P)
                  + " | geomean speedup (tasks) | mean speedup, clipped at 10 | tokens |",
                  "|---" * (7 + len(FAST_P)) + "|"]
        measured = False
        for name, v in variants.items():
            a = Aggregate.model_validate(v["summary"][b])
            measured = measured or a.geomean_tasks > 0
            lines.append(f"| {name} | {a.tasks} | {v['steps']} | {a.accuracy:.0%} | "
                         + " | ".join(f"{a.fast_p[f'{p:g}']:.0%}" for p in FAST_P)
                         + f" | {_f(a.geomean_speedup)} ({a.geomean_tasks}) | {a.mean_speedup_clip10:.2f} "
                         f"| {v['tokens']} |")
        if not measured:
            lines += ["", f"No kernel was timed against {BASELINE_TITLES[b]} (a CPU run checks correctness only; "
                          "torch.compile is measured on a GPU)."]
        lines.append("")
    lines += ["## Per task", "", "| task | variant | correct | best kernel | speedup vs eager | vs torch.compile "
              "| found at step | steps |", "|---|---|---|---|---|---|---|---|"]
    rows = [(t["task"], name, t) for name, v in variants.items() for t in v["per_task"]]
    for task, name, t in sorted(rows, key=lambda r: (r[0], r[1])):
        lines.append(f"| {task} | {name} | {'yes' if t['correct'] else 'no'} | {t['node_id'] or '-'} "
                     f"| {_f(t['speedup'], '{:.3f}x')} | {_f(t.get('best_vs_compile'), '{:.3f}x')} "
                     f"| {_f(t['found_at'], '{:d}')} | {t['steps']} |")
    statuses: list[str] = []
    for v in variants.values():
        statuses += [k for k in v["verdicts"] if k not in statuses]
    lines += ["", "## Steps by verdict", "", "| variant | " + " | ".join(statuses) + " |",
              "|---" * (1 + len(statuses)) + "|"]
    for name, v in variants.items():
        lines.append(f"| {name} | " + " | ".join(f"{v['verdicts'].get(s, 0.0):.0%}" for s in statuses) + " |")
    adapted = {name: v["adapt"] for name, v in variants.items() if v.get("adapt")}
    if adapted:
        lines += ["", "## Adapt stage", ""] + [
            f"- {name}: {a['tasks']} new task(s) before the search; first kernels: "
            + ", ".join(f"{k} {n}" for k, n in a["verdicts"].items()) for name, a in adapted.items()]
    if figures:
        lines += ["", "## Plots", ""] + [f"![{Path(f).stem}]({f})" for f in figures]
    lines += ["", "## Definitions", "",
              "A step is one kernel asked of the model (a duplicate or an answer without code counts too). "
              "accuracy: share of tasks with a correct kernel. fast_p: share of tasks whose best correct kernel "
              "is more than p times faster than the baseline. Geometric mean: over the tasks with a correct timed "
              "kernel. Mean clipped at 10: over all tasks, a task without a correct timed kernel counting 0. "
              "A variant named `-nomem` ran without the skill memory."]
    lines += [""] + [f"Note: {n}" for n in notes]
    return "\n".join(lines).rstrip() + "\n"


def write_report(run_dir: Path) -> tuple[Path, list[str]]:
    """Write report.md, report.json and plots/*.png into `run_dir`; the Markdown path and any notes."""
    data = collect(run_dir)
    notes: list[str] = []
    figures: list[str] = []
    if data["variants"]:
        try:
            vs = data["variants"]
            figures.append(str(plots.best_speedup(run_dir / "plots" / "best_speedup.png",
                                                  {n: v["curves"]["eager"] for n, v in vs.items()}, "eager")
                               .relative_to(run_dir)))
            if any(v["summary"]["compile"]["geomean_tasks"] for v in vs.values()):
                figures.append(str(plots.best_speedup(run_dir / "plots" / "best_speedup_compile.png",
                                                      {n: v["curves"]["compile"] for n, v in vs.items()},
                                                      "torch.compile").relative_to(run_dir)))
            finals = {n: [t["speedup"] or 0.0 for t in v["per_task"]] for n, v in vs.items()}
            figures.append(str(plots.final_speedups(run_dir / "plots" / "final_speedups.png", finals, "eager")
                               .relative_to(run_dir)))
            figures.append(str(plots.verdicts(run_dir / "plots" / "verdicts.png",
                                              {n: v["verdicts"] for n, v in vs.items()}).relative_to(run_dir)))
        except plots.PlotsUnavailable as exc:
            notes.append(str(exc))
    else:
        notes.append("no steps recorded yet")
    data["figures"] = figures
    (run_dir / "report.json").write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
    md = run_dir / "report.md"
    md.write_text(markdown(data, figures, notes))
    return md, notes
