"""Worker slots: background work (torch.compile baselines) yields to candidates and registrations."""

import threading
import time

import pytest
from conftest import job_spec

from adaexplore.evaluator.evaluator import Evaluator
from adaexplore.evaluator.slots import Slots


def _claim(slots: Slots, background: bool, order: list, name: str, release: threading.Event) -> threading.Thread:
    def run():
        with slots.hold(background):
            order.append(name)
            release.wait(10)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _until(cond, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_free_slot_goes_to_background_work_when_nobody_else_waits():
    slots, order, release = Slots(2), [], threading.Event()
    t = _claim(slots, True, order, "compile", release)
    _until(lambda: order == ["compile"])
    assert slots.busy() == (1, 1)
    release.set()
    t.join(5)
    assert slots.busy() == (0, 0)


def test_a_waiting_candidate_takes_the_next_free_slot_before_background_work_that_waited_longer():
    slots, order = Slots(1), []
    first, rest = threading.Event(), threading.Event()
    holder = _claim(slots, False, order, "holder", first)
    _until(lambda: order == ["holder"])
    compile_job = _claim(slots, True, order, "compile", rest)
    time.sleep(0.1)  # the background claim queues first
    candidate = _claim(slots, False, order, "candidate", rest)
    _until(lambda: slots._waiting == 1)
    first.set()
    _until(lambda: len(order) == 2)
    assert order == ["holder", "candidate"]
    rest.set()
    for t in (holder, compile_job, candidate):
        t.join(5)
    assert order == ["holder", "candidate", "compile"]


def test_background_work_holds_at_most_its_share_of_the_slots():
    slots, order, release = Slots(8), [], threading.Event()
    threads = [_claim(slots, True, order, f"compile{i}", release) for i in range(5)]
    _until(lambda: len(order) == 2)
    time.sleep(0.1)
    assert slots.busy() == (2, 2)  # a quarter of 8; the other six stay free for candidates
    candidate = _claim(slots, False, order, "candidate", release)
    _until(lambda: "candidate" in order)
    release.set()
    for t in [*threads, candidate]:
        t.join(5)
    assert len(order) == 6


def test_background_work_that_waited_its_patience_gets_a_slot_while_a_queue_never_empties():
    slots, got = Slots(1, patience_s=0.3), []
    stream_ends = time.monotonic() + 3.0

    def candidates():  # two of them take turns: one always waits when the slot frees
        while time.monotonic() < stream_ends:
            with slots.hold():
                time.sleep(0.02)

    stream = [threading.Thread(target=candidates, daemon=True) for _ in range(2)]
    for t in stream:
        t.start()
    time.sleep(0.05)
    with slots.hold(background=True):
        got.append(time.monotonic())
    for t in stream:
        t.join(5)
    assert got and got[0] < stream_ends - 1.0


def test_an_evaluator_needs_at_least_one_slot():
    with pytest.raises(ValueError, match="at least one worker slot"):
        Slots(0)


def test_the_torch_compile_baseline_is_background_work_unless_a_caller_waits_for_it(tmp_path):
    ev = Evaluator(work_dir=tmp_path / "a", baselines=("eager",))
    waits = Evaluator(work_dir=tmp_path / "b", baselines=("eager",), wait_for_compile=True)
    compile_job, eager_job = job_spec("timing", compile=True), job_spec("timing")
    assert ev.runner._background(compile_job) and not ev.runner._background(eager_job)
    assert not waits.runner._background(compile_job)
