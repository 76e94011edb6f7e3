"""The worker pool's process plumbing: direct result pipes, the timing gate, limits, escapes."""

import os
import signal
import threading
import time
import uuid

import pytest
from conftest import EXAMPLES

from adaexplore.evaluator.results import EvalProtocol
from adaexplore.evaluator.sandbox import confine, procs, wire
from adaexplore.evaluator.sandbox.confine import Plan
from adaexplore.evaluator.sandbox.pool import WorkerPool, decode_messages
from adaexplore.evaluator.verdict import candidate_failure

SOFTMAX_TASK = (EXAMPLES / "tasks" / "softmax.py").read_text()
SOFTMAX_KERNEL = (EXAMPLES / "kernels" / "softmax.py").read_text()
PROTOCOL = EvalProtocol(warmup_runs=1, timed_runs=3, timeout_s=60).model_dump(mode="json")


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    p = WorkerPool(interpret=True, work_dir=str(tmp_path_factory.mktemp("pool")))
    yield p
    p.close()


def job(kind, **extra):
    return {"kind": kind, "task_source": SOFTMAX_TASK, "protocol": PROTOCOL, "device": "cpu", **extra}


def submit_gated(pool, timeout_s):
    """A timing job, returned once it waits at its gate."""
    ready = threading.Event()
    submitted = pool.submit(job("timing", candidate_source=SOFTMAX_KERNEL), timeout_s, on_ready=ready.set)
    submitted.future.add_done_callback(lambda _f: ready.set())
    assert ready.wait(60) and not submitted.future.done(), \
        submitted.future.result() if submitted.future.done() else "never ready"
    return submitted


def submit_ticker(pool, marker, timeout_s):
    """A candidate that appends a byte to `marker` every 20 ms, 200 times; returned once ticking."""
    ticker = f"""
import time
for _ in range(200):
    with open({marker!r}, "a") as fh:
        fh.write("x")
    time.sleep(0.02)
"""
    # The one place outside its sandbox a worker may write is a directory the job names, handed
    # over to the sandbox's uid.
    confine.hand_over(os.path.dirname(marker))
    sandbox = Plan(writable=[os.path.dirname(marker)]).to_job()
    submitted = pool.submit(job("candidate", candidate_source=ticker + SOFTMAX_KERNEL, sandbox=sandbox), timeout_s)
    deadline = time.monotonic() + 30
    while not os.path.exists(marker) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.5)
    return submitted


@pytest.fixture
def marker(tmp_path):
    return str(tmp_path / f"ticks-{uuid.uuid4().hex}")


def test_gated_job_waits_for_the_gate_and_its_wait_is_not_counted(pool):
    # 12 s of limit for the setup; the job then waits 14 s at its gate, which must not count.
    submitted = submit_gated(pool, 12.0)
    time.sleep(14)
    assert not submitted.future.done()  # nothing is measured before the gate opens
    pool.open_gate(submitted.job_id)
    res = submitted.future.result(timeout=60)
    assert not res.timed_out and res.exit_code == 0, res.output_tail
    head, outputs = res.first("timing")
    assert len(head["event_ms"]) == 3 and outputs[0].shape == (64, 256)


def test_paused_jobs_stop_and_their_clock_stops_with_them(pool, marker):
    """While a timing measures, the evaluator pauses the other jobs: their processes make no
    progress, and the pause does not count against their time limits."""
    # 4 s of work under a 7 s limit, paused for 5 s on the way: it must still finish.
    submitted = submit_ticker(pool, marker, 7.0)
    pool.pause()
    size = os.path.getsize(marker)
    time.sleep(5.0)
    assert os.path.getsize(marker) == size  # stopped: not one more tick
    assert not submitted.future.done()
    pool.resume()
    res = submitted.future.result(timeout=60)
    assert not res.timed_out and res.exit_code == 0, res.output_tail
    assert os.path.getsize(marker) > size
    assert candidate_failure(res) is None


def test_pause_spares_the_job_about_to_be_measured(pool, marker):
    ticking = submit_ticker(pool, marker, 60)
    timed = submit_gated(pool, 60)
    pool.pause(keep=timed.job_id)
    try:
        size = os.path.getsize(marker)
        pool.open_gate(timed.job_id)
        res = timed.future.result(timeout=60)  # it measures while the other job is stopped
        assert os.path.getsize(marker) == size
    finally:
        pool.resume()
    assert res.exit_code == 0 and res.first("timing") is not None, res.output_tail
    assert ticking.future.result(timeout=60).exit_code == 0


def test_pausing_a_pool_whose_warm_parent_is_not_running_returns_at_once(tmp_path):
    idle = WorkerPool(interpret=True, work_dir=str(tmp_path))
    try:
        started = time.monotonic()
        idle.pause()
        idle.resume()
        assert time.monotonic() - started < 1.0
        assert idle.warm_parent_pid() is None  # nor did it start one to pause
    finally:
        idle.close()


def caught_signals(pid: int) -> int:
    """The mask of signals a process has handlers for (/proc's SigCgt)."""
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1], 16) for line in fh if line.startswith("SigCgt:"))


@pytest.mark.skipif(confine.probe()[0] != confine.LEVEL_FULL, reason="namespaces cannot be made here")
def test_a_pause_landing_while_the_sandbox_forks_the_job_is_lifted_for_the_job_too(tmp_path):
    """The kernel hands a stop or a continue that arrives during a fork on to the new process
    only if the forking process does not ignore it, and a namespace's first process ignores all
    it has no handler for but SIGKILL and SIGSTOP. So the first process handles SIGCONT, or a
    pause landing on its fork of the job would leave the job stopped until its time limit;
    the job itself is given the default back."""
    outer = os.fork()
    if outer == 0:
        code = 3
        try:
            os.setsid()
            confine.enter(Plan(writable=[str(tmp_path)]))
            time.sleep(30)
            code = 0
        finally:
            os._exit(code)
    try:
        deadline = time.monotonic() + 10
        first = job_pid = None
        while job_pid is None and time.monotonic() < deadline:
            first = next(iter(procs.children_of(outer)), None)
            job_pid = next(iter(procs.children_of(first)), None) if first else None
            time.sleep(0.01)
        assert first and job_pid, "the sandbox never started the job"
        sigcont = 1 << (signal.SIGCONT - 1)
        assert caught_signals(first) & sigcont
        assert not caught_signals(job_pid) & sigcont
    finally:
        os.killpg(outer, signal.SIGKILL)
        os.waitpid(outer, 0)


def test_ungated_jobs_run_straight_through(pool):
    res = pool.run(job("reference"), 60)
    assert res.first("done") is not None and len(res.all("trial")) == 5


def test_a_warm_parent_started_from_a_short_lived_thread_outlives_that_thread(tmp_path):
    # The warm parent asks to die with its parent thread; a server's worker threads end when idle.
    p = WorkerPool(interpret=True, work_dir=str(tmp_path))
    try:
        starter = threading.Thread(target=p.ensure_started)
        starter.start()
        starter.join()
        pid = p.warm_parent_pid()
        assert pid is not None
        res = p.run(job("candidate", candidate_source=SOFTMAX_KERNEL), 60)
        assert res.exit_code == 0, res.output_tail
        assert p.warm_parent_pid() == pid  # the same process: it was never lost and restarted
    finally:
        p.close()


def test_results_over_the_size_limit_are_cut_off_and_the_process_killed(tmp_path):
    small = WorkerPool(interpret=True, work_dir=str(tmp_path), max_result_bytes=200_000)
    try:
        # The reference alone reports 5 trials of 64 KB plus inputs: over 200 KB.
        res = small.run(job("reference"), 60)
        assert res.overflow and res.messages == []
        assert candidate_failure(res)["error"].error_class == "OutputTooLarge"
        # The pool is still usable for a job that fits.
        ok = small.run(job("candidate", candidate_source="raise SystemExit\n"), 60)
        assert not ok.overflow
    finally:
        small.close()


def test_a_detached_grandchild_neither_holds_the_result_nor_outlives_the_candidate(pool, tmp_path):
    """A candidate that leaves a detached process behind (its own session, every descriptor
    inherited) still gets its result as soon as its own process ends, and the process it left
    dies with it: it lives in the job's PID namespace, which ends with the job."""
    marker = tmp_path / "escapee-ticks"
    escapee = f'''
import os, time
if os.fork() == 0:
    os.setsid()
    while True:
        with open({str(marker)!r}, "a") as fh:
            fh.write("x")
        time.sleep(0.05)
'''
    confine.hand_over(tmp_path)  # the sandbox's uid writes there
    sandbox = Plan(writable=[str(tmp_path)]).to_job()
    submitted = pool.submit(job("candidate", candidate_source=escapee + SOFTMAX_KERNEL, sandbox=sandbox), 60)
    res = submitted.future.result(timeout=45)
    assert res.first("done") is not None and len(res.all("trial")) == 5
    assert marker.exists()  # it ran
    time.sleep(0.5)
    size = marker.stat().st_size
    time.sleep(1.0)
    assert marker.stat().st_size == size, "the detached process still runs after its job ended"


def test_written_messages_decode_in_place_when_aligned():
    import torch

    r, w = os.pipe()
    x = torch.arange(20_000, dtype=torch.float32).reshape(100, 200)
    y = torch.ones(3, dtype=torch.bfloat16)
    pid = os.fork()
    if pid == 0:  # the writer, like a worker
        os.close(r)
        wire.write_message(w, {"kind": "a"})
        wire.write_message(w, {"kind": "b", "tensors": [wire.encode_tensor(x)[0], wire.encode_tensor(y)[0]]},
                           [wire.encode_tensor(x)[1], wire.encode_tensor(y)[1]])
        os._exit(0)
    os.close(w)
    buf = bytearray()
    while chunk := os.read(r, 1 << 16):
        buf += chunk
    os.close(r)
    os.waitpid(pid, 0)
    assert len(buf) % wire.ALIGN == 0
    messages, err, truncated = decode_messages(memoryview(buf))
    assert err is None and not truncated and [h["kind"] for h, _ in messages] == ["a", "b"]
    got_x, got_y = messages[1][1]
    assert torch.equal(got_x, x) and torch.equal(got_y, y)
    base = memoryview(buf)
    start = torch.frombuffer(base, dtype=torch.uint8).data_ptr()
    assert start <= got_x.data_ptr() < start + len(buf)  # a view of the receive buffer, not a copy


def test_a_normal_close_is_silent_even_when_the_connection_resets_but_a_real_loss_is_an_error(
        tmp_path, monkeypatch, caplog):
    import logging
    import socket

    from adaexplore.evaluator.sandbox import pool as pool_mod

    def reset(_sock):
        raise ConnectionResetError(104, "Connection reset by peer")
        yield  # a generator, like wire.receive_messages

    monkeypatch.setattr(pool_mod.wire, "receive_messages", reset)
    p = WorkerPool(interpret=True, work_dir=str(tmp_path))
    a, b = socket.socketpair()
    try:
        with caplog.at_level(logging.DEBUG):
            p._closed = True  # as close() leaves it
            p._read_loop(None, a)
            assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
            p._closed = False  # the parent vanished while the pool was in use
            p._read_loop(None, a)
            assert any(r.levelno == logging.ERROR and "lost the evaluator's warm parent" in r.getMessage()
                       for r in caplog.records)
    finally:
        a.close()
        b.close()
