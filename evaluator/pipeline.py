"""The candidate pipeline: one candidate from its source to its result. Runs in the trusted evaluator process.

static checks -> the task's reference (kept by the `ReferenceKeeper`) -> correctness in a forked
worker -> the verdict here -> on a GPU, timing under the exclusive GPU (through the `JobRunner`).
With `one_process` a candidate's first timing runs in its correctness job's own process, after
its verdict. A timing that shows it was disturbed is measured again apart, and one that would
be the task's new best is confirmed by a second measurement before it is reported. Results of
identical submissions are remembered and answered without running them again.

Locks: the best-timings condition and the results guard are taken alone, never while a job runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import replace

import torch

from ..common.vocab import Job, Kind
from . import lint
from .reference import Reference
from .reference_keeper import ReferenceKeeper
from .results import ErrorInfo, EvalProtocol, EvalResult, Status
from .runner import JobRunner, beside_a_hog
from .sandbox.pool import Stall, WorkerResult
from .task import Task, source_hash
from .verdict import REFERENCE_LOST, correctness_verdict, forged_fields, timing_verdict

log = logging.getLogger("adaexplore.evaluator")

NO_GPU_NOTE = "no CUDA device: correctness ran through Triton's interpreter on the CPU; timing skipped"
CHECKED_WAIT_S = 30.0  # for the frames a job wrote before its gate to be read
RESULTS_KEPT = 4096  # results of identical submissions answered without running them again
# Timings closer than this to a task's best are a tie: run-to-run noise on a quiet GPU is a few
# tenths of a percent, so a kernel that is faster by less is not known to be faster at all.
TIE_MARGIN = 0.01
# Once its kernels are compiled, a candidate that goes this many times a reference forward (and
# at least the evaluator's `stall_floor_s`) without finishing a step of its run is stuck.
STALL_RATIO = 50.0
STALL_FLOOR_S = {"gpu": 10.0, "cpu": 120.0}  # the interpreter runs kernels hundreds of times slower


def compiled_kernels(res: WorkerResult) -> bytes | None:
    """The candidate's compiled kernels its correctness job handed on (a tar), if it sent any
    that the sink kept (one uint8 tensor within COMPILED_MAX_BYTES)."""
    msg = res.first(Kind.compiled)
    if msg is None or len(msg[1]) != 1 or not isinstance(msg[1][0], torch.Tensor):
        return None
    return msg[1][0].contiguous().numpy().tobytes()


def noted(note: str | None, more: str) -> str:
    """A result's timing note with one more sentence."""
    return f"{note}; {more}" if note else more


def with_hint(result: EvalResult, source: str, task_source: str, interpreted: bool) -> EvalResult:
    """`result` with the fix for a failure Triton reports without one (`lint.runtime_hint`), where its
    error has no hint yet."""
    if result.error is None or result.error.hint:
        return result
    hint = lint.runtime_hint(result, source, task_source, interpreted)
    if hint is None:
        return result
    return result.model_copy(update={"error": result.error.model_copy(update={"hint": hint})})


TOO_LARGE = "the task is too large for this machine: "


def reference_failed(ref: Reference) -> EvalResult:
    """The result of a candidate whose task's reference failed (a task too large says so: see `retried`)."""
    error = ref.error
    assert error is not None  # only called when the reference has an error
    why = TOO_LARGE if error.error_class == "TaskTooLarge" else "the task's reference failed: "
    return EvalResult(status=Status.infra_error, error=ErrorInfo(error_class="ReferenceError", message=why + error.message))


def retried(result: EvalResult) -> bool:
    """Whether an evaluation that ended so is tried once more: an infra error may pass, a task too
    large for this machine stays so (a second try would only run its reference again)."""
    return result.status is Status.infra_error and not (result.error is not None
                                                        and result.error.message.startswith(TOO_LARGE))


def checked_so_far(before: list[tuple[dict, list]] | None, ref: Reference, protocol: EvalProtocol,
                   issues: list) -> tuple[WorkerResult, EvalResult]:
    """What a job reported before `checked` (None: it never said so), as if it had ended
    there, and the correctness verdict on it."""
    ended = [*before, ({"kind": Kind.done}, [])] if before is not None else []
    so_far = WorkerResult(exit_code=0, signal=None, timed_out=False, elapsed_s=0.0, output_tail="", messages=ended)
    checked = correctness_verdict(so_far, ref, protocol, issues)
    if before is not None and len(so_far.all(Kind.trial)) != protocol.correctness_trials:
        checked = checked.model_copy(update={"status": Status.cheat_detected, "error": None, "cheat_reason": (
            "the result channel carried frames the harness did not write ('checked' before every trial)")})
    return so_far, checked


class CandidatePipeline:
    """Evaluates candidates through `runner`'s jobs against `references`. Thread-safe."""

    def __init__(self, runner: JobRunner, references: ReferenceKeeper, one_process: bool,
                 stall_floor_s: float) -> None:
        self.runner = runner
        self.references = references
        # Whether a candidate's first timing runs in its correctness job's own process, after
        # its verdict: no second process to start, no module, kernels or CUDA to set up again.
        self.one_process = one_process
        self.stall_floor_s = stall_floor_s
        self._best_ms: dict[str, float] = {}  # judge key -> the fastest confirmed median reported here
        self._confirming: dict[str, list[float]] = {}  # judge key -> first medians being confirmed now
        self._best_changed = threading.Condition()  # guards both; told when a confirmation ends
        # Results of identical submissions, most recently used last; the oldest go past RESULTS_KEPT.
        self._results: OrderedDict[tuple[str, str, str, str], EvalResult] = OrderedDict()
        self._results_guard = threading.Lock()

    def evaluate(self, task: Task, source: str, protocol: EvalProtocol) -> EvalResult:
        """Check and (on a GPU) time one candidate. Infra failures are retried once."""
        device = self.runner.device
        key = (task.task_id, source_hash(source), device, protocol.key())
        hit = self._remembered(key)
        if hit is not None:
            return hit
        t0 = time.monotonic()
        with self.runner.in_use.hold(self.runner.judge_key(task, protocol)):
            result = self._evaluate_once(task, source, protocol)
            if result.status is Status.infra_error and result.error and result.error.message == REFERENCE_LOST:
                self.references.forget(task, protocol)  # evicted from the judge: measured again below
            if retried(result):
                log.warning("infra error evaluating a candidate for %s, retrying: %s", task.name,
                            result.error.message if result.error else "")
                result = self._evaluate_once(task, source, protocol)
        result = with_hint(result, source, task.source, interpreted=not self.runner.is_gpu)
        result = result.model_copy(update={
            "task_id": task.task_id, "source_hash": key[1], "device": device,
            "protocol_key": key[3], "elapsed_s": round(time.monotonic() - t0, 3)})
        if result.status is not Status.infra_error:
            with self._results_guard:
                self._results[key] = result
                while len(self._results) > RESULTS_KEPT:
                    self._results.popitem(last=False)
        return result

    def cached(self, task: Task, source: str, protocol: EvalProtocol) -> EvalResult | None:
        """The stored result of an identical earlier submission, if any."""
        return self._remembered((task.task_id, source_hash(source), self.runner.device, protocol.key()))

    def _remembered(self, key: tuple[str, str, str, str]) -> EvalResult | None:
        with self._results_guard:
            hit = self._results.get(key)
            if hit is not None:
                self._results.move_to_end(key)
            return hit

    def _evaluate_once(self, task: Task, source: str, protocol: EvalProtocol) -> EvalResult:
        static = lint.check_candidate(source)
        settled = lint.verdict_of(static)
        if settled is not None:
            return settled
        ref = self.references.reference(task, protocol)
        if ref.error is not None:
            return reference_failed(ref)
        timed = self.runner.timed
        if timed and self.one_process:
            return self._check_then_time(task, source, protocol, ref, static.issues)
        job = self.runner.job(Job.candidate, task, protocol, candidate_source=source, hand_on_compiled=timed)
        res = self.runner.run(job, protocol.timeout_s, gpu="shared", stall=self._stall(ref, protocol))
        result = correctness_verdict(res, ref, protocol, static.issues)
        if result.status is Status.correct and timed:
            self.references.baselines_known(ref)
            if ref.error is not None:
                return reference_failed(ref)
            checked, compiled = result, compiled_kernels(res)
            result = self._time_candidate(task, source, protocol, ref, checked, compiled)
            if result.status is Status.correct and result.timing is not None:
                result = self._confirm_if_best(task, source, protocol, ref, checked, result, compiled)
        elif result.status is Status.correct:
            result = result.model_copy(update={"timing_note": NO_GPU_NOTE})
        return result

    def _check_then_time(self, task: Task, source: str, protocol: EvalProtocol, ref: Reference,
                         issues: list, again: bool = False) -> EvalResult:
        """Correctness and the first timing in one worker process: it runs its trials beside
        other work (once the eager baseline is known), reports `checked`, prepares its timing and
        waits at its gate. The gate opens only on a correct verdict on what it reported up to
        `checked`; any other verdict kills it there. A measurement that needs repeating
        (disturbed, or out of memory beside others) and a confirmation of a new best run as
        separate timing jobs. A run that failed beside a neighbour that ran the device short (or
        out of memory beside others) runs once more before it is judged."""
        # Baselines first: a job holding its slot at the gate must not wait for baseline jobs that
        # need a slot themselves.
        self.references.baselines_known(ref)
        if ref.error is not None:
            return reference_failed(ref)
        runner = self.runner
        job = runner.job(Job.candidate, task, protocol, candidate_source=source, hand_on_compiled=True, then_time=True)
        before: list[tuple[dict, list]] = []
        checked_in = threading.Event()
        verdict: list[tuple[WorkerResult, EvalResult]] = []  # what it reported up to `checked`, judged

        def on_message(head: dict, payload: list) -> None:
            if head.get("kind") == Kind.checked:
                checked_in.set()
            elif not checked_in.is_set():
                before.append((head, payload))

        def at_gate() -> bool:
            checked_in.wait(CHECKED_WAIT_S)  # the reader thread may still be on the frames before the gate
            verdict.append(checked_so_far(before if checked_in.is_set() else None, ref, protocol, issues))
            return verdict[0][1].status is Status.correct

        res, measured = runner.gated_run(job, protocol.timeout_s, reserve_as=replace(job, kind=Job.timing), on_message=on_message,
                                         at_gate=at_gate, stall=self._stall(ref, protocol))
        if not measured and not again and (beside_a_hog(res) or runner.crowded_out(res)):
            log.info("a candidate for %s failed while the device ran short beside others; running it again", task.name)
            return self._check_then_time(task, source, protocol, ref, issues, again=True)
        if not measured:  # judged as it ended, or stopped at its gate by its verdict
            return verdict[0][1] if verdict else correctness_verdict(res, ref, protocol, issues)
        so_far, checked = verdict[0]
        forged = forged_fields(res)  # whatever came after `checked` may be the candidate's too
        if forged is not None:
            return checked.model_copy(update=forged)
        compiled = compiled_kernels(so_far)
        msg = res.first(Kind.timing)
        why = "it ran out of device memory beside others" if runner.crowded_out(res) else (
            runner.remeasure_reason(msg[0], res) if msg is not None else None)
        if why is not None:  # measured again, apart
            result = self._time_candidate(task, source, protocol, ref, checked, compiled, why=why)
        else:
            result = timing_verdict(res, ref, protocol, checked)
        if result.status is Status.correct and result.timing is not None:
            result = self._confirm_if_best(task, source, protocol, ref, checked, result, compiled)
        return result

    def _confirm_if_best(self, task: Task, source: str, protocol: EvalProtocol, ref: Reference, checked: EvalResult,
                         timed: EvalResult, compiled: bytes | None = None) -> EvalResult:
        """A timing that would be the task's new best is measured again in a fresh process before
        it is reported; the slower of the two stands, so a new best is never the luck of one run.

        The best to beat is the fastest confirmed timing reported here for the task, or the
        eager reference's before there is one. A timing within `TIE_MARGIN` of it is a tie, not
        a new best: it is reported from its one measurement, and says so. While a timing at least
        as fast is being confirmed, this one waits for its outcome: many kernels submitted
        together would otherwise each find no best yet and all be measured twice.
        """
        key = self.runner.judge_key(task, protocol)
        assert timed.timing is not None  # only a timed result is confirmed
        first = timed.timing.median_ms
        with self._best_changed:
            while True:
                best = self._best_ms.get(key)
                if best is None and ref.timing is not None:
                    best = ref.timing.median_ms
                if best is not None and first >= best * (1.0 - TIE_MARGIN):
                    return timed if first >= best else timed.model_copy(update={"timing_note": noted(
                        timed.timing_note, f"within {TIE_MARGIN:.0%} of the best so far for this task "
                                           f"({best:.4f} ms, median): a tie, not a new best, so it was measured once")})
                if not any(ms <= first for ms in self._confirming.get(key, [])):
                    break
                self._best_changed.wait()
            self._confirming.setdefault(key, []).append(first)
        try:
            again = self._time_candidate(task, source, protocol, ref, checked, compiled)
            if again.status is not Status.correct or again.timing is None:
                return again  # the second run found what the first did not: that is the verdict
            second = again.timing.median_ms
            with self._best_changed:
                self._best_ms[key] = min(self._best_ms.get(key, float("inf")), max(first, second))
        finally:
            with self._best_changed:
                self._confirming[key].remove(first)
                if not self._confirming[key]:
                    del self._confirming[key]
                self._best_changed.notify_all()
        chosen = timed if first >= second else again
        return chosen.model_copy(update={"timing_note": noted(
            chosen.timing_note, f"a new best for this task: confirmed by a second, independent measurement in a "
                                f"fresh process (medians {first:.4f} and {second:.4f} ms; the slower is reported)")})

    def _time_candidate(self, task: Task, source: str, protocol: EvalProtocol, ref: Reference,
                        result: EvalResult, compiled: bytes | None = None, why: str | None = None) -> EvalResult:
        """Time a correct candidate in a fresh worker; `compiled`: the kernels its correctness job
        compiled, loaded instead of compiled again (the candidate's own, used by its own jobs only);
        `why`: the reason an earlier measurement of it is being repeated, if it is."""
        job = self.runner.job(Job.timing, task, protocol, candidate_source=source, compiled=compiled or None)
        res = self.runner.run_timed(job, protocol.timeout_s)
        reasons = [r for r in (why, res.remeasured) if r]
        timed = timing_verdict(res, ref, protocol, result)
        if reasons and timed.timing is not None:
            timed = timed.model_copy(update={"timing_note": noted(timed.timing_note, (
                "measured again, apart, because " + "; then again because ".join(reasons) + " (the repeat is reported)"))})
        return timed

    def _stall(self, ref: Reference, protocol: EvalProtocol) -> Stall:
        """A candidate's stall limit: `STALL_RATIO` times a forward of the task's reference (its
        measured runtime, else its correctness forwards' time), and at least `stall_floor_s`."""
        ref_s = ref.timing.runtime_ms / 1e3 if ref.timing is not None else ref.forward_s
        seconds = min(protocol.timeout_s, max(self.stall_floor_s, STALL_RATIO * ref_s))
        return Stall(seconds, f"a forward of the task's reference takes {ref_s * 1e3:.3g} ms, and the limit is "
                              f"{STALL_RATIO:.0f} times that, at least {self.stall_floor_s:.0f} s")
