"""A worker compiling Triton kernels runs through another job's measurement, then waits for it to end."""

import os
import threading
import time
import uuid

import pytest
from test_worker_pool import SOFTMAX_KERNEL, job

from adaexplore.evaluator.sandbox import compile_mark, confine
from adaexplore.evaluator.sandbox.compile_mark import COMPILING, MAY_USE_GPU, CompileMark
from adaexplore.evaluator.sandbox.confine import Plan
from adaexplore.evaluator.sandbox.pool import WorkerPool


@pytest.fixture
def mark():
    m = CompileMark()
    yield m
    m.close()


def test_a_measurement_that_begins_while_a_worker_compiles_lets_it_compile(mark):
    with mark.compiling():
        assert mark.mem[0] == COMPILING
        assert mark.hold() is True
        mark.release()
    assert mark.mem[0] == MAY_USE_GPU
    assert mark.hold() is False  # not compiling now: the measurement stops it as any other
    mark.release()


def test_a_worker_done_compiling_during_a_measurement_waits_for_its_end(mark):
    done_at = []
    inside = threading.Event()

    def worker():
        with mark.compiling():
            inside.set()
            while not mark.mem[1]:  # compiles until the measurement has begun
                time.sleep(0.01)
        done_at.append(time.monotonic())

    t = threading.Thread(target=worker)
    t.start()
    assert inside.wait(10)
    assert mark.hold() is True
    time.sleep(0.5)
    assert not done_at and mark.waiting()  # its compile is over, its GPU work waits
    released = time.monotonic()
    mark.release()
    t.join(10)
    assert done_at and done_at[0] >= released


def test_a_worker_that_finds_no_measurement_goes_straight_on(mark):
    tally: dict[str, float] = {}
    with mark.compiling(tally):
        time.sleep(0.05)
    assert tally["compile_s"] >= 0.05 and tally["held_s"] < 0.05


def test_tritons_compilers_run_marked_in_the_main_thread_only(mark, monkeypatch):
    import triton.runtime.build

    seen = []
    monkeypatch.setattr(triton.compiler.compiler, "compile", lambda *a, **k: seen.append(mark.mem[0]) or "kernel")
    monkeypatch.setattr(triton.compiler, "compile", triton.compiler.compiler.compile)
    monkeypatch.setattr(triton.runtime.build, "_build", lambda *a, **k: seen.append(mark.mem[0]) or "launcher.so")
    drained = []
    compile_mark.install(mark, lambda: drained.append(True))
    assert triton.compiler.compile("src") == "kernel"  # the name the JIT imports
    assert triton.runtime.build._build("launcher") == "launcher.so"  # the C compiler, for launchers
    other = threading.Thread(target=triton.compiler.compiler.compile, args=("src",))
    other.start()
    other.join()
    assert seen == [COMPILING, COMPILING, MAY_USE_GPU]
    assert drained == [True, True]  # queued GPU work drained before it says it compiles
    assert mark.mem[0] == MAY_USE_GPU


# --- through the warm parent: real processes ---------------------------------------------------

@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    p = WorkerPool(interpret=True, work_dir=str(tmp_path_factory.mktemp("pool")))
    yield p
    p.close()


def compiling_candidate(ticks: str, after: str) -> str:
    """A candidate whose Triton compile takes 2 s (a driver that ticks while asked for its target,
    then fails, as it would on a machine without a GPU) and that writes `after` once it returns."""
    return f"""
import time
import triton.compiler
from triton.runtime.driver import driver

class SlowTarget:
    def get_current_target(self):
        for _ in range(100):
            with open({ticks!r}, "a") as fh:
                fh.write("c")
            time.sleep(0.02)
        raise RuntimeError("no GPU to compile for")

before = driver._active
driver.set_active(SlowTarget())
try:
    triton.compiler.compile(None)
except RuntimeError:
    pass
driver._active = before
with open({after!r}, "w") as fh:
    fh.write(str(time.monotonic()))
""" + SOFTMAX_KERNEL


def test_a_compiling_job_goes_on_through_a_pause_and_runs_nothing_after_it_until_the_resume(pool, tmp_path):
    ticks, after = str(tmp_path / f"ticks-{uuid.uuid4().hex}"), str(tmp_path / "after")
    confine.hand_over(tmp_path)  # the sandbox's uid writes there
    sandbox = Plan(writable=[str(tmp_path)]).to_job()
    submitted = pool.submit(job("candidate", candidate_source=compiling_candidate(ticks, after), sandbox=sandbox), 60)
    deadline = time.monotonic() + 30
    while not os.path.exists(ticks) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert os.path.exists(ticks), submitted.future.result() if submitted.future.done() else "never compiled"
    pool.pause()
    try:
        size = os.path.getsize(ticks)
        time.sleep(0.5)
        assert os.path.getsize(ticks) > size  # still compiling: not stopped
        while os.path.getsize(ticks) < 100 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        assert os.path.getsize(ticks) == 100
        assert not os.path.exists(after)  # its compile is over; what follows waits for the resume
        resumed = time.monotonic()
    finally:
        pool.resume()
    res = submitted.future.result(timeout=60)
    assert res.exit_code == 0, res.output_tail
    assert os.path.exists(after), res.messages[-2:]
    with open(after) as fh:
        assert float(fh.read()) >= resumed
    phases = res.phases()
    assert phases.get("held_s", 0) > 0.5, phases


def test_many_jobs_at_once_each_with_its_mark_leave_the_warm_parent_whole(pool, tmp_path):
    # Every child closes the marks of the others; none may close a descriptor that is not a mark's.
    confine.hand_over(tmp_path)  # the sandbox's uid writes there
    sandbox = Plan(writable=[str(tmp_path)]).to_job()
    first = [pool.submit(job("candidate", candidate_source=SOFTMAX_KERNEL, sandbox=sandbox), 60) for _ in range(6)]
    pool.pause()
    pool.resume()
    second = [pool.submit(job("candidate", candidate_source=SOFTMAX_KERNEL, sandbox=sandbox), 60) for _ in range(6)]
    for submitted in first + second:
        res = submitted.future.result(timeout=120)
        assert res.exit_code == 0 and res.first("done") is not None, res.output_tail
    assert pool.warm_parent_pid() is not None
