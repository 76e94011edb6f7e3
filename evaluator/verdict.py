"""How the trusted parent reads a worker's report: failures, forged frames, degenerate tasks.

Pure functions over a `WorkerResult` (already decoded defensively); no process is started here.
"""

from __future__ import annotations

import math
import signal
from typing import TYPE_CHECKING

import torch

from .compare import compare_outputs, zeros_pass
from .pool import WorkerResult
from .types import ErrorInfo, Protocol, Status, TaskFlag

if TYPE_CHECKING:
    from .reference import Reference

def timing_method(head: dict) -> str:
    method = head.get("method")
    return method if method in ("cuda_events", "host_clock") else "cuda_events"


def worker_failure(res: WorkerResult, subject: str) -> ErrorInfo | None:
    if res.infra:
        return ErrorInfo(error_class="InfraError", message=res.infra)
    if res.timed_out:
        return ErrorInfo(error_class="Timeout", message=f"the {subject} exceeded its time limit")
    infra = res.first("infra")
    if infra:
        return ErrorInfo(error_class="InfraError", message=str(infra[0].get("message", ""))[:600])
    err = res.first("error")
    if err:
        return ErrorInfo.model_validate(err[0]["error"])
    if res.first("done") is None:
        return ErrorInfo(error_class="WorkerDied", message=f"the {subject} process ended without finishing "
                         f"(exit code {res.exit_code}, signal {res.signal}): {res.output_tail[-300:]}")
    return None


def expect(res: WorkerResult, kind: str, subject: str) -> tuple[tuple[dict, list] | None, ErrorInfo | None]:
    """The worker's `kind` message, or why there is none (a failure, or a silent worker)."""
    err = worker_failure(res, subject)
    msg = None if err else res.first(kind)
    if err is None and msg is None:
        err = ErrorInfo(error_class="RuntimeError", message=f"the {subject} produced no result")
    return msg, err


# What an "error" report may say; anything else was not written by the harness.
_ERROR_STATUSES = frozenset({Status.syntax_error, Status.import_error, Status.compile_error, Status.runtime_error,
                             Status.cuda_error, Status.oom, Status.timeout})
_ONCE = ("ops", "done", "timing", "error", "violation", "infra", "kernels", "triton", "floor", "peaks")


def forged_report(res: WorkerResult) -> str | None:
    """Why the worker's messages cannot be the harness's own, or None.

    The harness writes each kind at most once, trials in order, and nothing after `done`;
    extra or reordered frames mean something else wrote to the channel.
    """
    kinds = [h.get("kind") for h, _ in res.messages]
    for kind in _ONCE:
        if kinds.count(kind) > 1:
            return f"{kinds.count(kind)} '{kind}' messages"
    if "done" in kinds and kinds.index("done") != len(kinds) - 1:
        return "messages after 'done'"
    trials = [h.get("trial") for h, _ in res.messages if h.get("kind") == "trial"]
    if trials != list(range(len(trials))):
        return "trials out of order"
    err = res.first("error")
    if err:
        try:
            status = Status(err[0].get("status"))
            ErrorInfo.model_validate(err[0].get("error"))
        except (ValueError, TypeError):
            return "a malformed error report"
        if status not in _ERROR_STATUSES:
            return f"an error report claiming '{status.value}'"
    return None


def candidate_failure(res: WorkerResult) -> dict | None:
    """Status fields for a worker that did not run to the end, or None."""
    if res.infra:
        return {"status": Status.infra_error, "error": ErrorInfo(error_class="InfraError", message=res.infra)}
    # A forged frame stays forged however the process ended (it may hang or crash afterwards).
    if res.decode_error:
        return {"status": Status.cheat_detected,
                "cheat_reason": f"the result channel carried data the harness did not write ({res.decode_error})"}
    if res.timed_out:
        return {"status": Status.timeout, "error": ErrorInfo(
            error_class="Timeout", message="the candidate exceeded the wall-clock limit and was killed")}
    if res.truncated and res.signal is None:
        return {"status": Status.cheat_detected, "cheat_reason": "the result channel carried a partial "
                                                                 "message, which the harness never writes"}
    if res.overflow:
        return {"status": Status.runtime_error, "error": ErrorInfo(
            error_class="OutputTooLarge", message="the candidate's results exceeded the size limit")}
    infra = res.first("infra")
    if infra:
        return {"status": Status.infra_error, "error": ErrorInfo(error_class="InfraError",
                                                                 message=infra[0].get("message", ""))}
    forged = forged_report(res)
    if forged:
        return {"status": Status.cheat_detected,
                "cheat_reason": f"the result channel carried frames the harness did not write ({forged})"}
    violation = res.first("violation")
    if violation:
        return {"status": Status.cheat_detected, "cheat_reason": str(violation[0].get("reason"))[:300]}
    err = res.first("error")
    if err:
        return {"status": Status(err[0]["status"]), "error": ErrorInfo.model_validate(err[0]["error"])}
    if res.signal is not None:
        name = signal.Signals(res.signal).name if res.signal in signal.Signals._value2member_map_ else res.signal
        tail = res.output_tail
        status = Status.cuda_error if "CUDA" in tail else (
            Status.oom if res.signal == signal.SIGKILL else Status.runtime_error)
        return {"status": status, "error": ErrorInfo(
            error_class="WorkerCrashed", message=f"the candidate's process died with signal {name}")}
    return None


def degenerate_flags(ref: Reference, protocol: Protocol) -> list[TaskFlag]:
    flags: list[TaskFlag] = []
    outs = [o for trial in ref.outputs for o in trial]
    if not outs:
        return flags
    floats = [o for o in outs if o.is_floating_point()]
    if any(bool(torch.isnan(o).any()) for o in floats):
        flags.append(TaskFlag(code="nan_in_reference", message="the reference output contains NaN"))
    if all(not bool(o.any()) for o in outs):
        flags.append(TaskFlag(code="all_zeros", message="the reference output is all zeros: a kernel that "
                                                        "writes zeros passes"))
    elif len(ref.outputs) > 1 and all(
            o0.shape == o1.shape and bool(torch.equal(o0, o1)) for o0, o1 in zip(ref.outputs[0], ref.outputs[1])):
        flags.append(TaskFlag(code="constant_output", message="the output does not change with the inputs"))
    first = ref.outputs[0]
    for i, o in enumerate(first):
        for j, x in enumerate(ref.inputs):
            if o.shape == x.shape and o.dtype == x.dtype and compare_outputs([o], [x], protocol.tolerance).status \
                    is Status.correct:
                flags.append(TaskFlag(code="equals_input",
                                      message=f"output {i} equals input {j}: returning the input passes"))
                break
    if all(not flag.code == "all_zeros" for flag in flags) and all(
            zeros_pass(trial, protocol.tolerance) for trial in ref.outputs):
        flags.append(TaskFlag(code="zeros_pass", message="the outputs are so small that all zeros pass the "
                                                         f"tolerance (atol {protocol.tolerance.atol})"))
    if ref.repeat and len(ref.repeat) == len(first):
        verdict = compare_outputs(ref.repeat, first, protocol.tolerance)
        if verdict.status is not Status.correct:
            flags.append(TaskFlag(code="random_in_forward", message="two runs on the same inputs disagree: "
                                                                    "the forward uses random state"))
        elif not all(bool(torch.equal(a, b)) for a, b in zip(ref.repeat, first)):
            flags.append(TaskFlag(code="nondeterministic", message="two runs on the same inputs differ slightly"))
    return flags


# Work that escapes the timed stream keeps the device busy after the call returned, for far
# longer than the stream's own event time; an honest call leaves at most its own kernels.
ESCAPE_RATIO = 2.0
ESCAPE_SLACK_MS = 0.05


MAX_SAMPLES = 100_000


def timing_numbers(head: dict, key: str) -> list[float] | None:
    """`head[key]` from a candidate's timing report as a list of finite, non-negative floats
    (missing is empty); None if it is anything else, which the harness never sends."""
    value = head.get(key, [])
    if not isinstance(value, list) or len(value) > MAX_SAMPLES:
        return None
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            return None
        out.append(float(v))
    return out


def escaped_work(drain_ms: list[float] | None, event_median_ms: float) -> str | None:
    """Why the timing run's work escaped its stream, or None if it did not (or was not checked)."""
    if not drain_ms:
        return None
    drain = sorted(drain_ms)[len(drain_ms) // 2]
    if drain <= ESCAPE_RATIO * event_median_ms + ESCAPE_SLACK_MS:
        return None
    return (f"work escapes the timed stream: the device was still busy {drain:.3f} ms after the call returned, "
            f"but the stream's events measured {event_median_ms:.3f} ms")
