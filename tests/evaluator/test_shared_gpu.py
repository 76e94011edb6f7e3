"""Fair verdicts on a shared GPU: a job past its device share is stopped once the device runs
short, with the figures in its verdict, and the jobs beside it run again rather than being blamed;
a stuck forward costs seconds, not the time limit; a measurement that a few disturbed runs moved
is repeated, and the result says why."""

from adaexplore.evaluator.sandbox.device_watch import HEADROOM_BYTES, DeviceWatch, Overdraw, overdrawn

GIB = 1 << 30


def test_no_job_is_stopped_while_the_device_has_its_headroom_free():
    assert overdrawn(free=HEADROOM_BYTES, used={"a": 90 * GIB}, shares={"a": 2 * GIB}) == []


def test_once_the_device_runs_short_the_job_furthest_past_its_share_is_stopped_first():
    stop = overdrawn(free=1 * GIB, used={"hog": 100 * GIB, "honest": 2 * GIB, "borrower": 6 * GIB},
                     shares={"hog": 4 * GIB, "honest": 3 * GIB, "borrower": 5 * GIB})
    assert [s.job_id for s in stop] == ["hog"]  # stopping it alone brings the headroom back
    assert stop[0] == Overdraw("hog", 100 * GIB, 4 * GIB, 1 * GIB)
    assert "100.00 GiB" in stop[0].reason() and "share of 4.00 GiB" in stop[0].reason()


def test_jobs_past_their_share_are_stopped_until_the_headroom_would_be_back():
    stop = overdrawn(free=0, used={"a": 6 * GIB, "b": 5 * GIB, "c": 1 * GIB},
                     shares={"a": 1 * GIB, "b": 1 * GIB, "c": 2 * GIB})
    assert [s.job_id for s in stop] == ["a", "b"]  # 5 GiB back from a is not yet the 8 GiB short
    assert "c" not in {s.job_id for s in stop}  # within its share: never stopped


def test_a_job_without_a_share_is_never_stopped():
    assert overdrawn(free=0, used={"ref": 50 * GIB}, shares={}) == []


class FakeDevice:
    def __init__(self, free: int, by_pid: dict[int, int]) -> None:
        self.free, self.by_pid, self.reads = free, by_pid, 0

    def free_bytes(self) -> int:
        return self.free

    def used_by_pid(self) -> dict[int, int]:
        self.reads += 1
        return self.by_pid


def test_the_watch_sums_a_jobs_processes_and_reads_them_only_when_the_device_is_short():
    device = FakeDevice(free=40 * GIB, by_pid={11: 30 * GIB, 12: 30 * GIB, 21: 1 * GIB})
    now = [0.0]
    watch = DeviceWatch(device, clock=lambda: now[0])
    jobs = {"hog": ([11, 12], 10 * GIB), "honest": ([21], 2 * GIB)}
    assert watch.check(jobs) == ([], False) and device.reads == 0
    assert not watch.due()
    now[0] += 1.0
    device.free = 100 << 20
    stop, short = watch.check(jobs)
    assert short and [s.job_id for s in stop] == ["hog"] and stop[0].used_bytes == 60 * GIB


# --- the warm parent's side: who is stopped, who is marked ------------------------------------------

def bare_warm_parent(device):
    from adaexplore.evaluator.sandbox import warm_parent

    z = warm_parent.WarmParent.__new__(warm_parent.WarmParent)  # its control channel and cgroups are not needed here
    z.children, z.watch = {}, DeviceWatch(device)
    z.killed = []
    z._kill = z.killed.append
    return z


def child(job_id, pid, share):
    from adaexplore.evaluator.sandbox.warm_parent import Child

    c = Child(job_id, pid, 60.0, None, None, None)
    c.device_share = share
    return c


def test_the_warm_parent_stops_the_hog_with_its_figures_and_marks_every_job_alive_then():
    z = bare_warm_parent(FakeDevice(free=200 << 20, by_pid={101: 120 * GIB, 202: 3 * GIB}))
    hog, honest = child("hog", 101, 6 * GIB), child("honest", 202, 4 * GIB)
    z.children = {"hog": hog, "honest": honest}
    z._watch_device()
    assert z.killed == [hog]
    assert hog.overdraw is not None and hog.overdraw.used_bytes == 120 * GIB
    assert hog.killed_for.startswith("device memory: its processes held 120.00 GiB")
    assert honest.killed_for is None and honest.pressure and hog.pressure


def test_nothing_is_stopped_or_marked_while_the_device_has_room():
    z = bare_warm_parent(FakeDevice(free=20 * GIB, by_pid={101: 100 * GIB}))
    hog = child("hog", 101, 6 * GIB)
    z.children = {"hog": hog}
    z._watch_device()
    assert z.killed == [] and not hog.pressure and hog.killed_for is None


# --- the evaluator's side: the verdict of a job stopped for its share, and its victims ------------------

def crashed(**fields):
    from adaexplore.evaluator.sandbox.pool import WorkerResult

    how = {"exit_code": 70, "signal": None, "timed_out": False, "elapsed_s": 2.4,
           "output_tail": "CUDA error: out of memory", **fields}
    return WorkerResult(**how)


def a_candidates(res) -> bool:
    return any(head.get("kind") == "launched" for head, _ in res.messages)


def test_a_job_stopped_for_its_share_is_told_so_with_the_figures():
    from conftest import example_task

    from adaexplore.evaluator.reference import Reference
    from adaexplore.evaluator.results import Status
    from adaexplore.evaluator.verdict import correctness_verdict

    over = Overdraw("j1", 120 * GIB, 6 * GIB, 200 << 20)
    res = crashed(killed_for="device memory: " + over.reason(), signal=9, exit_code=None,
                  device_over={"used_bytes": over.used_bytes, "share_bytes": over.share_bytes, "free_bytes": 1})
    result = correctness_verdict(res, Reference(), example_task("softmax").protocol, [])
    assert result.status is Status.oom and result.error.error_class == "DeviceMemoryShare"
    assert "120.00 GiB" in result.error.message and "share of 6.00 GiB" in result.error.message


def rewrite_candidate_runs(evaluator, monkeypatch, rewrite):
    """Pass each candidate run's result through rewrite(result, nth); the list of real results."""
    real_wait, seen = evaluator.pool.wait, []

    def wait(submitted, until=None):
        res = real_wait(submitted, until)
        if not a_candidates(res):
            return res
        seen.append(res)
        return rewrite(res, len(seen))

    monkeypatch.setattr(evaluator.pool, "wait", wait)
    return seen


def test_a_candidate_that_failed_while_a_neighbour_ran_the_device_short_is_run_again_not_blamed(evaluator,
                                                                                                   monkeypatch):
    from conftest import EXAMPLES, example_task

    from adaexplore.evaluator.results import Status

    # the first run dies as CUDA does when a neighbour took the device
    seen = rewrite_candidate_runs(evaluator, monkeypatch,
                                  lambda res, n: crashed(device_pressure=True) if n == 1 else res)
    source = (EXAMPLES / "kernels" / "softmax.py").read_text() + "\n# beside a hog\n"
    result = evaluator.evaluate(example_task("softmax", timeout_s=60), source)
    assert result.status is Status.correct, result.feedback()
    assert len(seen) == 2


def test_a_failure_with_no_neighbour_past_its_share_is_the_candidates_own(evaluator, monkeypatch):
    from conftest import EXAMPLES, example_task

    from adaexplore.evaluator.results import Status

    seen = rewrite_candidate_runs(evaluator, monkeypatch, lambda res, n: crashed())
    source = (EXAMPLES / "kernels" / "softmax.py").read_text() + "\n# alone, and crashed\n"
    result = evaluator.evaluate(example_task("softmax", timeout_s=60), source)
    assert result.status is Status.runtime_error and len(seen) == 1


# --- a stuck forward ---------------------------------------------------------------------------------

STUCK_AFTER_COMPILING = """
import time

_Honest = ModelNew


class ModelNew(_Honest):
    calls = 0

    def forward(self, x):
        ModelNew.calls += 1
        if ModelNew.calls > 1:  # compiled and checked once; then it never finishes a step
            time.sleep(3600)
        return super().forward(x)
"""


def test_a_forward_stuck_after_its_kernels_compiled_is_ended_in_seconds_with_its_figures(tmp_path):
    import time

    from conftest import EXAMPLES, example_task

    from adaexplore.evaluator.evaluator import Evaluator
    from adaexplore.evaluator.results import Status

    source = (EXAMPLES / "kernels" / "softmax.py").read_text() + STUCK_AFTER_COMPILING
    with Evaluator(work_dir=tmp_path, stall_floor_s=3.0) as ev:
        t0 = time.monotonic()
        result = ev.evaluate(example_task("softmax", timeout_s=120), source)
        took = time.monotonic() - t0
    assert result.status is Status.timeout and result.error.error_class == "StuckForward", result.feedback()
    assert "3 s without finishing a step" in result.error.message
    assert "reference takes" in result.error.message
    assert took < 60, f"ended after {took:.0f} s, not seconds after it stalled"


def test_a_stuck_forward_ends_in_seconds_even_between_back_to_back_measurements(tmp_path):
    """Others' measurements pause it for a second at a time with only moments between: its grace
    must not creep through those moments while it takes the device from every measurement."""
    import threading
    import time

    from conftest import EXAMPLES, example_task

    from adaexplore.evaluator.evaluator import Evaluator
    from adaexplore.evaluator.results import Status

    source = (EXAMPLES / "kernels" / "softmax.py").read_text() + STUCK_AFTER_COMPILING
    with Evaluator(work_dir=tmp_path, stall_floor_s=3.0) as ev:
        ev.validate_task(example_task("softmax", timeout_s=120))
        done, pause_waits = threading.Event(), []

        def measurements() -> None:
            while not done.is_set():
                t = time.monotonic()
                ev.pool.pause()
                pause_waits.append(time.monotonic() - t)
                time.sleep(1.0)
                ev.pool.resume()
                time.sleep(0.01)

        pauser = threading.Thread(target=measurements, daemon=True)
        t0 = time.monotonic()
        pauser.start()
        try:
            result = ev.evaluate(example_task("softmax", timeout_s=120), source)
        finally:
            done.set()
            pauser.join(10)
        took = time.monotonic() - t0
    assert result.status is Status.timeout and result.error.error_class == "StuckForward", result.feedback()
    assert took < 60, f"ended after {took:.0f} s, not seconds after it stalled"
    assert max(pause_waits) < 4.5  # a measurement waited at most the grace, never the job's limit


def test_an_honest_kernel_is_never_taken_for_stuck(tmp_path):
    from conftest import EXAMPLES, example_task

    from adaexplore.evaluator.evaluator import Evaluator
    from adaexplore.evaluator.results import Status

    with Evaluator(work_dir=tmp_path, stall_floor_s=3.0) as ev:
        result = ev.evaluate(example_task("softmax", timeout_s=120), (EXAMPLES / "kernels" / "softmax.py").read_text())
    assert result.status is Status.correct, result.feedback()


def test_a_stuck_jobs_clock_runs_on_while_it_is_paused_for_anothers_measurement():
    from adaexplore.evaluator.sandbox.stall import StallClock

    clock = StallClock()
    clock.arm(10.0, "", now=0.0)
    clock.stop(now=1.0)  # paused for another's measurement: its queued kernels still run
    clock.go(now=5.0)
    assert not clock.expired(now=9.9) and clock.expired(now=10.1)


def test_a_job_whose_time_ran_out_while_paused_is_not_ended_until_it_has_run_its_grace():
    from adaexplore.evaluator.sandbox.stall import StallClock, grace_for

    clock = StallClock()
    clock.arm(10.0, "", now=0.0)
    clock.stop(now=1.0)
    assert not clock.expired(now=30.0)  # a stopped process cannot report
    clock.go(now=30.0)
    assert grace_for(10.0) == 2.0
    assert not clock.expired(now=31.0)
    clock.stop(now=31.0)  # paused again: what is left of its grace stands still
    clock.go(now=60.0)
    assert not clock.expired(now=60.9) and clock.expired(now=61.1)


def test_a_resumed_job_that_reports_starts_its_clock_over():
    from adaexplore.evaluator.sandbox.stall import StallClock

    clock = StallClock()
    clock.arm(10.0, "", now=0.0)
    clock.stop(now=1.0)
    clock.go(now=30.0)
    clock.arm(10.0, "", now=30.1)  # its step ended as soon as it ran again
    assert not clock.expired(now=39.0) and clock.expired(now=40.2)
    clock.arm(None, "", now=41.0)  # its correctness run is over
    assert not clock.expired(now=1e9)


# --- a measurement moved by a few disturbed runs ---------------------------------------------------------

def timed(event_ms, outputs=()):
    from adaexplore.evaluator.sandbox.pool import WorkerResult

    head = {"kind": "timing", "event_ms": event_ms, "flush_ms": [0.07] * len(event_ms), "drain_ms": [0.1] * 10}
    return WorkerResult(exit_code=0, signal=None, timed_out=False, elapsed_s=1.0, output_tail="",
                        messages=[(head, list(outputs)), ({"kind": "done"}, [])])


def test_a_measurement_whose_mean_a_few_runs_pulled_from_its_median_is_measured_again(tmp_path, monkeypatch):
    from conftest import job_spec

    from adaexplore.evaluator.evaluator import Evaluator

    pulled = [1.59] * 90 + [1.6] * 2 + [9.0] * 8  # the trimmed mean moves, the median does not
    calls = []
    answers = [timed(pulled), timed([1.59] * 100)]
    ev = Evaluator(work_dir=tmp_path, cpu_timing=True)
    try:
        monkeypatch.setattr(ev.runner, "_run_timed_once",
                            lambda job, t, pause: calls.append(pause) or answers[len(calls) - 1])
        res = ev.runner.run_timed(job_spec("timing", candidate_source="x"), 10)
        assert calls == [True, False] and res is answers[1]
        assert "mean" in res.remeasured and "median" in res.remeasured
        calls.clear()
        answers[:] = [timed([1.59] * 100)]
        assert ev.runner.run_timed(job_spec("timing", candidate_source="x"), 10).remeasured is None
        assert calls == [True]  # undisturbed: measured once
    finally:
        ev.close()


def test_a_measurement_taken_while_a_neighbour_ran_the_device_short_is_measured_again(tmp_path, monkeypatch):
    from conftest import job_spec

    from adaexplore.evaluator.evaluator import Evaluator

    short = timed([18.3] * 100)  # cuDNN without its workspace: a steady, wrong 2.2x
    short.device_pressure = True
    calls = []
    answers = [short, timed([8.2] * 100)]
    ev = Evaluator(work_dir=tmp_path, cpu_timing=True)
    try:
        monkeypatch.setattr(ev.runner, "_run_timed_once",
                            lambda job, t, pause: calls.append(pause) or answers[len(calls) - 1])
        res = ev.runner.run_timed(job_spec("timing", candidate_source="x"), 10)
    finally:
        ev.close()
    assert calls == [True, False] and res is answers[1] and "ran short of memory" in res.remeasured


def test_the_result_of_a_repeated_measurement_says_why_and_the_speedup_uses_medians(tmp_path, monkeypatch):
    import torch

    from adaexplore.evaluator.evaluator import Evaluator
    from adaexplore.evaluator.reference import Reference
    from adaexplore.evaluator.results import EvalResult, Status, TimingStats

    ev = Evaluator(work_dir=tmp_path, cpu_timing=True)
    try:
        again = timed([1.0] * 100, outputs=[torch.ones(3)])
        again.remeasured = "a few runs pulled its mean +12.0% away from its median"
        monkeypatch.setattr(ev.runner, "run_timed", lambda job, t: again)
        ref = Reference(timing=TimingStats(mean_ms=3.0, median_ms=2.0, std_ms=0.1, min_ms=1.9, runs=100),
                        check_outputs=[torch.ones(3)])
        checked = EvalResult(status=Status.correct)
        task = __import__("conftest").example_task("softmax")
        result = ev.pipeline._time_candidate(task, "src", task.protocol, ref, checked,
                                             why="its runs were too unlike each other")
    finally:
        ev.close()
    assert result.speedup == 2.0  # 2.0 ms median against 1.0 ms median, whatever the means
    assert result.timing_note.startswith("measured again, apart, because its runs were too unlike each other")
    assert "pulled its mean" in result.timing_note
