"""One candidate, one fresh process, nothing reused: the field's usual harness, for comparison.

    python -m adaexplore.evaluator.coldrun --task T.py --candidate C.py --out result.json

Runs the same jobs as the warm evaluator (reference trials and timing, candidate trials and
timing, the same timing code and verdicts), all in this process, in the order a standard
harness uses. Only the on-disk Triton cache carries over between runs. The candidate shares
this process, so this mode is not protected against a hostile kernel: it exists to measure
what the warm, forked evaluator saves.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import torch

from ..common.vocab import Job, Kind
from . import lint
from .pipeline import NO_GPU_NOTE
from .reference import Reference
from .results import ErrorInfo, EvalProtocol, EvalResult, Status, to_json
from .sandbox.pool import WorkerResult
from .task import Task, load_task_file, source_hash
from .timing_stats import summarize
from .verdict import correctness_verdict, degenerate_flags, expect, timing_method, timing_verdict
from .worker import jobs
from .worker.harness import Reporter


class Collector(Reporter):
    """Stands in for the pipe: keeps each message with CPU copies of its tensors. Without a gate
    it measures at once: nothing else shares this process's GPU."""

    def __init__(self) -> None:
        super().__init__(fd=-1)
        self.messages: list[tuple[dict, list]] = []

    def _send(self, header: dict, tensors=None) -> None:
        self.messages.append((header, [t.detach().to("cpu").contiguous().clone() for t in tensors or []]))


def _in_process(runner, job: dict, t0: float) -> WorkerResult:
    rep = Collector()
    runner(job, rep)
    return WorkerResult(exit_code=0, signal=None, timed_out=False, elapsed_s=time.monotonic() - t0,
                        output_tail="", messages=rep.messages)


def evaluate_cold(task: Task, source: str, protocol: EvalProtocol | None = None, device: str = "cpu",
                  timed: bool | None = None, scratch: str | None = None) -> EvalResult:
    """Evaluate one candidate in this process, from nothing."""
    t0 = time.monotonic()
    protocol = protocol or task.protocol
    timed = device.startswith("cuda") if timed is None else timed
    scratch = scratch or tempfile.mkdtemp(prefix="cold-")
    base = {"task_source": task.source, "protocol": protocol.model_dump(mode="json"), "device": device,
            "scratch": scratch}
    meta = {"task_id": task.task_id, "source_hash": source_hash(source), "device": device,
            "protocol_key": protocol.key()}

    def done(result: EvalResult) -> EvalResult:
        return result.model_copy(update={**meta, "elapsed_s": round(time.monotonic() - t0, 3)})

    static = lint.check_candidate(source)
    if static.status is not None:
        return done(EvalResult(status=static.status, error=static.error, lint=static.issues))

    # The reference: trials, then its timing (a standard harness measures it every time).
    res = _in_process(jobs.run_reference, {**base, "kind": Job.reference, "check_run": timed}, t0)
    ref = Reference.from_report(res)
    ref.output_flags = [f.model_dump(mode="json") for f in degenerate_flags(ref, protocol.tolerance)]
    if ref.error is None and timed:
        tres = _in_process(jobs.run_timing, {**base, "kind": Job.timing}, t0)
        msg, ref.error = expect(tres, Kind.timing, "reference timing")
        if ref.error is None:
            # expect() gives the frames whenever it gives no error
            ref.timing = summarize(msg[0]["event_ms"], protocol.trim_fraction, method=timing_method(msg[0]))  # type: ignore[index]
    if ref.error is not None:
        return done(EvalResult(status=Status.infra_error, error=ErrorInfo(
            error_class="ReferenceError", message="the task's reference failed: " + ref.error.message)))

    cres = _in_process(jobs.run_candidate, {**base, "kind": Job.candidate, "candidate_source": source}, t0)
    result = correctness_verdict(cres, ref, protocol, static.issues)
    if result.status is Status.correct and timed:
        tres = _in_process(jobs.run_timing, {**base, "kind": Job.timing, "candidate_source": source}, t0)
        result = timing_verdict(tres, ref, protocol, result)
    elif result.status is Status.correct:
        result = result.model_copy(update={"timing_note": NO_GPU_NOTE})
    return done(result)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", required=True)
    parser.add_argument("--candidate", required=True)
    parser.add_argument("--out", required=True, help="where the result JSON goes (never stdout)")
    parser.add_argument("--device", default=None)
    parser.add_argument("--protocol", default=None, help="protocol as JSON (default: the task's)")
    parser.add_argument("--cpu-timing", action="store_true", help="time on the CPU with host clocks")
    args = parser.parse_args(argv)
    device = args.device or ("cuda:0" if torch.cuda.is_available() else "cpu")
    if not device.startswith("cuda"):
        os.environ.setdefault("TRITON_INTERPRET", "1")
    try:
        task = load_task_file(args.task)
        if args.protocol:
            task = task.model_copy(update={"protocol": EvalProtocol.model_validate_json(args.protocol)})
        with open(args.candidate) as fh:
            source = fh.read()
        result = evaluate_cold(task, source, device=device, timed=True if args.cpu_timing else None)
    except Exception as exc:  # noqa: BLE001 - the driver reads the file, not our exit code
        result = EvalResult(status=Status.infra_error, error=ErrorInfo(error_class=type(exc).__name__,
                                                                       message=str(exc)[:600]))
    sys.stdout.flush()
    tmp = args.out + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(to_json(result))
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
