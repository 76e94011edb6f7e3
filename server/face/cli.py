"""The `adaexplore` command: serve, eval, token, tasks, memory, demo, bench, report (runs in the user's shell
process; `serve` is also the server process that `demo`, `bench` and MCP clients start)."""

from __future__ import annotations

import argparse
import atexit
import getpass
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ...evaluator import SANDBOX_FULL, probe_sandbox
from ..core.config import ServerConfig
from ..core.errors import ServiceError

if TYPE_CHECKING:
    from ...evaluator import ErrorInfo
    from ..core.tree_store import TreeStore


def _login() -> str:
    """The login name of whoever runs the command (who a memory change is recorded as by default)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "local"


def _config(args: argparse.Namespace, **extra: object) -> ServerConfig:
    """The settings of this command: the environment's, overridden by the flags given (and by `extra`)."""
    given: dict[str, object] = {}
    if getattr(args, "data_dir", None):
        given["data_dir"] = Path(args.data_dir).expanduser()
    if getattr(args, "task_root", None):
        given["task_roots"] = tuple(Path(p).expanduser() for p in args.task_root)
    if getattr(args, "wait_limit", None) is not None:
        given["wait_limit_s"] = args.wait_limit
    if getattr(args, "device", None):
        given["device"] = args.device
    if getattr(args, "max_parallel", None):
        given["max_parallel"] = args.max_parallel
    if getattr(args, "lease", None) is not None:
        if args.lease < 1:
            raise SystemExit("error: --lease must be at least 1 second")
        given["lease_s"] = args.lease
    if getattr(args, "shutdown_grace", None) is not None:
        given["shutdown_grace_s"] = max(0.0, args.shutdown_grace)
    if getattr(args, "memory_threshold", None) is not None:
        if args.memory_threshold < 1:
            raise SystemExit("error: --memory-threshold must be at least 1")
        given["memory_threshold"] = args.memory_threshold
    return ServerConfig(**given, **extra)  # type: ignore[arg-type]  # checked by the model


def cmd_serve(args: argparse.Namespace) -> int:
    from ..core.files import secure_tree
    from .app import HttpSettings, build_server, http_app, quiet_stdout_logging

    os.umask(0o077)  # whatever this process or the evaluator creates is the owner's alone
    sys.setswitchinterval(0.001)  # threads answering tools get the interpreter back quickly from busy ones
    quiet_stdout_logging(logging.DEBUG if args.verbose else logging.WARNING)
    level, meaning = probe_sandbox()
    cfg = _config(args, sandbox=(level, meaning))
    secure_tree(cfg.data_dir)
    if level != SANDBOX_FULL:
        print(f"adaexplore: warning: weaker sandbox: {meaning}", file=sys.stderr, flush=True)
    if not args.http:
        from .serving import serve_stdio

        mcp, svc = build_server(cfg)
        return serve_stdio(mcp, svc)
    http = HttpSettings(host=args.host, port=args.port, allowed_hosts=args.allow_host or [],
                        allowed_origins=args.allow_origin or [], max_body_bytes=args.max_body,
                        access_log=args.access_log)
    if args.host not in ("127.0.0.1", "localhost", "::1") and not args.allow_remote:
        print(f"refusing to listen on {args.host}: the server is loopback-only unless --allow-remote is given",
              file=sys.stderr)
        return 2
    if args.allow_remote and level != SANDBOX_FULL and not args.accept_weak_sandbox:
        print(f"refusing --allow-remote: {meaning}. Remote callers' kernels would run with that weaker "
              "sandbox; pass --accept-weak-sandbox to accept it", file=sys.stderr)
        return 2
    from .serving import serve_http

    mcp, svc = build_server(cfg, http=http)
    if not svc.store.list_tokens():
        print("note: no tokens exist yet; create one with `adaexplore token issue NAME --scopes read,write`",
              file=sys.stderr)
    app = http_app(mcp, http, svc)
    print(f"adaexplore: serving MCP on http://{args.host}:{args.port}/mcp (data: {cfg.data_dir})", file=sys.stderr,
          flush=True)
    return serve_http(app, svc, host=args.host, port=args.port)


def cmd_eval(args: argparse.Namespace) -> int:
    from ...evaluator import Evaluator, TaskError, load_task_file, static_verdict, to_json

    try:
        task = load_task_file(args.task)
        source = Path(args.candidate).read_text()
    except (TaskError, OSError, UnicodeDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    started = time.monotonic()
    # A verdict the static checks give alone needs neither the reference nor a worker: nothing is started.
    result = static_verdict(source)
    trace: list[dict] = []
    timed = False
    if result is not None:
        result = result.model_copy(update={"device": "none (the static checks decided)"})
    else:
        # One shot: its answer compares with torch.compile too, and that baseline is stored for the next run.
        with Evaluator(device=args.device, trace=True, wait_for_compile=True) as ev:
            # The task first, as a server registers it: one that cannot be evaluated here is refused
            # before any candidate runs (its reference is kept for the candidate).
            validation = ev.validate_task(task)
            if not validation.ok:
                refusal = _refusal(validation.error)
                print(f"error: {refusal}", file=sys.stderr)
                return 1 if refusal.startswith(INFRA_REFUSAL) else 2
            result = ev.evaluate(task, source)
            trace, timed = list(ev.trace or []), ev.timed
    if args.json:
        sys.stdout.write(to_json(result).decode() + "\n")
    else:
        print(f"task: {task.name}   candidate: {args.candidate}   device: {result.device}")
        print(result.feedback(4000))
    print(where_time_went(trace, time.monotonic() - started, timed), file=sys.stderr)
    return 0 if result.ok else 1


INFRA_REFUSAL = "the evaluator could not run the task's reference"


def _refusal(error: ErrorInfo | None) -> str:
    """Why `adaexplore eval` refuses a task whose validation failed (`error`), in the words of the
    server's refusal at registration."""
    if error is None:
        return "the task's reference did not run"
    if error.error_class == "InfraError":  # ours: the task is not to blame
        return f"{INFRA_REFUSAL}: {error.message}; try again"
    if error.error_class == "TaskTooLarge":
        return (f"task too large for this machine: {error.message}. Make its inputs or outputs smaller, or "
                "evaluate it on a larger device")
    line = f" (line {error.line})" if error.line else ""
    return f"bad task: the reference does not run: {error.error_class}: {error.message}{line}"


def where_time_went(trace: list[dict], wall_s: float, timed: bool) -> str:
    """One line: the seconds of each worker job of a one-shot evaluation, and what was reused."""
    def seconds(t: dict) -> float:
        return sum(float(t.get(k, 0.0)) for k in ("run_s", "setup_s", "gpu_wait_s", "measure_s"))

    parts = []
    for name, pick in (("reference", lambda t: t["kind"] == "reference"),
                       ("baselines", lambda t: t["kind"] == "timing" and not t.get("candidate")),
                       ("candidate check", lambda t: t["kind"] == "candidate"),
                       ("candidate timing", lambda t: t["kind"] == "timing" and t.get("candidate"))):
        jobs = [t for t in trace if pick(t)]
        if jobs:
            parts.append(f"{name} {sum(seconds(t) for t in jobs):.1f} s" + (f" ({len(jobs)} runs)" if len(jobs) > 1 else ""))
        elif name == "baselines" and timed and any(t["kind"] == "reference" for t in trace):
            parts.append("baselines from the cache")
    return f"time: {wall_s:.1f} s in all, of which " + ", ".join(parts) + "; the rest is start-up" if parts else \
        f"time: {wall_s:.1f} s in all"


def cmd_token(args: argparse.Namespace) -> int:
    from ..core.tree_store import TreeStore

    store = TreeStore(_config(args).db_path)
    try:
        return _token(args, store)
    finally:
        store.close()


def _token(args: argparse.Namespace, store: TreeStore) -> int:
    from .auth import issue_token, parse_scopes

    if args.token_cmd == "issue":
        try:
            token = issue_token(store, args.name, parse_scopes(args.scopes))
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(token)
        print(f"token '{args.name}' issued; it is shown only this once", file=sys.stderr)
    elif args.token_cmd == "list":
        for t in store.list_tokens():
            print(f"{t.name}\t{','.join(t.scopes)}\t{'revoked' if t.revoked else 'active'}")
    elif args.token_cmd == "revoke":
        if not store.revoke_token(args.name):
            print(f"error: no active token named {args.name!r}", file=sys.stderr)
            return 1
        print(f"revoked {args.name}")
    return 0


def cmd_tasks(args: argparse.Namespace) -> int:
    from ...evaluator import TaskError, load_task_folder
    from ..core.services import Service

    try:
        tasks, skipped = load_task_folder(args.folder)
    except TaskError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.limit:
        tasks = tasks[: args.limit]
    svc = Service(_config(args))
    failures = 0
    try:
        for task in tasks:
            try:
                r = svc.tasks.register_task(source=task.source, path=None, name=task.name, search=None, protocol=None,
                                      caller="local")
                note = "exists" if r.existing else "added"
                flags = f" flags: {','.join(f.code for f in r.flags)}" if r.flags else ""
                print(f"{r.task_id}\t{task.name}\t{note}{flags}")
            except ServiceError as exc:
                failures += 1
                print(f"-\t{task.name}\trejected: {exc}")
    finally:
        svc.close()
    for name, why in skipped.items():
        print(f"-\t{name}\tskipped: {why}")
    return 1 if failures else 0


def cmd_memory(args: argparse.Namespace) -> int:
    from ...skills import SkillStore, UnknownRuleError

    cfg = _config(args)
    cfg.db_path.parent.mkdir(parents=True, exist_ok=True)
    mem = SkillStore(cfg.db_path, threshold=cfg.memory_threshold)
    try:
        if args.memory_cmd == "list":
            view = mem.memory(include_candidates=args.all, limit=500, token_budget=100000)
            for r in view.rules:
                print(f"{r.id}\t{r.count}\t{'active' if r.active else 'candidate'}\t{r.text}")
        elif args.memory_cmd == "show":
            print(mem.get_rule(args.rule_id).model_dump_json(indent=2))
        elif args.memory_cmd == "export":
            data = json.dumps(mem.export(), indent=2)
            if args.out:
                Path(args.out).write_text(data)
            else:
                print(data)
        elif args.memory_cmd == "import":
            summary = mem.import_(json.loads(Path(args.file).read_text()), who=args.who)
            print(summary.model_dump_json(exclude={"id_map"}))
        elif args.memory_cmd == "retire":
            print(mem.retire(args.rule_id, who=args.who).model_dump_json())
    except UnknownRuleError as exc:
        print(f"error: unknown rule {exc}", file=sys.stderr)
        return 1
    except (OSError, ValueError, KeyError, TypeError) as exc:  # unreadable or malformed import file
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        mem.db.close()
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(keep=args.keep, data_dir=args.data_dir)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="adaexplore", description="MCP server: PyTorch modules -> Triton kernels")
    sub = p.add_subparsers(dest="cmd", required=True)

    def data_dir(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--data-dir", help="state directory (default $ADAEXPLORE_HOME or ~/.adaexplore)")

    s = sub.add_parser("serve", help="run the MCP server (stdio by default)")
    data_dir(s)
    s.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio (bearer tokens)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8765)
    s.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host")
    s.add_argument("--accept-weak-sandbox", action="store_true",
                   help="with --allow-remote, serve even where kernel code cannot be put in namespaces")
    s.add_argument("--allow-host", action="append", help="extra allowed Host header (e.g. example.org:*)")
    s.add_argument("--allow-origin", action="append", help="extra allowed Origin (e.g. https://example.org)")
    s.add_argument("--max-body", type=int, default=1024 * 1024, help="HTTP request body limit in bytes")
    s.add_argument("--task-root", action="append", help="folder whose task files register_task may read")
    s.add_argument("--wait-limit", type=float, help="seconds evaluate_kernel waits before returning pending")
    s.add_argument("--device", help="e.g. cuda:0 or cpu")
    s.add_argument("--max-parallel", type=int, help="evaluations in flight")
    s.add_argument("--memory-threshold", type=int, metavar="N",
                   help="distinct tasks a skill-memory rule needs to become active (default 3)")
    s.add_argument("--lease", type=float, metavar="S",
                   help="evaluation lease in seconds: a server silent this long is taken for dead (default 30)")
    s.add_argument("--shutdown-grace", type=float, metavar="S",
                   help="on SIGTERM/SIGINT, seconds running evaluations may finish in (default 10)")
    s.add_argument("--access-log", default="-", metavar="PATH",
                   help="HTTP access log, one JSON line per request: '-' stderr (default), a file, or 'off'")
    s.add_argument("-v", "--verbose", action="store_true")
    s.set_defaults(fn=cmd_serve)

    e = sub.add_parser("eval", help="evaluate one candidate file against one task file")
    e.add_argument("task")
    e.add_argument("candidate")
    e.add_argument("--json", action="store_true", help="print the EvalResult as JSON")
    e.add_argument("--device")
    e.set_defaults(fn=cmd_eval)

    t = sub.add_parser("token", help="bearer tokens of the HTTP server")
    data_dir(t)
    tsub = t.add_subparsers(dest="token_cmd", required=True)
    ti = tsub.add_parser("issue", help="create a token and print it once")
    ti.add_argument("name")
    ti.add_argument("--scopes", default="read,write", help="comma-separated: read,write,admin")
    tsub.add_parser("list")
    tr = tsub.add_parser("revoke")
    tr.add_argument("name")
    for sp in tsub.choices.values():
        data_dir(sp)
    t.set_defaults(fn=cmd_token)

    k = sub.add_parser("tasks", help="task management")
    ksub = k.add_subparsers(dest="tasks_cmd", required=True)
    ki = ksub.add_parser("import", help="register every task file of a folder (e.g. KernelBench level1/)")
    ki.add_argument("folder")
    ki.add_argument("--limit", type=int)
    data_dir(ki)
    k.set_defaults(fn=cmd_tasks)

    m = sub.add_parser("memory", help="the skill memory")
    msub = m.add_subparsers(dest="memory_cmd", required=True)
    ml = msub.add_parser("list")
    ml.add_argument("--all", action="store_true", help="include candidate rules")
    ms = msub.add_parser("show")
    ms.add_argument("rule_id")
    me = msub.add_parser("export")
    me.add_argument("--out")
    mi = msub.add_parser("import")
    mi.add_argument("file")
    mr = msub.add_parser("retire")
    mr.add_argument("rule_id")
    for sp in (mi, mr):
        sp.add_argument("--who", default=_login())
    for sp in msub.choices.values():
        data_dir(sp)
    for sp in (ml, ms):
        sp.add_argument("--memory-threshold", type=int, metavar="N",
                        help="distinct tasks a rule needs to count as active (default 3)")
    m.set_defaults(fn=cmd_memory)

    d = sub.add_parser("demo", help="drive a short search through the official MCP client over stdio")
    d.add_argument("--data-dir", help="use this state directory instead of a temporary one")
    d.add_argument("--keep", action="store_true", help="keep the temporary state directory")
    d.set_defaults(fn=cmd_demo)

    from ..bench.cli import add_parsers as bench_parsers  # argparse only; the bench loads when it runs

    bench_parsers(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.fn(args) or 0)


def run() -> int:
    """The program (`adaexplore`, `python -m adaexplore.server.face.cli`): `main`, and an exit without the
    interpreter's teardown.

    When the interpreter tears down, Triton's native extension reports every object of its own
    still alive (one a busy thread holds, one in a cycle not yet collected) as leaked: some thirty
    lines that read as a crash. Python's orderly steps still run (threads joined, exit handlers run,
    logging flushed); only the teardown after them is skipped, by the handler registered here, first
    and so run last. Every command has closed what it opened by then: its evaluator's processes
    reaped, its database closed."""
    outcome = [1]  # an exception that escapes `main` exits 1, as Python's own would

    atexit.register(_leave, outcome)
    try:
        outcome[0] = main()
    except SystemExit as exc:  # argparse's and the commands' refusals: Python prints the message
        outcome[0] = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        raise
    except KeyboardInterrupt:
        outcome[0] = 130
        raise
    return outcome[0]


def _leave(outcome: list[int]) -> None:
    logging.shutdown()  # its own exit handler was registered before this one, so it would not run
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can reach the reader
            pass
    os._exit(outcome[0])


if __name__ == "__main__":
    sys.exit(run())
