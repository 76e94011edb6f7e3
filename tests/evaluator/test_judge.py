"""The judge: reference outputs live outside the server process, within a budget, and a task
that cannot fit is refused with a message that says how much it needs."""

from __future__ import annotations

import os
import threading
import time

import pytest
import torch
from conftest import EXAMPLES, example_task, job_spec

from adaexplore.evaluator.evaluator import Evaluator
from adaexplore.evaluator.judge.reference_store import BudgetBusy, BudgetExceeded, OutputStore
from adaexplore.evaluator.results import Status
from adaexplore.evaluator.task import Task, check_task_source

BIG_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * {scale} + 1.0


def get_inputs():
    return [torch.randn({numel})]


def get_init_inputs():
    return []
'''


def big_task(scale: int, numel: int) -> Task:
    source = BIG_TASK.format(scale=scale, numel=numel)
    check_task_source(source)
    return Task(name=f"big_{scale}", source=source)


def rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def test_the_store_evicts_whole_references_least_recently_used_first():
    store = OutputStore(budget_bytes=3000)
    for key in ("a", "b"):
        store.reserve(key, 1200)
        store.put(key, "trial:0", [torch.zeros(300)])  # 1200 bytes
    store.get("a", "trial:0")  # a is now the more recent
    store.reserve("c", 1200)
    store.put("c", "trial:0", [torch.zeros(300)])
    assert store.keys() == ["a", "c"]
    with pytest.raises(BudgetExceeded, match="need 0.00 GB, more than the judge's budget"):
        store.reserve("d", 4000)


def test_a_task_whose_outputs_exceed_the_budget_is_refused_with_what_it_needs(tmp_path):
    # (no host memory beside it: on a GPU a reference past the device's budget would go there)
    with Evaluator(work_dir=tmp_path, judge_budget_bytes=8 << 20, judge_host_budget_bytes=0) as ev:
        validation = ev.validate_task(big_task(3, 1 << 20))  # 4 MB an output, 6 outputs kept
        assert not validation.ok
        assert validation.error.error_class == "TaskTooLarge"
        assert "more than the judge's budget" in validation.error.message
        # Refused before its bytes came: what was relayed is what the judge took before it said no
        # (at most its budget), not the 28 MB the reference job sent.
        assert ev.judge.relay["bytes"] <= 8 << 20


def test_an_evicted_reference_is_measured_again_and_the_verdict_is_unchanged(tmp_path):
    source = (EXAMPLES / "kernels" / "softmax.py").read_text()
    with Evaluator(work_dir=tmp_path, judge_budget_bytes=2 << 20, judge_host_budget_bytes=0) as ev:
        softmax = example_task("softmax")
        assert ev.evaluate(softmax, source).status is Status.correct
        # A second task's reference fills the budget: the first one's is evicted from the judge.
        assert ev.validate_task(big_task(5, 1 << 16)).ok
        assert not any(key.startswith(softmax.task_id) for key in ev.judge.stats()["keys"])
        again = ev.evaluate(softmax, source + "\n# resubmitted\n")
        assert again.status is Status.correct, again.feedback()


@pytest.mark.slow
def test_the_server_process_stays_small_while_twenty_large_tasks_register(tmp_path):
    """20 tasks with 32 MB outputs (5 trials, the input and a repeat run: 224 MB a task, 4.5 GB in
    all) pass through; the server process holds none of them."""
    # (the eager baseline only: twenty torch.compile baselines would time the compiler, not the judge)
    with Evaluator(work_dir=tmp_path, judge_budget_bytes=1 << 30, max_parallel=2, baselines=("eager",)) as ev:
        assert ev.validate_task(big_task(1, 1 << 10)).ok  # start-up costs outside the measurement
        before = rss_bytes()
        peak = before
        for i in range(20):
            validation = ev.validate_task(big_task(10 + i, 8 << 20))
            assert validation.ok, validation.error
            peak = max(peak, rss_bytes())
        stats = ev.judge.stats()
    assert stats["used_bytes"] <= 1 << 30
    assert peak - before < 200 << 20, f"server RSS grew by {(peak - before) / 1e6:.0f} MB"


def test_device_memory_admits_jobs_while_they_fit_and_holds_the_rest_until_memory_is_given_back():
    import threading
    import time

    from adaexplore.evaluator.device_memory import DeviceMemory

    memory = DeviceMemory(capacity_bytes=10)
    order = []
    first = memory.reserve(6)
    first.__enter__()

    def second():
        with memory.reserve(6):
            order.append("second ran")

    waiting = threading.Thread(target=second)
    waiting.start()
    time.sleep(0.3)
    assert order == [] and memory.reserved == 6  # 6 + 6 does not fit in 10: it waits
    first.__exit__(None, None, None)
    waiting.join(5)
    assert order == ["second ran"] and memory.reserved == 0
    with memory.reserve(50):  # larger than the device: runs alone, never waits forever
        assert memory.reserved == 10


def test_small_jobs_may_pass_a_large_one_waiting_for_room_only_until_its_patience_runs_out(monkeypatch):
    from adaexplore.evaluator import device_memory
    from adaexplore.evaluator.device_memory import DeviceMemory

    monkeypatch.setattr(device_memory, "PATIENCE_S", 0.5)
    memory = DeviceMemory(capacity_bytes=10)
    order: list[str] = []
    running = memory.reserve(6)
    running.__enter__()

    def job(name: str, nbytes: int) -> threading.Thread:
        def run():
            with memory.reserve(nbytes):
                order.append(name)
        thread = threading.Thread(target=run)
        thread.start()
        return thread

    large = job("large", 8)  # 6 + 8 does not fit in 10: it waits (and once in, leaves no room for 3)
    time.sleep(0.1)
    job("small, early", 3).join(5)  # fits beside the running job: it may pass the large one
    time.sleep(0.6)  # the large one has now waited past its patience
    late = job("small, late", 3)
    time.sleep(0.3)
    assert order == ["small, early"]  # the late one fits, but waits behind the large one
    running.__exit__(None, None, None)
    large.join(5)
    late.join(5)
    assert order == ["small, early", "large", "small, late"] and memory.reserved == 0


def test_device_memory_estimates_from_the_reference_and_is_off_on_the_cpu():
    from adaexplore.evaluator.device_memory import DeviceMemory

    gpu = DeviceMemory(capacity_bytes=100 << 30)
    assert gpu.estimate(None, candidate=False) == 20 << 30  # unknown: a fifth of the device
    assert gpu.estimate(8 << 30, candidate=True) > gpu.estimate(8 << 30, candidate=False) > 8 << 30
    cpu = DeviceMemory(capacity_bytes=None)
    assert cpu.estimate(None, candidate=True) == 0
    with cpu.reserve(1 << 40):
        assert cpu.reserved == 0


def test_a_job_run_alone_waits_for_every_other_and_no_newcomer_overtakes_it():
    import threading
    import time

    from adaexplore.evaluator.device_memory import ALONE, DeviceMemory

    memory = DeviceMemory(capacity_bytes=10)
    order = []
    running = memory.reserve(3)
    running.__enter__()

    def job(name, nbytes):
        with memory.reserve(nbytes):
            order.append(name)

    alone = threading.Thread(target=job, args=("alone", ALONE))
    alone.start()
    time.sleep(0.2)
    newcomer = threading.Thread(target=job, args=("newcomer", 2))  # would fit, but must not overtake
    newcomer.start()
    time.sleep(0.3)
    assert order == []
    running.__exit__(None, None, None)
    alone.join(5)
    newcomer.join(5)
    assert order == ["alone", "newcomer"] and memory.reserved == 0


def test_the_store_evicts_the_oldest_reference_not_in_use():
    store = OutputStore(budget_bytes=3 * 400)
    for key in ("a", "b", "c"):
        store.reserve(key, 400)
        store.put(key, "trial:0", [torch.zeros(100)])  # 400 bytes each
    store.reserve("d", 400, in_use=frozenset({"a"}))  # "a" is the oldest, but in use: "b" goes
    assert "a" in store and "b" not in store and "c" in store


def test_a_reference_with_no_room_on_the_device_beside_tasks_in_use_goes_to_host_memory():
    store = OutputStore(budget_bytes=1000, host_budget_bytes=2000)
    store.reserve("busy", 800)
    store.put("busy", "trial:0", [torch.zeros(200)])
    assert store.reserve("new", 600, in_use=frozenset({"busy"})) == torch.device("cpu")
    store.put("new", "trial:0", [torch.zeros(150)])
    assert store.place_of("busy") == "device" and store.place_of("new") == "host"
    assert store.used_on("device") == 800 and store.used_on("host") == 600
    assert store.room_beside(frozenset({"busy", "new"})) == 1400  # the larger room of the two places


def test_a_reference_that_outgrows_the_device_share_while_stored_keeps_its_slots_there_and_puts_the_next_in_host_memory():
    store = OutputStore(budget_bytes=1000, host_budget_bytes=2000)
    store.reserve("busy", 400)
    store.put("busy", "trial:0", [torch.zeros(100)])
    store.reserve("grows", 400, in_use=frozenset({"busy"}))
    store.put("grows", "trial:0", [torch.ones(100)])
    assert store.place_of("grows") == "device"
    store.reserve("grows", 400, in_use=frozenset({"busy", "grows"}))  # 800 beside 400: not on the device
    store.put("grows", "trial:1", [torch.ones(100)])
    assert store.place_of("grows") == "host" and torch.equal(store.get("grows", "trial:0")[0], torch.ones(100))
    assert store.used_on("device") == 800 and store.used_on("host") == 400
    # its next slot does not go back to the device, though there is room there now
    store.put("grows", "trial:0", [])
    assert store.reserve("grows", 400, in_use=frozenset({"busy", "grows"})) == torch.device("cpu")
    store.put("grows", "trial:2", [torch.ones(100)])
    assert store.used_on("device") == 400 and store.used_on("host") == 800
    store.drop("grows")
    assert store.used_on("device") == 400 and store.used_on("host") == 0


def test_a_reference_larger_than_either_place_but_not_both_is_kept_across_them_and_only_a_larger_one_is_refused():
    store = OutputStore(budget_bytes=1000, host_budget_bytes=800)
    for i in range(4):  # 4 x 400 bytes: neither place holds them alone
        store.reserve("big", 400)
        store.put("big", f"trial:{i}", [torch.full((100,), float(i))])
    assert store.used_on("device") == 800 and store.used_on("host") == 800
    assert all(torch.equal(store.get("big", f"trial:{i}")[0], torch.full((100,), float(i))) for i in range(4))
    with pytest.raises(BudgetExceeded):
        store.reserve("big", 400)  # 2000 bytes: more than both places together
    with pytest.raises(BudgetExceeded):
        store.reserve("huge", 1200)  # one slot larger than every place
    with pytest.raises(BudgetExceeded):
        store.reserve("big", 100)  # fits the budgets together, but no place it may still use has room


def test_idle_references_are_evicted_from_the_place_that_needs_the_room_and_only_a_reference_too_large_for_both_is_refused():
    store = OutputStore(budget_bytes=1000, host_budget_bytes=2000)
    store.reserve("busy", 800)
    store.put("busy", "trial:0", [torch.zeros(200)])
    for key in ("old", "newer"):
        store.reserve(key, 900, in_use=frozenset({"busy"}))
        store.put(key, "trial:0", [torch.zeros(225)])
    assert store.keys() == ["busy", "old", "newer"] and store.place_of("old") == "host"
    store.reserve("third", 900, in_use=frozenset({"busy"}))  # host memory is full: its oldest idle one goes
    assert "old" not in store and "newer" in store and "busy" in store
    with pytest.raises(BudgetExceeded, match="more than the judge's budget of 0.00 GB and 0.00 GB in host memory"):
        store.reserve("huge", 2500)
    with pytest.raises(BudgetBusy):  # fits host memory alone, but that is held by a task in use
        store.reserve("held", 1500, in_use=frozenset({"busy", "newer"}))


OOM_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB")


def get_inputs():
    return [torch.rand(8)]


def get_init_inputs():
    return []
'''


def test_a_job_that_ran_out_of_device_memory_beside_others_runs_again_alone(admitting_evaluator):

    ev = admitting_evaluator
    task = Task(name="oom", source=OOM_TASK)
    check_task_source(task.source)
    validation = ev.validate_task(task)
    assert not validation.ok and validation.error.error_class == "TaskTooLarge"
    assert validation.error.message.startswith("the task does not fit this device: its reference ran out of "
                                               "memory even with the device to itself (8.6 GB")
    assert "Tried to allocate 4.00 GiB" in validation.error.message
    runs = [t for t in ev.trace if t["kind"] == "reference"]
    assert [r["alone"] for r in runs] == [0.0, 1.0]  # once beside others, then with the device to itself


def test_a_reference_that_cudnn_failed_inside_beside_others_runs_again_alone_before_the_task_is_blamed(admitting_evaluator):

    ev = admitting_evaluator
    source = OOM_TASK.replace('torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB")',
                              'RuntimeError("cuDNN error: CUDNN_STATUS_INTERNAL_ERROR")')
    task = Task(name="cudnn", source=source)
    check_task_source(task.source)
    validation = ev.validate_task(task)
    assert not validation.ok and "CUDNN_STATUS_INTERNAL_ERROR" in validation.error.message
    runs = [t for t in ev.trace if t["kind"] == "reference"]
    assert [r["alone"] for r in runs] == [0.0, 1.0]  # alone, it failed the same way: the task's


def test_a_reference_that_finds_the_judge_full_of_references_in_use_waits_and_is_not_blamed_on_the_task():
    store = OutputStore(budget_bytes=1000)
    store.reserve("busy", 800)
    store.put("busy", "trial:0", [torch.zeros(200)])
    store.reserve("new", 100)
    store.put("new", "trial:0", [torch.zeros(25)])
    from adaexplore.evaluator.judge.reference_store import BudgetBusy

    with pytest.raises(BudgetBusy, match="held by the references of tasks in use") as turned_away:
        store.reserve("new", 400, in_use=frozenset({"busy"}))
    assert turned_away.value.need_bytes == 500  # 100 stored, 400 more asked for: it needs at least that
    assert store.room_beside(frozenset({"busy"})) == 200 < 500  # what it may have while "busy" is in use
    assert store.keys() == ["busy"]  # what the waiting task stored so far was given back
    store.reserve("new", 400)  # once "busy" is no longer in use, it may go
    assert store.keys() == []


def test_the_timing_of_a_task_reserves_more_than_its_reference_and_a_candidate_more_still():
    from adaexplore.evaluator.device_memory import DeviceMemory

    memory = DeviceMemory(capacity_bytes=100 << 30)
    peak = 4 << 30
    ref, timing = memory.estimate(peak, candidate=False), memory.estimate(peak, candidate=False, timing=True)
    assert peak < ref < timing < memory.estimate(peak, candidate=True, timing=True)


def test_the_torch_compile_baseline_reserves_what_the_references_own_timing_does(admitting_evaluator):
    ev = admitting_evaluator
    ev.runner.peaks["k"] = 2 << 30
    eager = ev.runner._reservation(job_spec("timing", judge_key="k"))
    assert ev.runner._reservation(job_spec("timing", judge_key="k", compile=True)) == eager
    assert ev.runner._reservation(job_spec("timing", judge_key="k", candidate_source="...")) > eager


def test_registering_a_task_too_large_for_the_device_says_so_and_does_not_call_the_task_broken(tmp_path):
    from adaexplore.server.core.config import ServerConfig
    from adaexplore.server.core.errors import InvalidRequest
    from adaexplore.server.face.app import build_server

    with Evaluator(work_dir=tmp_path / "ev", judge_budget_bytes=8 << 20, judge_host_budget_bytes=0) as ev:
        _, svc = build_server(ServerConfig(data_dir=tmp_path / "data", seed=0), evaluator=ev)
        try:
            with pytest.raises(InvalidRequest) as caught:
                svc.tasks.register_task(source=big_task(3, 1 << 20).source, path=None, name="big", search=None,
                                        protocol=None, caller="t")
        finally:
            svc.close()
        message = str(caught.value)
        assert message.startswith("task too large for this server:") and "more than the judge's budget" in message
        assert "bad task" not in message


def test_a_reference_waits_for_room_beside_tasks_in_use_and_in_the_end_may_evict_them(tmp_path, monkeypatch):
    import adaexplore.evaluator.reference_keeper as reference_keeper

    monkeypatch.setattr(reference_keeper, "JUDGE_WAIT_S", 1.0)
    with Evaluator(work_dir=tmp_path, judge_budget_bytes=9 << 20, judge_host_budget_bytes=0, trace=True) as ev:
        # Here the reference tries and is turned away: on a GPU its count on the meta device would
        # make it wait before trying at all (tests/evaluator/test_footprint.py has that).
        monkeypatch.setattr(ev.references, "_large_keeps", lambda task, protocol, key: 0)
        first, second = big_task(2, 1 << 18), big_task(3, 1 << 18)
        assert ev.validate_task(first).ok
        used = ev.judge.stats()["used_bytes"]
        assert used <= 9 << 20 < 2 * used  # one fits, two do not
        with ev.runner.in_use.hold(ev.judge_key(first, first.protocol)):  # work on the first is in flight
            assert ev.validate_task(second).ok
        runs = [t for t in ev.trace if t["kind"] == "reference"]
        assert len(runs) == 3  # the first; the second turned away, then let in once the wait was over
        assert ev.judge.stats()["keys"] == [ev.judge_key(second, second.protocol)]


def test_a_reference_with_no_room_in_the_judges_device_share_is_kept_in_host_memory_without_waiting(tmp_path):
    with Evaluator(work_dir=tmp_path, judge_budget_bytes=9 << 20, judge_host_budget_bytes=64 << 20,
                   trace=True) as ev:
        first, second = big_task(2, 1 << 18), big_task(3, 1 << 18)
        assert ev.validate_task(first).ok
        with ev.runner.in_use.hold(ev.judge_key(first, first.protocol)):  # work on the first is in flight
            assert ev.validate_task(second).ok
            stats = ev.judge.stats()
            result = ev.evaluate(second, WRONG_SCALE)
        assert len([t for t in ev.trace if t["kind"] == "reference"]) == 2  # neither was turned away
        assert stats["used_bytes"] <= 9 << 20 and stats["host_used_bytes"] > 0
        assert set(stats["keys"]) == {ev.judge_key(t, t.protocol) for t in (first, second)}
        # judged against the reference in host memory
        assert result.status is Status.wrong_output and result.mismatch is not None, result.feedback()
        assert result.mismatch.expected == pytest.approx(result.mismatch.got * 1.5 - 0.5, abs=1e-5)


WRONG_SCALE = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def affine(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0 + 1.0, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        affine[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
'''


def _judge_end_of(client):
    """A stand-in judge socket for a JudgeClient: what it is sent can be read back."""
    import socket

    ours, theirs = socket.socketpair()
    client._sock = ours
    client._ready.set()
    return theirs


def test_bytes_buffered_in_a_workers_pipe_go_to_the_judge_intact_and_untouched_by_this_process():
    from adaexplore.evaluator.judge import client as judge_client
    from adaexplore.evaluator.sandbox import wire

    client = judge_client.JudgeClient("cpu", 1 << 20)
    judge_end = _judge_end_of(client)
    payload = os.urandom(60_000)  # within a pipe's default 64 KiB, so it is all buffered
    r, w = os.pipe()
    os.write(w, payload)
    client.send_from({"op": "chunk", "req": "r1", "index": 0, "offset": 0}, r, len(payload))
    head, blobs = next(wire.receive_messages(judge_end))
    assert head == {"op": "chunk", "req": "r1", "index": 0, "offset": 0} and bytes(blobs[0]) == payload
    assert judge_client._splice_works[0] == hasattr(os, "splice")  # the kernel moved them (Linux)
    os.close(r), os.close(w)


def test_a_pipe_that_ends_short_of_what_was_promised_drops_the_judges_connection_instead_of_garbling_it():
    from adaexplore.evaluator.judge import client as judge_client

    client = judge_client.JudgeClient("cpu", 1 << 20)
    judge_end = _judge_end_of(client)
    r, w = os.pipe()
    os.write(w, b"x" * 10)
    os.close(w)
    with pytest.raises(judge_client.JudgeError, match="ended inside a piece"):
        client.send_from({"op": "chunk", "req": "r1", "index": 0, "offset": 0}, r, 100)
    judge_end.settimeout(5)
    received = b""
    while chunk := judge_end.recv(1 << 16):  # the judge sees its connection end, not a short frame
        received += chunk
    promised = int.from_bytes(received[:8], "little")  # the frame's length prefix
    assert 0 < len(received) - 8 < promised
    os.close(r)


def test_a_job_whose_outputs_the_judge_had_no_device_memory_for_runs_again_alone_and_starts_its_store_afresh(
        admitting_evaluator, monkeypatch):
    from adaexplore.evaluator.sandbox.pool import WorkerResult

    ev = admitting_evaluator
    judge_ran_out = {"req": "r1", "error": "the judge ran out of device memory: CUDA out of memory", "ours": True,
                     "oom": True}
    results = [WorkerResult(0, None, False, 0.1, "", messages=[({"kind": "trial"}, [judge_ran_out])]),
               WorkerResult(0, None, False, 0.1, "", messages=[({"kind": "done"}, [])])]
    dropped: list[str] = []
    uncounted = WorkerResult(0, None, False, 0.1, "", messages=[({"kind": "done"}, [])])  # no footprint
    monkeypatch.setattr(ev.pool, "run", lambda job, timeout_s, sink=None, ring=None, stall=None:
                        uncounted if job["kind"] == "footprint" else results.pop(0))
    monkeypatch.setattr(ev.judge, "drop", dropped.append)
    res = ev.runner.run(job_spec("reference", judge_key="k1"), 10.0)
    assert res.messages == [({"kind": "done"}, [])]  # the second run's
    assert [r["alone"] for r in ev.trace if r["kind"] == "reference"] == [0.0, 1.0]
    assert dropped == ["k1"]  # its partial store went before it ran alone



def test_references_turned_away_by_the_judge_take_turns_first_come_first_served():
    from adaexplore.evaluator.judge.client import KeysInUse

    keys, events = KeysInUse(), []

    def turned_away(name: str, stay_s: float) -> None:
        with keys.queue() as turn:
            turn.wait(60.0)
            events.append(f"{name} tries")
            time.sleep(stay_s)  # its reference runs; the next in line does not try meanwhile
            events.append(f"{name} done")

    with keys.hold("busy task"):
        first = threading.Thread(target=turned_away, args=("first", 0.3))
        first.start()
        time.sleep(0.1)
        second = threading.Thread(target=turned_away, args=("second", 0.0))
        second.start()
        time.sleep(0.3)
        assert events == []  # neither tries while the task in use holds the room
    first.join(5)
    second.join(5)
    assert events == ["first tries", "first done", "second tries", "second done"]


def test_a_reference_first_in_line_with_no_task_ending_stops_waiting_after_its_patience():
    from adaexplore.evaluator.judge.client import KeysInUse

    keys = KeysInUse()
    with keys.hold("busy task"), keys.queue() as turn:
        t0 = time.monotonic()
        turn.wait(0.3)
        assert 0.3 <= time.monotonic() - t0 < 5 and turn.waited_first_s() >= 0.3  # now it may evict


def test_a_reference_turned_away_tries_again_only_once_the_room_it_lacked_is_free(tmp_path, monkeypatch):
    import contextlib

    import adaexplore.evaluator.reference_keeper as reference_keeper

    monkeypatch.setattr(reference_keeper, "JUDGE_WAIT_S", 60.0)  # no eviction here: only the room decides
    with Evaluator(work_dir=tmp_path, judge_budget_bytes=9 << 20, judge_host_budget_bytes=0, trace=True) as ev:
        # Here the reference tries and is turned away: on a GPU its count on the meta device would
        # make it wait before trying at all (tests/evaluator/test_footprint.py has that).
        monkeypatch.setattr(ev.references, "_large_keeps", lambda task, protocol, key: 0)
        first, small, second = big_task(2, 1 << 18), big_task(4, 1 << 8), big_task(3, 1 << 18)
        assert ev.validate_task(first).ok and ev.validate_task(small).ok

        def reference_runs() -> int:
            return sum(1 for t in ev.trace if t["kind"] == "reference")

        result: dict = {}
        with contextlib.ExitStack() as first_in_use:
            first_in_use.enter_context(ev.runner.in_use.hold(ev.judge_key(first, first.protocol)))
            with ev.runner.in_use.hold(ev.judge_key(small, small.protocol)):
                waiter = threading.Thread(target=lambda: result.update(validation=ev.validate_task(second)))
                waiter.start()
                deadline = time.monotonic() + 120
                while reference_runs() < 3 and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert reference_runs() == 3  # the second's first try, turned away
            time.sleep(1.0)  # the small task's work ended, but it left too little room
            assert reference_runs() == 3 and waiter.is_alive()
        waiter.join(120)  # the first task's work ended: now it fits
        assert result["validation"].ok and reference_runs() == 4
