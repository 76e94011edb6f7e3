"""The `bench` and `report` subcommands of `adaexplore` (runs in the user's shell process).

Only argparse at import time: the server's CLI builds these parsers on every start, and the bench's own
modules (and its optional packages) load when a bench command runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

METHODS = ("tree", "chain", "sample")


def _methods(values: list[str] | None) -> list[str]:
    names = [m.strip() for v in (values or ["tree"]) for m in v.split(",") if m.strip()]
    if "all" in names:
        return list(METHODS)
    bad = [m for m in names if m not in METHODS]
    if bad:
        raise SystemExit(f"error: unknown --method {', '.join(bad)}: choose from {', '.join(METHODS)} or all")
    return list(dict.fromkeys(names))


def cmd_bench(args: argparse.Namespace) -> int:
    from .endpoint import EndpointError, endpoint_settings
    from .runner import run
    from .settings import BenchSettings, Budget, Method
    from .tasks import find_tasks

    try:
        files = find_tasks(Path(args.problems), args.level, args.tasks)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not files:
        print(f"error: no task files under {args.problems}", file=sys.stderr)
        return 2
    replay = None
    endpoint = None
    if args.driver == "replay":
        if not args.replay_dir:
            print("error: --driver replay needs --replay-dir (a folder with one subfolder of kernels per task)",
                  file=sys.stderr)
            return 2
        replay = Path(args.replay_dir)
    else:
        try:
            endpoint = endpoint_settings(args.base_url, args.model, args.api_key, args.temperature,
                                         args.max_answer_tokens)
        except EndpointError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.adapt_rounds and args.no_memory:
        print("error: --adapt-rounds builds the skill memory; it cannot go with --no-memory", file=sys.stderr)
        return 2
    settings = BenchSettings(
        run_dir=Path(args.run_dir), task_files=files, methods=[Method(m) for m in _methods(args.method)],
        memory=not args.no_memory, agents=args.agents, adapt_rounds=args.adapt_rounds, adapt_tasks=args.adapt_tasks, parallel_variants=args.parallel, device=args.device,
        budget=Budget(steps=args.steps, max_tokens=args.max_tokens, max_seconds=args.time_limit),
        progress=not args.no_progress)
    return run(settings, endpoint, replay)


def cmd_report(args: argparse.Namespace) -> int:
    from .report import write_report

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        print(f"error: no run folder at {run_dir}", file=sys.stderr)
        return 2
    md, notes = write_report(run_dir)
    for n in notes:
        print(f"note: {n}", file=sys.stderr)
    print(md.read_text() if args.print else md)
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register `bench` and `report` on the `adaexplore` command's subparsers."""
    b = sub.add_parser("bench", help="run the search end to end on a task set with a chat model, and report")
    b.add_argument("--problems", required=True, help="task folder (KernelBench's problems/ with levelN/, or a "
                                                     "folder of task files)")
    b.add_argument("--level", type=int, help="KernelBench level: reads PROBLEMS/levelN when it exists")
    b.add_argument("--tasks", help="task numbers, e.g. 1-20 or 12,63,86 (default: all)")
    b.add_argument("--steps", type=int, default=100, help="kernels per task and method (default 100)")
    b.add_argument("--agents", type=int, default=1, help="concurrent agents per task, sharing its tree (default 1)")
    b.add_argument("--method", action="append", metavar="M",
                   help="tree (AdaExplore, default), chain (refine the best so far), sample (independent "
                        "samples), or all; repeat or comma-separate to compare in one run")
    b.add_argument("--no-memory", action="store_true", help="run without the skill memory (variants named -nomem)")
    b.add_argument("--adapt-rounds", type=int, default=0, metavar="N",
                   help="before the search, N rounds of the Adapt stage (the server's adapt prompt: new tasks "
                        "from synthesize_task, one kernel each, rules from the failures); needs the memory")
    b.add_argument("--adapt-tasks", type=int, default=3, metavar="K", help="new tasks per Adapt round (default 3)")
    b.add_argument("--driver", choices=("openai", "replay"), default="openai",
                   help="openai: any OpenAI-compatible endpoint; replay: answer from --replay-dir")
    b.add_argument("--replay-dir", help="replay: one subfolder of candidate kernels per task (named as the task)")
    b.add_argument("--base-url", help="endpoint, e.g. http://localhost:8000/v1 (default $OPENAI_BASE_URL)")
    b.add_argument("--model", help="model name (default $OPENAI_MODEL)")
    b.add_argument("--api-key", help="API key (default $OPENAI_API_KEY)")
    b.add_argument("--temperature", type=float, default=0.7, help="sampling temperature (default 0.7)")
    b.add_argument("--max-answer-tokens", type=int, help="max_tokens of each answer (default: the endpoint's)")
    b.add_argument("--max-tokens", type=int, help="stop after this many model tokens (resumable)")
    b.add_argument("--time-limit", type=float, metavar="S", help="stop after S seconds of wall time (resumable)")
    b.add_argument("--run-dir", default="bench-run", help="where the run's state and report go (default bench-run)")
    b.add_argument("--parallel", action="store_true", help="run the compared methods at once (one server each)")
    b.add_argument("--device", help="the servers' device, e.g. cuda:0 or cpu")
    b.add_argument("--no-progress", action="store_true", help="one line per step instead of progress bars")
    b.set_defaults(fn=cmd_bench)

    r = sub.add_parser("report", help="write the report and plots of a bench run folder (finished or running)")
    r.add_argument("run_dir")
    r.add_argument("--print", action="store_true", help="print the Markdown instead of its path")
    r.set_defaults(fn=cmd_report)
