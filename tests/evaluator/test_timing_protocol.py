"""Timing protocol, baselines, autotuning, cache races and the cold-process mode."""

import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import EXAMPLES, HAS_CUDA, ROOT, example_task, gpu, job_spec

from adaexplore.evaluator.baselines import BaselineKey, Baselines, BaselineStore
from adaexplore.evaluator.evaluator import Evaluator
from adaexplore.evaluator.reference import Reference
from adaexplore.evaluator.results import EvalProtocol, EvalResult, Status, TimingStats
from adaexplore.evaluator.sandbox import procs
from adaexplore.evaluator.sandbox.pool import WorkerResult
from adaexplore.evaluator.timing_stats import contended, summarize, uneven
from adaexplore.evaluator.verdict import escaped_work, timing_verdict
from adaexplore.evaluator.worker import harness, jobs
from adaexplore.evaluator.worker.timing import runs_within, time_on_host

# --- statistics ------------------------------------------------------------------------------


def test_trimmed_stats_drop_outliers_on_both_ends():
    samples = [2.0] * 18 + [50.0, 0.001]
    stats = summarize(samples, 0.05, method="host_clock")
    assert stats.runs == 18 and stats.mean_ms == 2.0 and stats.std_ms == 0.0
    assert stats.min_ms == 0.001 and stats.method == "host_clock"
    assert summarize([3.0], 0.4).runs == 1


def timing_report(head: dict, outputs=()) -> WorkerResult:
    """A finished timing job's result carrying one timing message."""
    return WorkerResult(exit_code=0, signal=None, timed_out=False, elapsed_s=1.0, output_tail="",
                        messages=[({"kind": "timing", **head}, list(outputs))])


def test_escape_check_reads_only_the_time_after_the_call_returned():
    # A 0.13 ms kernel whose Python call costs 0.2 ms: the device is done soon after it returns.
    assert escaped_work([0.12, 0.13, 0.14] * 3, 0.128) is None
    # Work left on a side stream keeps the device busy long after the call returned.
    reason = escaped_work([2.0, 2.1, 1.9] * 3, 0.01)
    assert reason and "after the call returned" in reason and "2.000" in reason
    assert escaped_work([], 0.01) is None and escaped_work(None, 0.01) is None  # not measured (CPU)


def test_a_shared_gpu_shows_in_the_flush_times():
    quiet = [0.070 + 0.001 * (i % 3) for i in range(100)]
    assert not contended(quiet)
    sliced = [0.070] * 30 + [2.07] * 70  # another context's time slices land in most flushes
    assert contended(sliced)
    assert not contended([0.07, 5.0])  # too few runs to say


def test_a_gpu_busy_all_through_the_runs_shows_against_a_quiet_flush():
    busy = [2.07 + 0.01 * (i % 3) for i in range(100)]  # every flush waited for another context
    assert not contended(busy)  # alike among themselves
    assert contended(busy, quiet_flush_ms=0.07)
    assert not contended([0.072] * 100, quiet_flush_ms=0.07)


def test_runs_of_one_kernel_that_differ_twofold_did_not_have_the_gpu_to_themselves():
    assert not uneven([2.70 + 0.002 * (i % 7) for i in range(40)])
    assert not uneven([0.50] * 20 + [0.55] * 20)  # a power-capped clock moves them a little
    assert uneven([2.7] * 5 + [5.3] * 30)  # time slices of another context in most runs
    assert not uneven([0.004] * 5 + [0.02] * 30)  # a few microseconds: launch jitter, not contention
    assert not uneven([2.7, 5.4])  # too few runs to say


def test_a_contended_timing_is_measured_again_without_pausing(tmp_path, monkeypatch):
    def result(flush):
        return timing_report({"event_ms": [0.1] * 20, "flush_ms": flush})

    calls = []
    answers = [result([0.07] * 5 + [3.0] * 15), result([0.07] * 20)]
    ev = Evaluator(work_dir=tmp_path, cpu_timing=True)
    try:
        monkeypatch.setattr(ev.runner, "_run_timed_once",
                            lambda job, t, pause: calls.append(pause) or answers[len(calls) - 1])
        res = ev.runner.run_timed(job_spec("timing"), 10)
        assert calls == [True, False] and res is answers[1]
        calls.clear()
        answers.insert(0, result([0.07] * 20))
        ev.runner.run_timed(job_spec("timing"), 10)
        assert calls == [True]  # quiet the first time: measured once
    finally:
        ev.close()


def test_a_candidate_timed_while_another_context_was_busy_throughout_is_measured_again(tmp_path, monkeypatch):
    """Every flush and every run of the candidate slowed alike: only the quiet flush of a
    baseline timed earlier on this GPU shows it."""
    def result(flush, event=(0.1,) * 20):
        return timing_report({"event_ms": list(event), "flush_ms": flush, "drain_ms": [0.1] * 10})

    calls = []
    answers = [result([0.07] * 20), result([0.5] * 20), result([0.07] * 20),
               result([0.07] * 20, event=[0.1] * 5 + [0.2] * 15), result([0.07] * 20)]
    ev = Evaluator(work_dir=tmp_path, cpu_timing=True)
    try:
        monkeypatch.setattr(ev.runner, "_run_timed_once",
                            lambda job, t, pause: calls.append(pause) or answers[len(calls) - 1])
        ev.runner.run_timed(job_spec("timing"), 10)  # a baseline on a quiet GPU: its flush is the floor
        assert calls == [True] and ev.runner._quiet_flush_ms == pytest.approx(0.07)
        res = ev.runner.run_timed(job_spec("timing", candidate_source="x"), 10)
        assert calls == [True, True, False] and res is answers[2]
        res = ev.runner.run_timed(job_spec("timing", candidate_source="x"), 10)  # runs twice as long as the fastest
        assert calls == [True, True, False, True, False] and res is answers[4]
        assert ev.runner._quiet_flush_ms == pytest.approx(0.07)  # candidates' flushes never set the floor
    finally:
        ev.close()


def test_work_that_seems_to_escape_under_load_is_measured_again_on_a_quiet_gpu(tmp_path, monkeypatch):
    """Another context's work keeps the device busy after an honest kernel's calls return; that
    must not be reported as the kernel's work escaping its stream."""
    def result(drain):
        return timing_report({"event_ms": [0.2] * 20, "flush_ms": [0.07] * 20, "drain_ms": drain})

    calls = []
    answers = [result([1.0] * 10), result([0.2] * 10)]  # busy after return under load, then quiet
    ev = Evaluator(work_dir=tmp_path, cpu_timing=True)
    try:
        monkeypatch.setattr(ev.runner, "_run_timed_once",
                            lambda job, t, pause: calls.append(pause) or answers[len(calls) - 1])
        res = ev.runner.run_timed(job_spec("timing"), 10)
        assert calls == [True, False] and res is answers[1]
        head = res.first("timing")[0]
        assert escaped_work(head["drain_ms"], 0.2) is None
    finally:
        ev.close()


def test_a_malformed_timing_report_is_a_cheat_not_a_crash():
    """A candidate that tampers with the harness in its own process can change what the timing
    report carries; the trusted side never trips over it."""
    import torch

    out = torch.ones(4)
    ref = Reference(check_outputs=[out.clone()])

    def verdict(head):
        return timing_verdict(timing_report(head, [out.clone()]), ref, EvalProtocol(),
                              EvalResult(status=Status.correct))

    good = verdict({"event_ms": [0.1] * 20, "drain_ms": [0.1] * 10})
    assert good.status is Status.correct and good.timing.runs == 18
    for bad in ({"event_ms": "fast"}, {"event_ms": [0.1, "x"]}, {"event_ms": [float("nan")]}, {"event_ms": []},
                {"event_ms": [-1.0]}, {"event_ms": [True]}, {"event_ms": [0.1], "drain_ms": {"a": 1}}):
        result = verdict(bad)
        assert result.status is Status.cheat_detected and "malformed" in result.cheat_reason, bad
    odd = verdict({"event_ms": [0.1] * 20, "replaced": {"not": "a list"}})
    assert odd.status is Status.cheat_detected and "replaced harness functions" in odd.cheat_reason


def test_host_timer_calls_prepare_outside_each_run():
    import torch

    order = []
    measured = time_on_host(lambda i: order.append(("run", i)), lambda i: order.append(("prep", i)),
                            warmup=2, runs=3, flush_l2=True, device=torch.device("cpu"))
    assert len(measured.event_ms) == 3 and measured.drain_ms == [] and measured.flush_ms == []
    assert order == [("prep", 0), ("run", 0), ("prep", 1), ("run", 1),
                     ("prep", 0), ("run", 0), ("prep", 1), ("run", 1), ("prep", 2), ("run", 2)]


def test_timed_runs_stop_at_the_time_budget_but_never_below_the_least_or_above_the_most():
    assert runs_within(100.0, 2.7, least=20, most=100) == 38  # a 2.7 ms kernel: 38 runs fill 100 ms
    assert runs_within(100.0, 0.05, least=20, most=100) == 100  # a short kernel gets every run
    assert runs_within(100.0, 11.0, least=20, most=100) == 20  # a long one still gets the least
    assert runs_within(100.0, 11.0, least=20, most=3) == 3  # and never more than asked for
    assert runs_within(0.0, 2.7, least=20, most=100) == 100  # no budget: every run


def test_the_host_timer_sizes_its_runs_by_what_the_warmup_took():
    import torch

    measured = time_on_host(lambda i: time.sleep(0.01), lambda i: None, warmup=2, runs=100,
                            flush_l2=False, device=torch.device("cpu"), budget_ms=60.0, least=2)
    assert 2 <= len(measured.event_ms) <= 6  # about 60 ms of 10 ms runs, not 100 of them


def test_many_timed_candidates_through_few_slots_all_finish(tmp_path):
    """Timing jobs wait for the GPU while holding worker slots; correctness runs must never
    hold the GPU while they wait for a slot, or the two wait on each other forever."""
    ev = Evaluator(work_dir=tmp_path, cpu_timing=True, max_parallel=2, baselines=("eager",))
    names = ["softmax", "gelu_scale", "fused_add_mul"]
    jobs = [(name, copy) for name in names for copy in range(2)]
    try:
        with ThreadPoolExecutor(len(jobs)) as pool:
            futures = [pool.submit(ev.evaluate, example_task(name, warmup_runs=1, timed_runs=3),
                                   (EXAMPLES / "kernels" / f"{name}.py").read_text() + f"\n# copy {copy}\n")
                       for name, copy in jobs]
            results = [f.result(timeout=600) for f in futures]
    finally:
        ev.close()
    assert [r.status for r in results] == [Status.correct] * len(jobs), [r.feedback(300) for r in results]
    method = "cuda_events" if HAS_CUDA else "host_clock"
    assert all(r.timing is not None and r.timing.method == method for r in results)


def test_a_new_best_is_confirmed_by_a_second_measurement_and_a_slower_kernel_is_measured_once(tmp_path):
    task = example_task("softmax", warmup_runs=1, timed_runs=3)
    source = (EXAMPLES / "kernels" / "softmax.py").read_text()
    with Evaluator(work_dir=tmp_path, cpu_timing=True, baselines=("eager",), trace=True) as ev:
        # The best to beat before any kernel is the reference, which the interpreter never beats
        # on the CPU: here the task's best so far is slower than anything.
        ev.pipeline._best_ms[ev.judge_key(task, task.protocol)] = float("inf")
        first = ev.evaluate(task, source)
        assert first.status is Status.correct, first.feedback(300)
        assert "confirmed by a second, independent measurement" in first.timing_note
        assert "confirmed by a second" in first.feedback()
        timed = [t for t in ev.trace if t["candidate"] and "measure_s" in t]  # jobs that measured it
        assert len(timed) == 2  # the first correct kernel of a task is a new best: measured twice
        # A kernel no faster than the best reported so far is reported from one measurement.
        ev.pipeline._best_ms[ev.judge_key(task, task.protocol)] = 0.0
        second = ev.evaluate(task, source + "\n# another copy\n")
        assert second.status is Status.correct and second.timing_note is None
        assert len([t for t in ev.trace if t["candidate"] and "measure_s" in t]) == 3


def timed_at(median_ms: float) -> EvalResult:
    return EvalResult(status=Status.correct, timing=TimingStats(mean_ms=median_ms, median_ms=median_ms, std_ms=0.0,
                                                                 min_ms=median_ms, runs=3))


def test_kernels_timed_together_wait_for_a_faster_ones_confirmation_instead_of_each_measuring_again(tmp_path):
    task = example_task("softmax")
    started, release, measured = threading.Event(), threading.Event(), []

    def second_measurement(task, source, protocol, ref, checked, compiled=None):
        measured.append(source)
        started.set()
        release.wait(30)
        return timed_at({"a": 1.0, "c": 0.5}[source])

    with Evaluator(device="cpu", work_dir=tmp_path, baselines=("eager",)) as ev:
        ev.pipeline._time_candidate = second_measurement

        def confirm(source: str, first_ms: float) -> EvalResult:
            return ev.pipeline._confirm_if_best(task, source, task.protocol, Reference(), timed_at(first_ms),
                                               timed_at(first_ms))

        with ThreadPoolExecutor(3) as ex:
            a = ex.submit(confirm, "a", 1.0)
            assert started.wait(30)
            b = ex.submit(confirm, "b", 1.0005)  # no faster than a, whose confirmation is under way: waits
            c = ex.submit(confirm, "c", 0.5)  # faster than anything measured: confirmed at once, alongside
            time.sleep(0.5)
            assert not b.done() and sorted(measured) == ["a", "c"]
            release.set()
            results = {name: f.result(30) for name, f in (("a", a), ("b", b), ("c", c))}
    assert sorted(measured) == ["a", "c"]  # b was measured once: it is no new best
    assert results["b"].timing_note is None
    assert "a new best" in (results["a"].timing_note or "") and "a new best" in (results["c"].timing_note or "")


def confirming_evaluator(tmp_path, measured: list[str], second_ms: float) -> Evaluator:
    """An evaluator whose confirmations are not run but noted in `measured`, at `second_ms`."""
    ev = Evaluator(device="cpu", work_dir=tmp_path, baselines=("eager",))
    ev.pipeline._time_candidate = lambda task, source, *_a, **_k: measured.append(source) or timed_at(second_ms)
    return ev


def test_a_kernel_within_a_percent_of_the_best_is_a_tie_measured_once_and_says_so(tmp_path):
    task = example_task("softmax")
    measured: list[str] = []
    with confirming_evaluator(tmp_path, measured, 0.5) as ev:
        ev.pipeline._best_ms[ev.judge_key(task, task.protocol)] = 1.0
        tie = ev.pipeline._confirm_if_best(task, "a", task.protocol, Reference(), timed_at(0.995), timed_at(0.995))
        slower = ev.pipeline._confirm_if_best(task, "b", task.protocol, Reference(), timed_at(1.2), timed_at(1.2))
        faster = ev.pipeline._confirm_if_best(task, "c", task.protocol, Reference(), timed_at(0.9), timed_at(0.9))
    assert measured == ["c"]
    assert "a tie, not a new best" in (tie.timing_note or "") and tie.timing.median_ms == 0.995
    assert slower.timing_note is None
    assert "a new best" in (faster.timing_note or "")


def test_before_any_kernel_the_best_to_beat_is_the_eager_reference(tmp_path):
    task = example_task("softmax")
    measured: list[str] = []
    reference = Reference(timing=timed_at(2.0).timing)
    with confirming_evaluator(tmp_path, measured, 1.0) as ev:
        for source, ms in (("no faster than the reference", 2.5), ("ties it", 1.99), ("beats it", 1.0)):
            ev.pipeline._confirm_if_best(task, source, task.protocol, reference, timed_at(ms), timed_at(ms))
    assert measured == ["beats it"]


def test_the_trace_shows_where_each_jobs_time_went_as_its_worker_reports_it(tmp_path):
    task = example_task("softmax", warmup_runs=1, timed_runs=3)
    source = (EXAMPLES / "kernels" / "softmax.py").read_text()
    with Evaluator(work_dir=tmp_path, cpu_timing=True, baselines=("eager",), trace=True, one_process=False) as ev:
        result = ev.evaluate(task, source)
        trace = list(ev.trace or [])
    assert result.status is Status.correct, result.feedback(300)
    reference = next(t for t in trace if t["kind"] == "reference")
    candidate = next(t for t in trace if t["kind"] == "candidate")
    timed = [t for t in trace if t["kind"] == "timing" and t["candidate"]]
    assert {"start_s", "cuda_s", "load_s", "inputs_s", "forward_s", "send_s"} <= reference.keys()
    assert {"start_s", "load_s", "inputs_s", "first_s", "forward_s", "send_s"} <= candidate.keys()
    assert timed and all({"start_s", "load_s", "first_s", "timed_s"} <= t.keys() for t in timed)
    # The worker's timed runs happen while the evaluator holds the GPU for it, and its phases
    # fit within the run the evaluator saw.
    assert all(t["timed_s"] <= t["measure_s"] + 0.01 for t in timed)
    parts = sum(candidate[k] for k in ("start_s", "cuda_s", "load_s", "inputs_s", "first_s", "forward_s"))
    assert parts <= candidate["run_s"] + 0.01


def test_the_trace_of_a_candidate_checked_and_timed_in_one_process_splits_its_setup_from_its_measurement(tmp_path):
    task = example_task("softmax", warmup_runs=1, timed_runs=3)
    source = (EXAMPLES / "kernels" / "softmax.py").read_text()
    with Evaluator(work_dir=tmp_path, cpu_timing=True, baselines=("eager",), trace=True) as ev:
        result = ev.evaluate(task, source)
        trace = list(ev.trace or [])
    assert result.status is Status.correct, result.feedback(300)
    candidate = next(t for t in trace if t["kind"] == "candidate")
    assert {"setup_s", "measure_s", "start_s", "load_s", "first_s", "forward_s"} <= candidate.keys()
    # What the worker did before its gate (its trials) fits within the setup the evaluator saw.
    parts = sum(candidate[k] for k in ("start_s", "cuda_s", "load_s", "inputs_s", "first_s", "forward_s"))
    assert parts <= candidate["setup_s"] + 0.01


def test_a_worker_cannot_put_names_of_its_own_into_the_trace():
    # Candidate code runs in the worker: what it reports is filtered to the known phases.
    res = WorkerResult(exit_code=0, signal=None, timed_out=False, elapsed_s=1.0, output_tail="", messages=[
        ({"kind": "ops", "phases": {"queued_s": 99.0, "first_s": 1.5, "load_s": True, "x" * 500: 1.0}}, []),
        ({"kind": "timing", "phases": {"timed_s": 2.0}}, [])])
    assert res.phases() == {"first_s": 1.5}


def test_the_judge_is_stopped_while_a_candidate_is_measured_and_runs_again_to_check_its_output(tmp_path):
    task = example_task("softmax", warmup_runs=1, timed_runs=3)
    source = (EXAMPLES / "kernels" / "softmax.py").read_text()
    with Evaluator(work_dir=tmp_path, cpu_timing=True, baselines=("eager",)) as ev:
        assert ev.validate_task(task).ok
        states = []
        open_gate = ev.pool.open_gate

        def watching(job_id):
            states.append(procs.state(ev.judge.pid()))
            open_gate(job_id)

        ev.pool.open_gate = watching
        result = ev.evaluate(task, source)
        assert result.status is Status.correct, result.feedback(300)  # its check output was compared
        assert states and set(states) == {"T"}  # every measurement began with the judge stopped
        assert procs.state(ev.judge.pid()) != "T"


LINGERS_AFTER_ITS_REPORT = """
import os as _os
import time as _time

_real_exit = _os._exit


def _linger_then_exit(code):
    _time.sleep(3)
    _real_exit(code)


_os._exit = _linger_then_exit
"""


def test_a_candidate_that_lingers_after_its_timing_report_does_not_keep_the_gpu_to_itself(tmp_path):
    task = example_task("softmax", warmup_runs=1, timed_runs=3)
    source = (EXAMPLES / "kernels" / "softmax.py").read_text() + LINGERS_AFTER_ITS_REPORT
    with Evaluator(work_dir=tmp_path, cpu_timing=True, baselines=("eager",), trace=True) as ev:
        result = ev.evaluate(task, source)
        assert result.status is Status.correct and result.timing is not None, result.feedback(300)
        timed = [t for t in ev.trace if t["candidate"] and "measure_s" in t]  # the jobs that measured it
    assert timed and all(t["measure_s"] >= 3.0 for t in timed)  # the job itself ran on past its report
    assert all(t["exclusive_s"] < 2.0 for t in timed), timed  # the GPU was everyone's again at the report


# --- baseline cache ---------------------------------------------------------------------------------


def _key(**kw):
    base = dict(task_id="t1", device_name="NVIDIA H200", gpu="0", torch_version="2.11", triton_version="3.6",
                protocol_key="p1")
    base.update(kw)
    return BaselineKey(**base)


def test_baseline_store_keys_and_round_trip(tmp_path):
    store = BaselineStore(tmp_path)
    stats = TimingStats(mean_ms=1.0, median_ms=1.0, std_ms=0.0, min_ms=0.9, runs=90)
    store.save(_key(), Baselines(eager=stats, compile=None, compile_note="failed", measured=("compile", "eager")))
    got = store.load(_key())
    assert got.eager == stats and got.compile is None and got.compile_note == "failed"
    assert got.has(["eager", "compile"])
    for change in ({"gpu": "1"}, {"device_name": "NVIDIA A100"}, {"torch_version": "2.12"},
                   {"protocol_key": "p2"}, {"triton_version": "3.7"}):
        assert store.load(_key(**change)) is None, change
        assert store.path(_key(**change)) != store.path(_key())
    store.path(_key()).write_text("{not json")
    assert store.load(_key()) is None


def test_baselines_persist_across_evaluators_and_can_be_remeasured(tmp_path):
    task = example_task("gelu_scale", warmup_runs=1, timed_runs=3)
    with Evaluator(work_dir=tmp_path, cpu_timing=True, baselines=("eager",)) as ev:
        first = ev.validate_task(task)
        assert first.ok and first.reference_timing is not None
        method = "cuda_events" if HAS_CUDA else "host_clock"
        assert first.reference_timing.method == method and first.compile_timing is None
        files = list((tmp_path / "baselines").rglob("*.json"))
        assert len(files) == 1
        result = ev.evaluate(task, (EXAMPLES / "kernels" / "gelu_scale.py").read_text())
        assert result.status is Status.correct and result.timing is not None
        assert result.speedup == pytest.approx(first.reference_timing.runtime_ms / result.timing.runtime_ms)
        assert result.speedup_vs_best == pytest.approx(result.speedup)
    with Evaluator(work_dir=tmp_path, cpu_timing=True, baselines=("eager",)) as ev:
        again = ev.validate_task(task)
        assert again.reference_timing == first.reference_timing  # read from disk, not re-timed
        fresh = ev.reference(task, remeasure=True)
        assert fresh.timing is not None and fresh.timing != first.reference_timing
        assert ev.validate_task(task).reference_timing == fresh.timing


def slow_compile(ev: Evaluator, release: threading.Event) -> list[str]:
    """Make the torch.compile baseline wait for `release`, then report 1 ms; returns the task
    names it was measured for."""
    measured: list[str] = []

    def measure(task, protocol, ref):
        assert release.wait(60)
        measured.append(task.name)
        return TimingStats(mean_ms=1.0, median_ms=1.0, min_ms=1.0, std_ms=0.0, runs=3,
                           method="host_clock"), None, False
    ev.references._measure_compile = measure  # type: ignore[method-assign]
    return measured


def test_registration_and_speedups_do_not_wait_for_the_torch_compile_baseline(tmp_path):
    task = example_task("gelu_scale", warmup_runs=1, timed_runs=3)
    release = threading.Event()
    with Evaluator(work_dir=tmp_path, cpu_timing=True, baselines=("eager", "compile")) as ev:
        slow_compile(ev, release)
        v = ev.validate_task(task)
        assert v.ok and v.reference_timing is not None
        assert v.compile_timing is None and "still being measured" in v.compile_note
        first = ev.evaluate(task, (EXAMPLES / "kernels" / "gelu_scale.py").read_text())
        assert first.status is Status.correct and first.speedup is not None
        assert first.compile_timing is None and "still being measured" in first.compile_note
        release.set()
        ev.reference(task)  # waits for every baseline
        later = ev.evaluate(task, (EXAMPLES / "kernels" / "gelu_scale.py").read_text() + "\n# again\n")
        assert later.compile_timing is not None and later.compile_timing.mean_ms == 1.0
        assert later.compile_note is None and later.speedup_vs_best is not None


def test_a_one_shot_evaluator_waits_for_the_torch_compile_baseline(tmp_path):
    task = example_task("gelu_scale", warmup_runs=1, timed_runs=3)
    release = threading.Event()
    with Evaluator(work_dir=tmp_path, cpu_timing=True, baselines=("eager", "compile"), wait_for_compile=True) as ev:
        slow_compile(ev, release)
        answer: list = []
        worker = threading.Thread(target=lambda: answer.append(ev.validate_task(task)))
        worker.start()
        worker.join(5)
        assert worker.is_alive() and not answer  # registration waits for torch.compile here
        release.set()
        worker.join(60)
        assert answer and answer[0].compile_timing is not None and answer[0].compile_note is None


def test_baselines_must_include_eager(tmp_path):
    with pytest.raises(ValueError):
        Evaluator(work_dir=tmp_path, baselines=("compile",))


# --- infrastructure failures --------------------------------------------------------------------------


def test_cache_race_is_recognized(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    race = FileNotFoundError(2, "No such file or directory", str(tmp_path / "ab" / "kernel.json"))
    assert harness.cache_race(race)
    wrapped = RuntimeError("compile failed")
    wrapped.__cause__ = race
    assert harness.cache_race(wrapped)
    assert not harness.cache_race(FileNotFoundError(2, "No such file", "/elsewhere/data.bin"))
    assert not harness.cache_race(ValueError("bad value"))


RACE_CANDIDATE = (EXAMPLES / "kernels" / "gelu_scale.py").read_text().replace(
    "    def forward(self,",
    "    def forward(self, *args, **kwargs):\n"
    "        import os\n"
    "        open(os.path.join(os.environ['TRITON_CACHE_DIR'], 'gone', 'k.json'))\n\n"
    "    def _unused(self,", 1)


def test_a_cache_race_claimed_from_inside_a_candidates_process_is_the_candidates_own(evaluator):
    """Each job compiles into a Triton cache of its own, so no other job can race it; a "cache
    race" raised inside the candidate's process is its own doing, counted against it."""
    assert "_unused" in RACE_CANDIDATE
    result = evaluator.evaluate(example_task("gelu_scale"), RACE_CANDIDATE)
    assert result.status is Status.runtime_error, result.feedback()
    assert "cache" in result.error.message


def test_same_kernel_compiled_concurrently_is_always_correct(tmp_path):
    source = (EXAMPLES / "kernels" / "softmax.py").read_text()
    task = example_task("softmax")
    with Evaluator(work_dir=tmp_path, max_parallel=3) as ev:
        with ThreadPoolExecutor(6) as ex:
            results = list(ex.map(lambda i: ev.evaluate(task, source + f"\n# copy {i}\n"), range(6)))
    assert [r.status for r in results] == [Status.correct] * 6, [r.feedback() for r in results]
    assert len({r.source_hash for r in results}) == 6  # none was answered from the result cache


# --- the cold-process mode ------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel,task_name", [
    ("softmax.py", "softmax"), ("broken/wrong_output.py", "softmax"), ("broken/compile_error.py", "softmax")])
def test_cold_process_gives_the_warm_evaluators_status(evaluator, tmp_path, kernel, task_name):
    path = EXAMPLES / "kernels" / kernel
    warm = evaluator.evaluate(example_task(task_name), path.read_text())
    out = tmp_path / "r.json"
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "cache"))
    cmd = [sys.executable, "-m", "adaexplore.evaluator.coldrun", "--task",
           str(EXAMPLES / "tasks" / f"{task_name}.py"), "--candidate", str(path), "--out", str(out)]
    if not HAS_CUDA:
        cmd += ["--device", "cpu"]
    subprocess.run(cmd, env=env, cwd=ROOT, check=True, timeout=300, capture_output=True)
    cold = EvalResult.model_validate_json(out.read_text())
    assert cold.status is warm.status, (cold.feedback(), warm.feedback())
    assert cold.trials_passed == warm.trials_passed


# --- on a GPU ----------------------------------------------------------------------------------------------


@gpu
def test_compile_baseline_and_speedup_vs_best(tmp_path):
    task = example_task("softmax")
    with Evaluator(work_dir=tmp_path, baselines=("eager", "compile")) as ev:
        assert ev.baselines == ("eager", "compile")
        v = ev.validate_task(task)
        assert v.ok and v.reference_timing is not None
        assert (v.compile_timing is None) == (v.compile_note is not None)
        r = ev.evaluate(task, (EXAMPLES / "kernels" / "softmax.py").read_text())
        assert r.status is Status.correct and r.speedup is not None and r.speedup_vs_best is not None
        assert r.speedup_vs_best <= r.speedup + 1e-12


def _autotuners_of(source: str, tmp_path) -> list:
    """The autotuners the timing job would find in a candidate."""
    import sys

    try:
        return harness.autotuners(harness.load_candidate(source, str(tmp_path)))
    finally:
        sys.modules.pop("candidate", None)


def test_autotuners_are_found_so_timing_can_retune_them_on_a_quiet_gpu(tmp_path):
    """The timing job forgets configs chosen while other work shared the GPU; it must find them."""
    source = (ROOT / "benchmarks" / "throughput" / "kernels" / "softmax_autotune.py").read_text()
    source += '''

@triton.heuristics({"EVEN": lambda args: args["n"] % 2 == 0})
@triton.autotune(configs=[triton.Config({}, num_warps=1), triton.Config({}, num_warps=2)], key=["n"])
@triton.jit
def wrapped_kernel(x_ptr, n, EVEN: tl.constexpr):
    pass
'''
    tuners = _autotuners_of(source, tmp_path)
    assert len(tuners) == 2  # the plain one, and the one under @triton.heuristics
    assert all(isinstance(t.cache, dict) for t in tuners)  # what the timing job clears after the gate


# The first tuning of this kernel (whenever the process first calls it) picks num_warps=1; any
# later tuning picks num_warps=2. Benchmarks return fixed numbers, so no clock decides.
TUNED_BY_ORDER = (ROOT / "benchmarks" / "throughput" / "kernels" / "softmax_autotune.py").read_text().replace(
    "@triton.autotune(configs=CONFIGS, key=[\"n_cols\"])", """
BENCHED = []


def order_bench(kernel_call, quantiles=None):
    kernel_call()
    tuning, config = divmod(len(BENCHED), 2)
    BENCHED.append(config)
    ms = float(config == 0) if tuning else float(config == 1)
    return [ms, ms, ms]


@triton.autotune(configs=[triton.Config({}, num_warps=1), triton.Config({}, num_warps=2)], key=["n_cols"],
                 do_bench=order_bench)""")


def test_the_timed_config_is_the_one_tuned_again_on_the_quiet_gpu(tmp_path):
    """Before the gate the kernel tunes under load (picking num_warps=1 here); the timing job
    tunes it again once it holds the GPU, times that choice and reports it."""
    assert "do_bench=order_bench" in TUNED_BY_ORDER
    with Evaluator(device="cpu", work_dir=tmp_path, cpu_timing=True, baselines=("eager",)) as ev:
        result = ev.evaluate(example_task("softmax", warmup_runs=1, timed_runs=3), TUNED_BY_ORDER)
    assert result.status is Status.correct, result.feedback()
    assert len(result.autotune_configs) == 1, result.autotune_configs
    assert result.autotune_configs[0].startswith("softmax_kernel: ") and "num_warps: 2" in result.autotune_configs[0]


def _time_in_process(tmp_path, monkeypatch, source: str) -> tuple[int, dict]:
    """Run the timing job's measuring half here on the CPU; returns how many times it measured
    and its report."""
    import torch

    from adaexplore.evaluator.worker import timing

    monkeypatch.setenv("TRITON_INTERPRET", "1")  # CPU tensors, on a GPU machine too
    measured, sent = [], []
    real = timing.time_model
    monkeypatch.setattr(timing, "time_model", lambda *a, **k: measured.append(1) or real(*a, **k))

    class Recorder(harness.Reporter):  # no pipe, no gate: keeps what the job reports
        def _send(self, head, tensors=None):
            sent.append(head)

    try:
        module = harness.load_candidate(source, str(tmp_path))
        task = harness.load_task(example_task("softmax").source)
        jobs._time({}, Recorder(fd=-1), module.ModelNew(), task, EvalProtocol(warmup_runs=1, timed_runs=3),
                   torch.device("cpu"), None, module)
    finally:
        sys.modules.pop("candidate", None)
    return len(measured), sent[0]


# Calls the autotuned kernel only from its `FIRST` call on (plain torch before that).
LATE_TUNED = TUNED_BY_ORDER.replace("class ModelNew(nn.Module):", """FIRST = 1


class ModelNew(nn.Module):""").replace("""        x = x.contiguous()""", """        self.calls = getattr(self, "calls", 0) + 1
        if self.calls < FIRST:
            return torch.softmax(x, dim=-1)
        x = x.contiguous()""")


def test_a_kernel_tuned_before_the_clock_is_measured_once(tmp_path, monkeypatch):
    runs, report = _time_in_process(tmp_path, monkeypatch, LATE_TUNED)
    assert runs == 1 and "num_warps: 2" in report["autotuned"][0]


def test_a_kernel_first_tuned_inside_the_timed_region_is_measured_again(tmp_path, monkeypatch):
    # before the gate: call 1; tuning runs: 2 and 3; warm-up: 4; timed runs from call 5
    runs, report = _time_in_process(tmp_path, monkeypatch, LATE_TUNED.replace("FIRST = 1", "FIRST = 6"))
    assert runs == 2 and report["autotuned"][0].startswith("softmax_kernel: ")


def test_a_retune_forgets_choices_in_memory_and_on_disk():
    class Tuner:
        cache = {("n", 8): "num_warps: 8"}
        cache_results = True

    tuner = Tuner()
    jobs.retune([tuner])
    assert tuner.cache == {} and tuner.cache_results is False


def test_an_autotuner_made_inside_a_class_is_found_for_retuning(tmp_path):
    source = """
import triton
import triton.language as tl


class Holder:
    @triton.autotune(configs=[triton.Config({}, num_warps=1), triton.Config({}, num_warps=2)], key=["n"])
    @triton.jit
    def kernel(x_ptr, n):
        pass
"""
    tuners = _autotuners_of(source, tmp_path)
    assert [t.base_fn.__name__ for t in tuners] == ["kernel"]


def test_the_autotuned_config_that_was_timed_is_reported(tmp_path):
    source = (ROOT / "benchmarks" / "throughput" / "kernels" / "softmax_autotune.py").read_text()
    with Evaluator(device="cpu", work_dir=tmp_path, cpu_timing=True, baselines=("eager",)) as ev:
        result = ev.evaluate(example_task("softmax", warmup_runs=1, timed_runs=3), source)
    assert result.status is Status.correct, result.feedback()
    assert len(result.autotune_configs) == 1 and "num_warps: 4" in result.autotune_configs[0]
    assert "autotune chose: " in result.feedback()


class _Task:
    """A task module's get_inputs, as the harness sees it."""

    def __init__(self, get_inputs):
        self.get_inputs = get_inputs


@gpu
def test_inputs_are_made_on_the_gpu_and_are_the_same_for_the_same_seed():
    import torch

    task = _Task(lambda: [torch.rand(1000, 1000), 3])
    first = harness.make_inputs(task, 5, torch.device("cuda"))
    again = harness.make_inputs(task, 5, torch.device("cuda"))
    other = harness.make_inputs(task, 6, torch.device("cuda"))
    assert first[0].is_cuda and first[1] == 3
    assert torch.equal(first[0], again[0]) and not torch.equal(first[0], other[0])


@gpu
def test_a_get_inputs_that_cannot_run_on_the_gpu_runs_on_the_cpu_and_is_moved():
    import torch

    task = _Task(lambda: [torch.from_numpy(torch.rand(8, 8).numpy())])  # NumPy cannot hold a GPU tensor
    inputs = harness.make_inputs(task, 5, torch.device("cuda"))
    assert inputs[0].is_cuda and torch.equal(inputs[0].cpu(), harness.make_inputs(task, 5, torch.device("cpu"))[0])


def test_inputs_on_the_cpu_follow_the_seed():
    import torch

    task = _Task(lambda: [torch.rand(4)])
    assert torch.equal(harness.make_inputs(task, 1, torch.device("cpu"))[0],
                       harness.make_inputs(task, 1, torch.device("cpu"))[0])


def test_in_one_process_a_correct_kernel_is_timed_where_it_was_checked_and_a_wrong_one_is_never_timed(tmp_path):
    task = example_task("softmax", warmup_runs=1, timed_runs=3)
    kernels = EXAMPLES / "kernels"
    with Evaluator(work_dir=tmp_path, cpu_timing=True, baselines=("eager",), trace=True, one_process=True) as ev:
        ev.validate_task(task)
        ev.trace.clear()
        ev.pipeline._best_ms[ev.judge_key(task, task.protocol)] = float("inf")  # any kernel is a new best (see above)
        good = ev.evaluate(task, (kernels / "softmax.py").read_text())
        assert good.status is Status.correct and good.timing is not None and good.speedup is not None
        assert good.trials_passed == good.trials and good.triton_launches > 0
        jobs = [(t["kind"], t.get("measure_s") is not None) for t in ev.trace]
        # Checked and timed in one process, then the new best confirmed in a fresh one: two processes, not three.
        assert jobs == [("candidate", True), ("timing", True)], ev.trace
        assert "confirmed" in (good.timing_note or ""), good.timing_note
        ev.trace.clear()
        bad = ev.evaluate(task, (kernels / "broken" / "wrong_output.py").read_text())
        assert bad.status is Status.wrong_output and bad.timing is None
        assert [(t["kind"], t.get("measure_s") is not None) for t in ev.trace] == [("candidate", False)]


def test_in_one_process_a_kernel_that_turns_lazy_once_its_trials_are_over_is_caught_by_the_check_run(tmp_path):
    """The process that passed its trials is the one timed: a kernel that counts its calls and
    stops computing after the trials still has its check run after timing compared."""
    task = example_task("softmax", warmup_runs=1, timed_runs=3)
    source = (EXAMPLES / "kernels" / "softmax.py").read_text().replace(
        "        x = x.contiguous()\n",
        "        self.calls = getattr(self, 'calls', 0) + 1\n"
        "        if self.calls > 5:\n"
        "            return torch.empty_like(x)\n"
        "        x = x.contiguous()\n")
    with Evaluator(work_dir=tmp_path, cpu_timing=True, baselines=("eager",), one_process=True) as ev:
        result = ev.evaluate(task, source)
    assert result.status is Status.wrong_output and result.trials_passed == result.trials
    assert "output produced while timing" in result.error.message, result.feedback()


FORGES_ITS_REPORT = '''
import gc

from adaexplore.evaluator.worker.harness import Reporter

FORGED = []


class ModelNew(Model):
    def forward(self, x):
        if not FORGED:  # on its first call: says its trials are over and that it ran no PyTorch op
            rep = next(o for o in gc.get_objects() if isinstance(o, Reporter))
            rep.send({"kind": "ops", "ops": [], "launches": 5, "flags_reset": []})
            rep.send({"kind": "checked"})
            FORGED.append(True)
        return super().forward(x)
'''


def test_in_one_process_a_candidate_that_forges_the_end_of_its_trials_is_caught_and_never_timed(tmp_path):
    task = example_task("softmax", warmup_runs=1, timed_runs=3)
    source = task.source.split("def get_inputs")[0] + FORGES_ITS_REPORT
    with Evaluator(work_dir=tmp_path, cpu_timing=True, baselines=("eager",), trace=True, one_process=True) as ev:
        result = ev.evaluate(task, source)
        kinds = [t["kind"] for t in ev.trace]
    assert result.status is Status.cheat_detected and "'checked' before every trial" in result.cheat_reason
    assert result.timing is None and kinds[-1] == "candidate" and "measure_s" not in ev.trace[-1]  # never measured


@gpu
def test_on_the_gpu_one_process_times_a_correct_kernel_where_it_was_checked(tmp_path):
    task = example_task("softmax")
    kernels = EXAMPLES / "kernels"
    with Evaluator(work_dir=tmp_path, baselines=("eager",), trace=True, one_process=True) as ev:
        ev.validate_task(task)
        ev.trace.clear()
        ev.pipeline._best_ms[ev.judge_key(task, task.protocol)] = float("inf")  # any kernel is a new best (see above)
        good = ev.evaluate(task, (kernels / "softmax.py").read_text())
        assert good.status is Status.correct and good.timing is not None and good.timing.method == "cuda_events"
        # Checked and timed in one process (measured), then the new best confirmed in a fresh one.
        assert [(t["kind"], "measure_s" in t) for t in ev.trace] == [("candidate", True), ("timing", True)], ev.trace
        bad = ev.evaluate(task, (kernels / "broken" / "wrong_output.py").read_text())
        assert bad.status is Status.wrong_output and bad.timing is None


def test_in_one_process_a_first_candidate_on_a_single_slot_does_not_wait_for_baselines_that_need_its_slot(tmp_path):
    task = example_task("softmax", warmup_runs=1, timed_runs=3)
    answer: list = []
    with Evaluator(work_dir=tmp_path, cpu_timing=True, baselines=("eager",), max_parallel=1, one_process=True) as ev:
        worker = threading.Thread(target=lambda: answer.append(
            ev.evaluate(task, (EXAMPLES / "kernels" / "softmax.py").read_text())), daemon=True)
        worker.start()  # no registration first: the eager baseline is measured on the way
        worker.join(180)
        assert answer and answer[0].status is Status.correct and answer[0].speedup is not None
