"""Every KernelBench task at its real size: registered, then judged with a pass-through candidate.

Runs on a GPU machine (it also runs on the CPU through Triton's interpreter, for a few small
tasks with --limit). For each task of the chosen levels it does what `register_task` does
(load, reference outputs into the judge, task flags, eager and torch.compile baselines), then
evaluates one pass-through candidate: a `ModelNew` that runs the task's own computation and
copies each output through a Triton kernel. Its outputs match the reference, so it reaches the
last checks; since every PyTorch operation of the reference still runs in PyTorch, the expected
verdict is `cheat_detected`. What matters is that every task that fits gets a verdict and
none gets `infra_error`; a task that cannot fit must be refused with a clear message.

    python benchmarks/kernelbench_suite.py --problems PATH/problems --levels 1 2 3 \\
        --jsonl results.jsonl --markdown results.md [--deadline-s 540] [--parallel 8] [--shard I/N]
    python benchmarks/kernelbench_suite.py --problems PATH/problems --jsonl a.jsonl --report b.jsonl

Rows go to the JSONL as they finish (a rerun skips tasks already there); the markdown is the
summary per level: tasks registered, verdicts, seconds per task, peak host memory of this
process (the server's role) and of the judge, peak device memory, and every refusal.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

PASS_THROUGH = '''

import triton
import triton.language as tl


@triton.jit
def _pass_through_copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


def _pass_through(t):
    if not isinstance(t, torch.Tensor):
        return t
    src = t.contiguous()
    out = torch.empty_like(src)
    n = src.numel()
    if n:
        _pass_through_copy[(triton.cdiv(n, 1024),)](src, out, n, BLOCK=1024)
    return out


class ModelNew(Model):
    def forward(self, *args, **kwargs):
        result = super().forward(*args, **kwargs)
        if isinstance(result, (tuple, list)):
            return type(result)(_pass_through(r) for r in result)
        return _pass_through(result)
'''


def rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Peaks:
    """Samples this process's RSS, the judge's RSS and the device's used memory."""

    def __init__(self, judge_pid) -> None:
        self.judge_pid = judge_pid
        self.server = self.judge = self.device = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _device_used(self) -> int:
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=5).stdout.split()
            return int(out[0]) << 20 if out else 0
        except (OSError, ValueError, subprocess.TimeoutExpired):
            return 0

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.server = max(self.server, rss_bytes(os.getpid()))
            pid = self.judge_pid()
            if pid:
                self.judge = max(self.judge, rss_bytes(pid))
            self.device = max(self.device, self._device_used())

    def start(self) -> "Peaks":
        self._thread.start()
        return self

    def snapshot(self) -> dict:
        return {"server_rss_gb": self.server / 1e9, "judge_rss_gb": self.judge / 1e9, "device_gb": self.device / 1e9}

    def reset(self) -> dict:
        out = self.snapshot()
        self.server = self.judge = self.device = 0
        return out

    def stop(self) -> None:
        self._stop.set()


def one_task(ev, path: Path, level: int, names: dict[str, str] | None = None) -> dict:
    from adaexplore.evaluator.task import TaskError, load_task_file

    row = {"level": level, "task": path.name}
    t0 = time.monotonic()
    try:
        task = load_task_file(path)
    except TaskError as exc:
        return {**row, "registered": False, "refused": f"TaskError: {exc}", "seconds": time.monotonic() - t0}
    if names is not None:  # for the trace, which knows its jobs' tasks by their judge key
        names[ev.judge_key(task, task.protocol)] = f"{level}/{path.name}"
    validation = ev.validate_task(task)
    row["register_s"] = round(time.monotonic() - t0, 2)
    if not validation.ok:
        err = validation.error
        row.update(registered=False, refused=f"{err.error_class}: {err.message}"[:500] if err else "invalid",
                   seconds=round(time.monotonic() - t0, 2))
        return row
    row.update(registered=True, flags=[f.code for f in validation.flags],
               eager_ms=validation.reference_timing.mean_ms if validation.reference_timing else None,
               compile_ms=validation.compile_timing.mean_ms if validation.compile_timing else None,
               compile_note=(validation.compile_note or "")[:200] or None)
    result = ev.evaluate(task, task.source + PASS_THROUGH)
    row.update(verdict=result.status.value, detail=(result.cheat_reason or (result.error.message if result.error
                                                                           else ""))[:300],
               seconds=round(time.monotonic() - t0, 2))
    return row


def level_paths(problems: Path, level: int, only: list[str], limit: int = 0, shard: int = 0,
                shards: int = 1) -> list[Path]:
    """The task files of one level to run, in task-number order: those `only` names (LEVEL:ID,ID),
    the first `limit`, then every `shards`-th of them from the `shard`-th."""
    paths = sorted((problems / f"level{level}").glob("*.py"), key=lambda p: int(p.name.split("_")[0]))
    chosen = [spec.split(":", 1)[1] for spec in only if spec.split(":", 1)[0] == str(level)]
    if chosen:
        ids = {int(i) for spec in chosen for i in spec.split(",") if i}
        paths = [p for p in paths if int(p.name.split("_")[0]) in ids]
    if limit:
        paths = paths[:limit]
    return paths[shard::shards]


def summarize(rows: list[dict], peaks: dict[int, dict]) -> str:
    lines = ["| level | tasks | registered | refused | verdicts | infra_error | s/task (mean) | peak server RSS GB |"
             " peak judge RSS GB | peak device GB |", "|---|---|---|---|---|---|---|---|---|---|"]
    refusals = []
    for level in sorted({r["level"] for r in rows}):
        mine = [r for r in rows if r["level"] == level]
        verdicts = Counter(r.get("verdict") for r in mine if r.get("registered"))
        refused = [r for r in mine if not r.get("registered")]
        infra = sum(1 for r in mine if r.get("verdict") == "infra_error" or "InfraError" in str(r.get("refused", "")))
        mean_s = sum(r.get("seconds", 0) for r in mine) / max(1, len(mine))
        p = peaks.get(level, {})
        lines.append(f"| {level} | {len(mine)} | {len(mine) - len(refused)} | {len(refused)} | "
                     + ", ".join(f"{k}: {v}" for k, v in sorted(verdicts.items())) + f" | {infra} | {mean_s:.1f} | "
                     f"{p.get('server_rss_gb', 0):.2f} | {p.get('judge_rss_gb', 0):.2f} | {p.get('device_gb', 0):.1f} |")
        refusals += [f"- level {level} `{r['task']}`: {r['refused']}" for r in refused]
    return "\n".join(lines + ["", "Refused:" if refusals else "Refused: none", *refusals]) + "\n"


def judge_line(ev) -> str:
    """What the judge received and where its time went; what the relay to it cost this process."""
    try:
        stats = ev.judge.stats()
    except Exception as exc:  # noqa: BLE001 - a report line, not a verdict
        return f"Judge: no stats ({exc})\n"
    relay = ev.judge.relay
    rate = relay["bytes"] / relay["seconds"] / 1e9 if relay["seconds"] else 0.0
    rings = f" ({stats.get('ring_bytes_in', 0) / 1e9:.1f} GB of it through rings)" if "ring_bytes_in" in stats else ""
    return (f"Judge: {stats.get('bytes_in', 0) / 1e9:.1f} GB received{rings}; seconds "
            + ", ".join(f"{k} {v:.0f}" for k, v in stats.get("seconds", {}).items())
            + f". Relay from workers: {relay['bytes'] / 1e9:.1f} GB in {relay['seconds']:.0f} s summed over jobs"
            f" ({rate:.2f} GB/s per stream).\n")


def phase_columns() -> tuple[str, ...]:
    """The evaluator's clock, then the phases its workers report (`Phase`)."""
    from adaexplore.common.vocab import Phase

    return ("queued_s", "run_s", "setup_s", "gpu_wait_s", "measure_s", *(p.value for p in Phase))


def where_time_went(trace: list[dict], wall_s: float) -> str:
    """Worker jobs of this run by kind: how many, and their summed seconds per phase."""
    phases = phase_columns()
    groups: dict[str, dict[str, float]] = {}
    for t in trace:
        name = f"{getattr(t['kind'], 'value', t['kind'])}{' (candidate)' if t.get('candidate') else ''}{' alone' if t.get('alone') else ''}"
        g = groups.setdefault(name, {"jobs": 0})
        g["jobs"] += 1
        for phase in phases:
            if phase in t:
                g[phase] = g.get(phase, 0.0) + float(t[phase])
    lines = [f"Where the time went ({wall_s:.0f} s of wall clock; seconds summed over jobs):", "",
             "| jobs | count | " + " | ".join(p.removesuffix("_s").replace("_", " ") + " s" for p in phases) + " |",
             "|---|---|" + "---|" * len(phases)]
    for name, g in sorted(groups.items()):
        lines.append(f"| {name} | {int(g['jobs'])} | " + " | ".join(
            f"{g.get(p, 0):.0f}" for p in phases) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", required=True, type=Path)
    ap.add_argument("--levels", nargs="+", type=int, default=[1, 2, 3])
    ap.add_argument("--jsonl", type=Path, required=True)
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("--parallel", type=int, default=8, help="tasks in flight at once")
    ap.add_argument("--slots", type=int, default=0, help="the evaluator's worker processes at once (0: its default)")
    ap.add_argument("--deadline-s", type=float, default=0, help="stop starting tasks after this many seconds")
    ap.add_argument("--limit", type=int, default=0, help="at most this many tasks per level")
    ap.add_argument("--baselines", default="eager,compile")
    ap.add_argument("--trace-jsonl", type=Path, help="each worker job's phases, with its task's name, as JSONL")
    ap.add_argument("--only", nargs="*", default=[], help="LEVEL:ID,ID... (e.g. 2:1,7,19): only these tasks")
    ap.add_argument("--shard", default="0/1", help="I/N: of each level's tasks, only every N-th from the I-th "
                    "(one process per GPU, each with its own --jsonl)")
    ap.add_argument("--report", nargs="*", type=Path, default=None,
                    help="run nothing: summarize --jsonl's rows, with those of these JSONL files if any "
                    "(the shards of one run)")
    args = ap.parse_args()
    shard, shards = (int(x) for x in args.shard.split("/"))
    if not 0 <= shard < shards:
        ap.error(f"--shard {args.shard}: need 0 <= I < N")
    if args.report is not None:
        rows = [json.loads(line) for f in [*args.report, args.jsonl] if f.exists()
                for line in f.read_text().splitlines() if line.strip()]
        text = summarize(rows, {})
        if args.markdown:
            args.markdown.write_text(text)
        print(text)
        return 0

    from adaexplore.evaluator.evaluator import Evaluator

    # The evaluator's decisions under load (a job run again alone, a reference waiting for room in
    # the judge), timed, on stderr: the log of a run that went slowly says why.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(relativeCreated)8.0f ms %(message)s"))
    logging.getLogger("adaexplore.evaluator").addHandler(handler)
    logging.getLogger("adaexplore.evaluator").setLevel(logging.INFO)
    done = set()
    rows: list[dict] = []
    if args.jsonl.exists():
        rows = [json.loads(line) for line in args.jsonl.read_text().splitlines() if line.strip()]
        done = {(r["level"], r["task"]) for r in rows}
    start = time.monotonic()
    ev = Evaluator(baselines=tuple(args.baselines.split(",")), max_parallel=args.slots or None, trace=True,
                   wait_for_compile=True)  # every task's torch.compile baseline, as registration measures it
    print(f"sandbox: {ev.sandbox_info()}", file=sys.stderr, flush=True)
    peaks = Peaks(ev.judge.pid).start()
    level_peaks: dict[int, dict] = {}
    lock = threading.Lock()
    in_flight: dict[str, float] = {}  # "level/task" -> when it started
    current = {"level": args.levels[0] if args.levels else 0}
    names: dict[str, str] = {}  # judge key -> "level/file", for --trace-jsonl

    def snapshot() -> str:
        """The summary so far, where the time went, and the tasks in flight (a run cut short, or
        stuck, still says what it was doing)."""
        now = time.monotonic()
        with lock:
            flying = sorted(in_flight.items(), key=lambda kv: kv[1])
            text = summarize(rows, {**level_peaks, current["level"]: peaks.snapshot()})
        text += "\n" + where_time_went(ev.trace or [], now - start) + "\n" + judge_line(ev)
        if flying:
            text += "\nIn flight: " + ", ".join(f"{name} ({now - t0:.0f} s)" for name, t0 in flying) + "\n"
        return text

    def write_trace() -> None:
        """The jobs so far, each with its task's name and when it ended (seconds into the run)."""
        if args.trace_jsonl:
            lines = [json.dumps({**t, "kind": str(getattr(t["kind"], "value", t["kind"])),
                                 "at": round(t["at"] - start, 2), "task": names.get(t["judge_key"], "")})
                     for t in list(ev.trace or [])]
            args.trace_jsonl.write_text("".join(line + "\n" for line in lines))

    stop_reporting = threading.Event()

    def report_every_minute() -> None:
        while not stop_reporting.wait(60.0):
            if args.markdown:
                args.markdown.write_text(snapshot())
            write_trace()

    threading.Thread(target=report_every_minute, daemon=True, name="suite-report").start()
    try:
        for level in args.levels:
            paths = level_paths(args.problems, level, args.only, args.limit, shard, shards)
            todo = [p for p in paths if (level, p.name) not in done]

            current["level"] = level

            def run(path: Path, level: int = level) -> None:
                if args.deadline_s and time.monotonic() - start > args.deadline_s:
                    return
                name = f"{level}/{path.name}"
                with lock:
                    in_flight[name] = time.monotonic()
                try:
                    row = one_task(ev, path, level, names)
                except Exception as exc:  # noqa: BLE001 - a crash of ours is a finding, recorded
                    row = {"level": level, "task": path.name, "registered": False,
                           "refused": f"InfraError (uncaught): {type(exc).__name__}: {exc}"[:500]}
                with lock:
                    in_flight.pop(name, None)
                    rows.append(row)
                    with args.jsonl.open("a") as fh:
                        fh.write(json.dumps(row) + "\n")
                if args.markdown:  # a run cut short still leaves its summary so far
                    args.markdown.write_text(snapshot())
                print(json.dumps(row)[:300], file=sys.stderr, flush=True)

            with ThreadPoolExecutor(args.parallel) as pool:
                list(pool.map(run, todo))
            level_peaks[level] = peaks.reset()
            level_peaks[level]["judge"] = ev.judge.stats()
        judge = judge_line(ev)
    finally:
        stop_reporting.set()
        peaks.stop()
        write_trace()
        ev.close()
    text = summarize(rows, level_peaks)
    text += "\nPeak memory per level, measured this run: " + json.dumps(level_peaks) + "\n"
    text += "\n" + where_time_went(ev.trace or [], time.monotonic() - start) + "\n" + judge
    if args.markdown:
        args.markdown.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
