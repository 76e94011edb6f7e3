"""The per-GPU lock: timings pause this process's correctness runs, exclude everyone else's."""

import subprocess
import sys
import threading
import time

import pytest

from adaexplore.evaluator.sandbox.gpu_lock import GpuLock


@pytest.fixture
def recorded(tmp_path):
    events = []
    lock = GpuLock(tmp_path, "0", pause=lambda keep: events.append(f"pause {keep}"),
                   resume=lambda: events.append("resume"))
    return lock, events


def _in_thread(fn):
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    return t


def test_a_timing_pauses_running_correctness_runs_instead_of_waiting(recorded):
    lock, events = recorded
    with lock.shared():
        def timer():
            with lock.exclusive(keep="j7"):
                events.append("timing")
                time.sleep(0.3)

        def late_reader():
            with lock.shared():
                events.append("late correctness")

        t = _in_thread(timer)
        time.sleep(0.1)
        late = _in_thread(late_reader)  # arrives while the timing measures: waits for it only
        t.join(5)
        late.join(5)
        assert events == ["pause j7", "timing", "resume", "late correctness"]


def test_without_pausing_a_timing_waits_and_goes_before_later_runs(recorded):
    lock, events = recorded
    with lock.shared():
        def timer():
            with lock.exclusive(pause=False):
                events.append("timing")

        t = _in_thread(timer)
        time.sleep(0.2)
        assert events == []  # it waits for the running correctness run

        def late_reader():
            with lock.shared():
                events.append("late correctness")

        r = _in_thread(late_reader)
        time.sleep(0.2)
        assert events == []  # a waiting timing is not starved by later runs
    t.join(5)
    r.join(5)
    assert events == ["timing", "late correctness"]


def test_nothing_is_paused_when_nothing_runs(recorded):
    lock, events = recorded
    with lock.exclusive(keep="j1"):
        events.append("timing")
    with lock.shared():
        with lock.shared():
            events.append("two runs")
    assert events == ["timing", "two runs"]


HOLDER = """
import fcntl, sys, time
fh = open(sys.argv[1], "rb")
fcntl.flock(fh, fcntl.LOCK_SH)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def test_another_processs_correctness_run_is_waited_for(recorded):
    """Other servers' runs cannot be paused from here: the flock makes the timing wait."""
    lock, events = recorded
    lock.path.touch()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock.path), "1.5"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        with lock.exclusive(keep="j2"):
            waited = time.monotonic() - t0
    finally:
        holder.wait(10)
    assert waited > 1.0
    assert events == []  # nothing of ours was running, so nothing was paused


def test_the_flock_is_released_when_the_last_holder_leaves(recorded):
    import fcntl

    lock, _ = recorded
    with lock.shared():
        pass
    with lock.exclusive():
        pass
    with open(lock.path, "rb") as fh:  # free again: an exclusive flock succeeds at once
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
