"""Verdicts, in the evaluator process (the judge imports it too): how a worker's report is read.

Failures, forged frames, degenerate tasks, and the verdicts on a candidate (`correctness_verdict`,
`timing_verdict`), used by the warm evaluator and the cold run alike. Pure functions over a
`WorkerResult` (already decoded defensively); no process is started here. The judge process uses
`degenerate_flags` on the reference outputs it holds.
"""

from __future__ import annotations

import math
import signal
from typing import TYPE_CHECKING

import torch

from ..common.vocab import Kind
from .compare import Verdict, compare_outputs, pieces, zeros_pass
from .results import (
    NO_TRITON_KERNEL,
    NO_TRITON_KERNEL_HINT,
    ErrorInfo,
    EvalProtocol,
    EvalResult,
    Mismatch,
    Status,
    TaskFlag,
    Tolerance,
    last_lines,
)
from .sandbox.frames import MAX_HEADER_BYTES, MAX_MESSAGES
from .sandbox.pool import WorkerResult
from .timing_stats import contended, mean_median_split, summarize, uneven, upper_median

if TYPE_CHECKING:
    from .reference import Reference

def timing_method(head: dict) -> str:
    method = head.get("method")
    return method if method in ("cuda_events", "host_clock") else "cuda_events"


def end_reason(res: WorkerResult) -> str:
    """Why a worker process ended early, in the words of what the trusted side knows."""
    if res.killed_for:
        return f"it was stopped because {res.killed_for}"
    if res.process_limit_hit:
        return "it reached its limit on processes"
    if res.memory_limit_hit:
        return "it used more host memory than its limit allows (memory it allocated, memfds, shared memory or /tmp)"
    if res.signal == signal.SIGKILL:
        return ("it was killed by the operating system, most likely for lack of host memory "
                "(its outputs, inputs or model did not fit)")
    if res.signal is not None:
        name = signal.Signals(res.signal).name if res.signal in signal.Signals._value2member_map_ else res.signal
        return f"it died with signal {name}"
    return f"it exited with code {res.exit_code} before reporting every result"


def worker_failure(res: WorkerResult, subject: str) -> ErrorInfo | None:
    if res.infra:
        return ErrorInfo(error_class="InfraError", message=res.infra)
    if res.decode_error:  # the task's own process wrote what the harness does not
        return ErrorInfo(error_class="ReportError", message=f"the {subject}'s result channel carried data the "
                         f"harness did not write ({res.decode_error})"[:600])
    if res.timed_out:
        return ErrorInfo(error_class="Timeout", message=f"the {subject} exceeded its time limit")
    infra = res.first(Kind.infra)
    if infra:
        return ErrorInfo(error_class="InfraError", message=str(infra[0].get("message", ""))[:600])
    err = res.first(Kind.error)
    if err:
        return ErrorInfo.model_validate(err[0]["error"])
    if res.first(Kind.done) is None:
        tail = last_lines(res.output_tail, 300)
        return ErrorInfo(error_class="WorkerDied", message=f"the {subject} process ended without finishing: "
                         + end_reason(res) + (f"; its last output: {tail}" if tail else ""))
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
_ONCE = (Kind.ops, Kind.done, Kind.timing, Kind.error, Kind.violation, Kind.infra, Kind.kernels, Kind.triton,
         Kind.floor, Kind.peaks, Kind.checked, Kind.unlaunched, Kind.launched)


def forged_report(res: WorkerResult) -> str | None:
    """Why the worker's messages cannot be the harness's own, or None.

    The harness writes each kind at most once, trials in order, and nothing after `done`;
    extra or reordered frames mean something else wrote to the channel.
    """
    kinds = [h.get("kind") for h, _ in res.messages]
    for kind in _ONCE:
        if kinds.count(kind) > 1:
            return f"{kinds.count(kind)} '{kind}' messages"
    if Kind.done in kinds and kinds.index(Kind.done) != len(kinds) - 1:
        return "messages after 'done'"
    trials = [h.get("trial") for h, _ in res.messages if h.get("kind") == Kind.trial]
    if trials != list(range(len(trials))):
        return "trials out of order"
    err = res.first(Kind.error)
    if err:
        try:
            status = Status(err[0].get("status"))
            ErrorInfo.model_validate(err[0].get("error"))
        except (ValueError, TypeError):
            return "a malformed error report"
        if status not in _ERROR_STATUSES:
            return f"an error report claiming '{status.value}'"
    return None


def forged_fields(res: WorkerResult) -> dict | None:
    """Status fields for a report the harness cannot have written (see `forged_report`), or None."""
    forged = forged_report(res)
    if forged:
        return {"status": Status.cheat_detected,
                "cheat_reason": f"the result channel carried frames the harness did not write ({forged})"}
    return None


# The reader's limits (`sandbox.frames`), named where a result does not say which it went past.
OVERFLOW = (f"the candidate's results exceeded a limit on what may travel to the evaluator: the size of its "
            f"outputs, {MAX_MESSAGES} messages, or {MAX_HEADER_BYTES >> 20} MiB of message headers")


def candidate_failure(res: WorkerResult) -> dict | None:
    """Status fields for a worker that did not run to the end, or None."""
    if res.infra:
        return {"status": Status.infra_error, "error": ErrorInfo(error_class="InfraError", message=res.infra)}
    # A forged frame stays forged however the process ended (it may hang or crash afterwards).
    if res.decode_error:
        return {"status": Status.cheat_detected,
                "cheat_reason": f"the result channel carried data the harness did not write ({res.decode_error})"}
    if res.device_over is not None:  # stopped from outside for what it held of a shared device
        return {"status": Status.oom, "error": ErrorInfo(
            error_class="DeviceMemoryShare", message=f"the candidate's process was stopped: {res.killed_for}",
            hint="keep what the forward allocates near what the task's reference needs; free caches and "
                 "scratch buffers you do not reuse")}
    if res.stalled:
        return {"status": Status.timeout, "error": ErrorInfo(
            error_class="StuckForward", message=f"the candidate's process was stopped: {res.killed_for}",
            hint="a kernel that never ends (a loop on a value no program changes) or work queued far "
                 "beyond the task's own looks like this")}
    if res.timed_out:
        return {"status": Status.timeout, "error": ErrorInfo(
            error_class="Timeout", message="the candidate exceeded the wall-clock limit and was killed")}
    if res.memory_limit_hit and not res.killed_for:  # the kernel killed in it: seen from outside
        return {"status": Status.oom, "error": ErrorInfo(
            error_class="HostMemoryLimit", message=f"the candidate's process ended early: {end_reason(res)}")}
    if res.truncated and res.signal is None:
        return {"status": Status.cheat_detected, "cheat_reason": "the result channel carried a partial "
                                                                 "message, which the harness never writes"}
    if res.overflow:
        return {"status": Status.runtime_error, "error": ErrorInfo(
            error_class="OutputTooLarge", message=(
                f"the candidate's results went past a limit on what may travel to the evaluator: "
                f"{res.overflow_reason}" if res.overflow_reason else OVERFLOW))}
    infra = res.first(Kind.infra)
    if infra:
        # Anything said from inside a process that ran candidate code may be the candidate's
        # own words: only the trusted side decides that a failure is ours.
        return {"status": Status.runtime_error, "error": ErrorInfo(
            error_class="ReportedInfraError",
            message="the candidate's process reported an infrastructure failure, which the server does not "
                    "take from a process that ran candidate code: " + str(infra[0].get("message", ""))[:400])}
    forged = forged_fields(res)
    if forged:
        return forged
    violation = res.first(Kind.violation)
    if violation:
        return {"status": Status.cheat_detected, "cheat_reason": str(violation[0].get("reason"))[:300]}
    err = res.first(Kind.error)
    if err:
        return {"status": Status(err[0]["status"]), "error": ErrorInfo.model_validate(err[0]["error"])}
    if res.signal is not None:
        tail = res.output_tail
        if res.killed_for or res.process_limit_hit:
            status = Status.runtime_error
        else:
            status = Status.cuda_error if "CUDA" in tail else (
                Status.oom if res.signal == signal.SIGKILL else Status.runtime_error)
        return {"status": status, "error": ErrorInfo(
            error_class="WorkerCrashed", message=f"the candidate's process ended early: {end_reason(res)}")}
    return None


def degenerate_flags(ref: Reference, tolerance: Tolerance, device: torch.device | None = None) -> list[TaskFlag]:
    """The task flags its reference's outputs show (degenerate outputs, outputs equal to an input,
    a random or nondeterministic forward). Every check goes a piece at a time, on `device` if
    given, so outputs kept in host memory are checked on the GPU without a whole copy there."""
    flags: list[TaskFlag] = []
    outs = [o for trial in ref.outputs for o in trial]
    if not outs:
        return flags
    floats = [o for o in outs if o.is_floating_point()]
    if any(bool(torch.isnan(p).any()) for o in floats for _, p in pieces(o, device)):
        flags.append(TaskFlag(code="nan_in_reference", message="the reference output contains NaN"))
    if all(not bool(p.any()) for o in outs for _, p in pieces(o, device)):
        flags.append(TaskFlag(code="all_zeros", message="the reference output is all zeros: a kernel that "
                                                        "writes zeros passes"))
    elif len(ref.outputs) > 1 and (_all_equal(ref.outputs[0], ref.outputs[1], device) or compare_outputs(
            ref.outputs[1], ref.outputs[0], tolerance, device=device).status is Status.correct):
        flags.append(TaskFlag(code="constant_output", message="the output does not change with the inputs "
                                                              "(beyond the tolerance)"))
    first = ref.outputs[0]
    for i, o in enumerate(first):
        for j, x in enumerate(ref.inputs):
            if o.shape == x.shape and o.dtype == x.dtype and \
                    compare_outputs([o], [x], tolerance, device=device).status is Status.correct:
                flags.append(TaskFlag(code="equals_input",
                                      message=f"output {i} equals input {j}: returning the input passes"))
                break
    if all(not flag.code == "all_zeros" for flag in flags) and all(
            zeros_pass(trial, tolerance, device) for trial in ref.outputs):
        flags.append(TaskFlag(code="zeros_pass", message="the outputs are so small that all zeros pass the "
                                                         f"tolerance (atol {tolerance.atol})"))
    if ref.repeat and len(ref.repeat) == len(first):
        verdict = compare_outputs(ref.repeat, first, tolerance, device=device)
        if verdict.status is not Status.correct:
            flags.append(TaskFlag(code="random_in_forward", message="two runs on the same inputs disagree: "
                                                                    "the forward uses random state"))
        elif not _all_equal(ref.repeat, first, device):
            flags.append(TaskFlag(code="nondeterministic", message="two runs on the same inputs differ slightly"))
    return flags


def _all_equal(a: list[torch.Tensor], b: list[torch.Tensor], device: torch.device | None) -> bool:
    """Whether two lists of tensors are equal bit for bit (of equal shapes), a piece at a time."""
    return len(a) == len(b) and all(
        x.shape == y.shape and x.dtype == y.dtype and all(
            bool(torch.equal(p, q)) for (_, p), (_, q) in zip(pieces(x, device), pieces(y, device)))
        for x, y in zip(a, b))


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
    drain = upper_median(drain_ms)
    if drain <= ESCAPE_RATIO * event_median_ms + ESCAPE_SLACK_MS:
        return None
    return (f"work escapes the timed stream: the device was still busy {drain:.3f} ms after the call returned, "
            f"but the stream's events measured {event_median_ms:.3f} ms")


def disturbed(head: dict, quiet_flush_ms: float | None = None) -> str | None:
    """Why a timing run must be measured again, or None: it shows another context's work on the
    GPU (its L2 flushes were slow, against each other or against `quiet_flush_ms`, a flush on
    this GPU with nothing else running; its runs were too unlike each other; the device stayed
    busy after the timed calls returned), or a few disturbed runs pulled its mean away from its
    median. An honest kernel can look as if its work escaped the stream only because of such
    work, so any of these is measured again on a quiet GPU before anything is reported (a
    kernel whose work really escapes does so there too)."""
    event_ms = timing_numbers(head, "event_ms") or []
    if not event_ms:
        return None
    median = upper_median(event_ms)
    drain_ms = timing_numbers(head, "drain_ms")
    on_gpu = bool(drain_ms)  # host-clock runs (no GPU) carry no drain times, and vary for other reasons
    if contended(timing_numbers(head, "flush_ms") or [], quiet_flush_ms):
        return "another context shared the GPU (its L2 flushes were slow)"
    if on_gpu and uneven(event_ms):
        return "its runs were too unlike each other to have had the GPU alone"
    if escaped_work(drain_ms, median) is not None:
        return "the device stayed busy after its calls returned"
    split = mean_median_split(event_ms)
    if on_gpu and split is not None:
        return f"a few runs pulled its mean {split:+.1%} away from its median"
    return None


# --- the verdicts on a candidate ---------------------------------------------------------------

# The verdict of a candidate whose outputs matched in every trial while PyTorch still did all the
# reference's work: profiled on request all the same, since its profile shows the agent why.
REUSES_REFERENCE = "every PyTorch operation of the reference"


def reuses_reference(result: EvalResult) -> bool:
    """Whether `result` is cheat_detected only because the reference's own ops did the work."""
    return result.status is Status.cheat_detected and (result.cheat_reason or "").startswith(REUSES_REFERENCE)


REFERENCE_LOST = "the judge no longer holds this task's reference outputs"


def judged(payload: list, expected: list | None, tol, trial: int) -> Verdict | ErrorInfo:
    """The verdict on one frame's outputs: the judge's answer where they were streamed to it
    (a one-item list holding that answer), else a comparison here against `expected` tensors.
    An ErrorInfo means the verdict could not be had, which is ours (InfraError)."""
    if payload and isinstance(payload[0], dict):
        answer = payload[0]
        if isinstance(answer.get("verdict"), dict):
            v = answer["verdict"]
            mismatch = Mismatch.model_validate(v["mismatch"]) if v.get("mismatch") else None
            return Verdict(Status(v["status"]), str(v.get("message", "")), mismatch)
        if answer.get("missing"):
            return ErrorInfo(error_class="InfraError", message=REFERENCE_LOST)
        return ErrorInfo(error_class="InfraError", message="the judge could not compare: "
                         + str(answer.get("error", "no answer"))[:300])
    if expected is None:
        return ErrorInfo(error_class="InfraError", message="reference outputs are missing")
    return compare_outputs(payload, expected, tol, trial=trial)


def correctness_verdict(res: WorkerResult, ref: Reference, protocol: EvalProtocol, issues) -> EvalResult:
    """The candidate's correctness run, checked: how it ended, its trials, its launches, its ops."""
    base = {"lint": issues, "trials": protocol.correctness_trials,
            "stdout_tail": last_lines(res.output_tail, 800) or None}
    failure = candidate_failure(res)
    if failure is not None:
        return EvalResult(**base, **failure)
    trials = res.all(Kind.trial)
    ops = res.first(Kind.ops)
    unlaunched = res.first(Kind.unlaunched)
    if len(trials) != protocol.correctness_trials or ops is None or res.first(Kind.done) is None or (
            unlaunched is None and protocol.correctness_trials > 1):
        return EvalResult(**base, status=Status.runtime_error, error=ErrorInfo(
            error_class="IncompleteRun",
            message="the process ended before reporting every trial (exit code "
                    f"{res.exit_code}); results are never read from the candidate's output"))
    launches = int(ops[0].get("launches", 0))
    flags_reset = list(ops[0].get("flags_reset", []))
    base.update(triton_launches=launches, flags_reset=flags_reset)
    passed = 0
    for t, (head, outputs) in enumerate(trials):
        expected = ref.outputs[t] if t < len(ref.outputs) else None
        verdict = judged(outputs, expected, protocol.tolerance, trial=int(head.get("trial", 0)))
        if isinstance(verdict, ErrorInfo):
            return EvalResult(**base, status=Status.infra_error, trials_passed=passed, error=verdict)
        if verdict.status is not Status.correct:
            return EvalResult(**base, status=verdict.status, trials_passed=passed, mismatch=verdict.mismatch,
                              error=ErrorInfo(error_class=verdict.status.value, message=verdict.message))
        passed += 1
    if launches == 0:
        return EvalResult(**base, status=Status.no_triton_kernel, trials_passed=passed, error=ErrorInfo(
            error_class="NoTritonKernel", message=NO_TRITON_KERNEL, hint=NO_TRITON_KERNEL_HINT))
    ref_ops = set(ref.ops)
    cand_ops = set(ops[0].get("ops", []))
    if ref_ops and ref_ops <= cand_ops:
        return EvalResult(**base, status=Status.cheat_detected, trials_passed=passed,
                          cheat_reason=REUSES_REFERENCE + " ("
                                       + ", ".join(sorted(ref_ops)[:6])
                                       + ") still runs in PyTorch; the Triton kernels do none of its work")
    idle = kernels_idle(unlaunched, ref, protocol.tolerance)
    if isinstance(idle, ErrorInfo):
        return EvalResult(**base, status=Status.infra_error, trials_passed=passed, error=idle)
    if idle:
        return EvalResult(**base, status=Status.cheat_detected, trials_passed=passed, cheat_reason=KERNELS_IDLE)
    return EvalResult(**base, status=Status.correct, trials_passed=passed)


KERNELS_IDLE = ("with every Triton launch skipped, the forward still returned the right output for trial 0's "
                "inputs: the Triton kernels do none of its work (something else computes it: another thread, "
                "numpy, a library)")
# Tasks whose right output does not need the inputs (or is all but zero): there a forward without
# its kernels may be right by chance, which says nothing about the kernels.
_OUTPUT_NEEDS_NO_WORK = frozenset({"all_zeros", "zeros_pass", "constant_output", "equals_input"})


def kernels_idle(unlaunched: tuple[dict, list] | None, ref: Reference, tol) -> bool | ErrorInfo:
    """Whether the forward run with its Triton launches dropped (`Kind.unlaunched`) still
    matched trial 0: then the kernels did none of the work. An ErrorInfo: it could not be judged."""
    if unlaunched is None or unlaunched[0].get("raised") or not unlaunched[1]:
        return False
    shown = {str(f.get("code")) for f in (ref.output_flags or []) if isinstance(f, dict)}
    if ref.output_flags is None or shown & _OUTPUT_NEEDS_NO_WORK:
        return False
    verdict = judged(unlaunched[1], ref.outputs[0] if ref.outputs else None, tol, trial=0)
    if isinstance(verdict, ErrorInfo):
        return verdict
    return verdict.status is Status.correct


def timing_verdict(res: WorkerResult, ref: Reference, protocol: EvalProtocol, result: EvalResult) -> EvalResult:
    """The candidate's timing run, checked: its check-run output, its stream, its stats."""
    failure = candidate_failure(res)
    if failure is not None:
        return result.model_copy(update=failure)
    msg = res.first(Kind.timing)
    if msg is None:
        return result.model_copy(update={"status": Status.runtime_error, "error": ErrorInfo(
            error_class="IncompleteRun", message="the timing run ended without reporting")})
    head, outputs = msg
    replaced = head.get("replaced")
    if replaced:
        names = ", ".join(map(str, replaced)) if isinstance(replaced, list) else "(unreadable list)"
        return result.model_copy(update={"status": Status.cheat_detected,
                                         "cheat_reason": f"candidate replaced harness functions: {names}"})
    verdict = judged(outputs, ref.check_outputs or None, protocol.tolerance, trial=-1)
    if isinstance(verdict, ErrorInfo):
        return result.model_copy(update={"status": Status.infra_error, "error": verdict})
    if verdict.status is not Status.correct:
        return result.model_copy(update={
            "status": verdict.status, "mismatch": verdict.mismatch,
            "error": ErrorInfo(error_class=verdict.status.value,
                               message="output produced while timing (fresh inputs) differs from the reference: "
                                       + verdict.message)})
    event_ms, drain_ms = timing_numbers(head, "event_ms"), timing_numbers(head, "drain_ms")
    if not event_ms or drain_ms is None:
        return result.model_copy(update={"status": Status.cheat_detected,
                                         "cheat_reason": "the timing report was tampered with (malformed times)"})
    stats = summarize(event_ms, protocol.trim_fraction, method=timing_method(head))
    escape = escaped_work(drain_ms, stats.median_ms)
    if escape:
        return result.model_copy(update={"status": Status.cheat_detected, "timing": stats, "cheat_reason": escape})
    flags = sorted(set(result.flags_reset) | set(head.get("flags_reset", [])))
    tuned = head.get("autotuned")
    tuned = [c[:200] for c in tuned if isinstance(c, str)][:8] if isinstance(tuned, list) else []
    speedup = ref.timing.runtime_ms / stats.runtime_ms if ref.timing and stats.runtime_ms > 0 else None
    best = ref.best_ms()
    speedup_vs_best = best / stats.runtime_ms if best and stats.runtime_ms > 0 else None
    return result.model_copy(update={"timing": stats, "reference_timing": ref.timing,
                                     "compile_timing": ref.compile_timing, "compile_note": ref.compile_note,
                                     "speedup": speedup, "speedup_vs_best": speedup_vs_best,
                                     "flags_reset": flags, "autotune_configs": tuned})
