"""Outputs reach the judge through each job's ring: intact, in order, and out of reach of every
other job; a worker that abuses its ring harms only its own verdict."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
import torch
from conftest import EXAMPLES, example_task, gpu

from adaexplore.common.vocab import JudgeOp, Status
from adaexplore.evaluator.evaluator import Evaluator
from adaexplore.evaluator.judge.process import Judge
from adaexplore.evaluator.sandbox import procs, ring, wire

SOFTMAX = (EXAMPLES / "kernels" / "softmax.py").read_text()


# --- the judge's end, driven directly ------------------------------------------------------

class JudgeAtHand:
    """A judge in this process (CPU), its replies read back, and one ring mapped as a worker would."""

    def __init__(self) -> None:
        self.sock, theirs = socket.socketpair()
        self.fds, fds_theirs = socket.socketpair()
        self.judge = Judge("cpu", 1 << 30, theirs, 0, fds_theirs)
        self.replies = wire.receive_messages(self.sock)
        self.n = 0

    def ask(self, head: dict) -> dict:
        self.n += 1
        req = head.get("req") or f"q{self.n}"
        self.judge.handle({**head, "req": req}, [])
        return next(self.replies)[0]

    def send(self, head: dict) -> None:
        self.judge.handle(head, [])

    def open_ring(self):
        answer = self.ask({"op": JudgeOp.ring_open, "req": "ring-1"})
        data, fds, _, _ = socket.recv_fds(self.fds, 256, 2)
        assert data == b"ring-1" and len(fds) == 2
        geometry = ring.Geometry.from_job(answer["geometry"])
        return answer["ring"], geometry, ring.attach(fds[0], geometry), fds[1]


def put_pieces(judge: JudgeAtHand, ring_id, geometry, memory, credit, req, data: torch.Tensor) -> int:
    """Send `data` through the ring as the worker does; returns the credits it got back."""
    raw = data.reshape(-1).view(torch.uint8)
    credits = 0
    for k, start in enumerate(range(0, raw.numel(), geometry.slot_bytes)):
        n = min(geometry.slot_bytes, raw.numel() - start)
        slot = k % geometry.slots
        memory.slot(slot, n).copy_(raw[start:start + n])
        judge.send({"op": JudgeOp.piece, "req": req, "ring": ring_id, "index": 0, "offset": start, "n": n,
                    "slot": slot})
        credits += len(os.read(credit, 1))
    return credits


def test_a_reference_stored_through_a_ring_arrives_intact_and_every_slot_comes_back():
    j = JudgeAtHand()
    ring_id, geometry, memory, credit = j.open_ring()
    data = torch.randn(5_000_000)  # 20 MB: three slots' worth, so slots are reused
    metas = [{"dtype": "float32", "shape": [data.numel()]}]
    assert j.ask({"op": JudgeOp.begin, "req": "t1", "key": "k", "slot": "trial:0", "mode": "store",
                  "metas": metas})["accepted"]
    assert put_pieces(j, ring_id, geometry, memory, credit, "t1", data) == 3
    assert j.ask({"op": JudgeOp.end, "req": "t1"}) == {"req": "t1", "stored": True}
    assert torch.equal(j.judge.store.get("k", "trial:0")[0], data)

    # compared through the same ring: an honest copy passes, a changed element is found where it is
    close = data + 1e-4
    j.send({"op": JudgeOp.begin, "req": "c1", "key": "k", "slot": "trial:0", "mode": "compare", "metas": metas})
    put_pieces(j, ring_id, geometry, memory, credit, "c1", close)
    assert j.ask({"op": JudgeOp.end, "req": "c1"})["verdict"]["status"] == "correct"
    wrong = data.clone()
    wrong[4_321_000] += 5.0
    j.send({"op": JudgeOp.begin, "req": "c2", "key": "k", "slot": "trial:0", "mode": "compare", "metas": metas})
    put_pieces(j, ring_id, geometry, memory, credit, "c2", wrong)
    verdict = j.ask({"op": JudgeOp.end, "req": "c2"})["verdict"]
    assert verdict["status"] == "wrong_output" and verdict["mismatch"]["index"] == [4_321_000]
    assert j.judge.stats()["ring_bytes_in"] == 3 * data.numel() * 4


def test_a_piece_out_of_order_fails_only_its_transfer_and_its_slot_still_comes_back():
    j = JudgeAtHand()
    ring_id, geometry, memory, credit = j.open_ring()
    metas = [{"dtype": "float32", "shape": [1024]}]
    assert j.ask({"op": JudgeOp.begin, "req": "t1", "key": "k", "slot": "trial:0", "mode": "store",
                  "metas": metas})["accepted"]
    j.judge.handle({"op": JudgeOp.piece, "req": "t1", "ring": ring_id, "index": 0, "offset": 64, "n": 64,
                    "slot": 0}, [])
    assert "error" in next(j.replies)[0]
    assert os.read(credit, 1) == b"c"  # the worker is never left waiting
    j.send({"op": JudgeOp.piece, "ring": ring_id, "slot": 1})  # a piece nobody takes: only handed back
    assert os.read(credit, 1) == b"c"
    assert j.ask({"op": JudgeOp.stats})["stats"]["rings_open"] == 1  # and the judge serves on


def test_a_job_that_reads_none_of_its_credits_never_blocks_the_judge():
    j = JudgeAtHand()
    ring_id, _geometry, _memory, credit = j.open_ring()
    for _ in range(70_000):  # more credits than its pipe holds, none read: the writes that fail are dropped
        j.send({"op": JudgeOp.piece, "ring": ring_id, "slot": 0})
    os.close(credit)  # and once the job is gone, handing a slot back is no error either
    j.send({"op": JudgeOp.piece, "ring": ring_id, "slot": 0})
    j.send({"op": JudgeOp.ring_close, "ring": ring_id})
    assert j.ask({"op": JudgeOp.stats})["stats"]["rings_open"] == 0


def test_past_its_limit_of_open_rings_the_judge_refuses_one_and_says_why(monkeypatch):
    from adaexplore.evaluator.judge import process

    monkeypatch.setattr(process, "MAX_RINGS", 1)
    j = JudgeAtHand()
    j.open_ring()
    answer = j.ask({"op": JudgeOp.ring_open})
    assert "ring" not in answer and "too many" in answer["error"]


# --- through the evaluator ---------------------------------------------------------------

@pytest.fixture(scope="module")
def ringed(tmp_path_factory):
    ev = Evaluator(work_dir=tmp_path_factory.mktemp("ringed"), baselines=("eager",))
    yield ev
    ev.close()


def test_every_output_of_a_reference_and_a_candidate_goes_through_a_ring_and_every_ring_is_freed(ringed):
    task = example_task("softmax")
    assert ringed.validate_task(task).ok
    before = ringed.judge.stats()["ring_bytes_in"]
    assert ringed.evaluate(task, SOFTMAX).status is Status.correct
    stats = ringed.judge.stats()
    assert stats["ring_bytes_in"] - before >= 5 * 64 * 256 * 4  # the candidate's five trials
    assert stats["ring_bytes_in"] == stats["bytes_in"] and stats["rings_open"] == 0
    assert ringed.judge.ring_note is None


def test_with_rings_off_outputs_stream_and_the_verdicts_are_the_same(tmp_path, ringed):
    task = example_task("softmax")
    wrong = (EXAMPLES / "kernels" / "broken" / "wrong_output.py").read_text()
    with Evaluator(work_dir=tmp_path, baselines=("eager",), output_ring=False) as streaming:
        streamed = [streaming.evaluate(task, s) for s in (SOFTMAX, wrong)]
        assert streaming.judge.stats()["ring_bytes_in"] == 0
    ringed_results = [ringed.evaluate(task, s) for s in (SOFTMAX, wrong)]
    assert [r.status for r in streamed] == [r.status for r in ringed_results] == [Status.correct,
                                                                                  Status.wrong_output]
    assert streamed[1].mismatch == ringed_results[1].mismatch


FORGED_PIECE = SOFTMAX.replace("class ModelNew(nn.Module):", "class _Honest(nn.Module):") + '''

import gc

from adaexplore.evaluator.sandbox import wire
from adaexplore.evaluator.worker.harness import Reporter

_forged = []


class ModelNew(_Honest):
    def forward(self, x):
        out = super().forward(x)
        if not _forged:
            _forged.append(1)
            rep = next(o for o in gc.get_objects() if isinstance(o, Reporter))
            meta, _ = wire.sendable(out)
            wire.write_frame(rep.fd, wire.pack({"kind": "trial", "trial": 0, "nonce": rep.nonce, "ring": [meta]}))
            wire.write_frame(rep.fd, wire.pack({"kind": "piece", "nonce": rep.nonce, "index": 0, "offset": OFFSET,
                                                "n": PIECE_N, "slot": SLOT}))
        return out
'''


@pytest.mark.parametrize("offset, n, slot", [(64, 64, 0), (0, 3, 0), (0, 64, 99), (0, 1 << 30, 0)],
                         ids=["out of order", "splitting an element", "outside the ring", "beyond the output"])
def test_a_forged_piece_is_caught_as_a_cheat_and_the_evaluator_serves_on(ringed, offset, n, slot):
    task = example_task("softmax")
    source = FORGED_PIECE.replace("OFFSET", str(offset)).replace("PIECE_N", str(n)).replace("SLOT", str(slot))
    result = ringed.evaluate(task, source)
    assert result.status is Status.cheat_detected and "piece" in (result.cheat_reason or "")
    assert ringed.evaluate(task, SOFTMAX).status is Status.correct


FAILS_MID_FRAME = SOFTMAX + '''

from adaexplore.evaluator.sandbox import ring as _ring

_pieces = _ring.RingWriter._pieces


def _fail_after_one(self, out_fd, nonce, described, memory, stream):
    _pieces(self, out_fd, nonce, [(described[0][0], described[0][1][:64])], memory, stream)
    raise RuntimeError("lost the output halfway")


_ring.RingWriter._pieces = _fail_after_one
'''


def test_a_worker_that_fails_halfway_through_a_ring_frame_is_judged_by_the_error_it_reports(ringed):
    result = ringed.evaluate(example_task("softmax"), FAILS_MID_FRAME)
    # the frame it abandoned reads as no frame at all, not as forged data: the run is its own failure
    assert result.status is Status.runtime_error and result.error.error_class == "IncompleteRun"
    assert "lost the output halfway" in (result.stdout_tail or "")
    assert ringed.evaluate(example_task("softmax"), SOFTMAX).status is Status.correct


SCRIBBLER = SOFTMAX + '''

import gc
import threading
import time

from adaexplore.evaluator.sandbox.ring import RingWriter


def _scribble():
    writer = None
    while writer is None:
        writer = next((o for o in gc.get_objects() if isinstance(o, RingWriter)), None)
        time.sleep(0.01)
    while True:  # garbage into every slot, all the time, announced or not
        memory = writer.memory
        if memory is not None and memory.tensor is not None:
            memory.tensor.fill_(7)


threading.Thread(target=_scribble, daemon=True).start()
'''


def test_a_candidate_scribbling_on_its_ring_changes_only_its_own_verdict(ringed):
    task = example_task("softmax")
    honest_copy = SOFTMAX + "\n# a second honest submission\n"
    results: dict[str, object] = {}

    def evaluate(name: str, source: str) -> None:
        results[name] = ringed.evaluate(task, source)

    threads = [threading.Thread(target=evaluate, args=a) for a in (("scribbler", SCRIBBLER), ("honest", honest_copy))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["honest"].status is Status.correct  # type: ignore[attr-defined]
    assert results["scribbler"].status in (Status.wrong_output, Status.correct)  # type: ignore[attr-defined]
    # the reference it could have reached is intact: a later honest kernel still passes
    assert ringed.evaluate(task, SOFTMAX + "\n# later\n").status is Status.correct


# Slow in its first forward only, so that the kill lands while it runs and its timing, after
# the retry, takes the usual time.
SLOW_SOFTMAX = SOFTMAX.replace("        x = x.contiguous()", "        if not getattr(ModelNew, 'slept', False):\n"
                                                          "            import time\n            time.sleep(2.0)\n"
                                                          "            ModelNew.slept = True\n"
                                                          "        x = x.contiguous()")


def test_a_judge_killed_while_a_job_waits_on_its_ring_is_ours_and_the_retry_gives_the_verdict(tmp_path):
    task = example_task("softmax")
    with Evaluator(work_dir=tmp_path, baselines=("eager",)) as ev:
        assert ev.validate_task(task).ok
        box: list = []
        worker = threading.Thread(target=lambda: box.append(ev.evaluate(task, SLOW_SOFTMAX)))
        worker.start()
        deadline = time.monotonic() + 60
        while True:
            stats = ev.judge.stats()
            assert "rings_open" in stats, "the judge ended before it was killed"
            if stats["rings_open"] >= 1 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        os.kill(ev.judge.pid(), signal.SIGKILL)  # the candidate sleeps in its first forward meanwhile
        worker.join(180)
        assert box and box[0].status is Status.correct, box[0].model_dump() if box else "no result"


def test_a_judge_that_ended_but_has_not_yet_exited_is_replaced_at_once(tmp_path):
    task = example_task("softmax")
    with Evaluator(work_dir=tmp_path, baselines=("eager",)) as ev:
        assert ev.validate_task(task).ok
        old = ev.judge.pid()
        # As a killed GPU process can be: stopped in its teardown, its socket already closed.
        os.kill(old, signal.SIGSTOP)
        ev.judge._sock.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + 10
        while ev.judge._ready.is_set() and time.monotonic() < deadline:
            time.sleep(0.05)
        t0 = time.monotonic()
        result = ev.evaluate(task, SOFTMAX)
        assert result.status is Status.correct, result.model_dump()
        assert time.monotonic() - t0 < 60  # not the 120 s a wait for the old one's readiness takes
        assert ev.judge.pid() not in (None, old)
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{old}") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not os.path.exists(f"/proc/{old}")  # killed and reaped, not left behind


def test_a_judge_started_from_a_short_lived_thread_outlives_that_thread(tmp_path):
    # The judge asks to die with the thread that started it; a server's worker threads end when idle.
    task = example_task("softmax")
    with Evaluator(work_dir=tmp_path, baselines=("eager",)) as ev:
        starter = threading.Thread(target=ev.judge.start)
        starter.start()
        starter.join()
        pid = ev.judge.pid()
        assert pid is not None
        time.sleep(0.5)
        assert ev.evaluate(task, SOFTMAX).status is Status.correct
        assert ev.judge.pid() == pid  # the same process: it was never lost and restarted


STOPPED_JUDGE_SERVER = """
import sys, time
from adaexplore.evaluator.evaluator import Evaluator
ev = Evaluator(work_dir=sys.argv[1])
ev.judge.start()
stop = ev.judge.stop_for_measurement()
stop.__enter__()  # as while a candidate is measured: the judge is stopped
print(ev.judge.pid(), flush=True)
time.sleep(600)
"""


def test_an_evaluator_killed_outright_while_its_judge_is_stopped_leaves_no_judge_behind(tmp_path):
    server = subprocess.Popen([sys.executable, "-c", STOPPED_JUDGE_SERVER, str(tmp_path)], stdout=subprocess.PIPE,
                              text=True)
    try:
        judge = int(server.stdout.readline())  # type: ignore[union-attr]
        assert procs.state(judge) == "T"  # stopped
        server.kill()  # SIGKILL: no clean-up of its own runs
        server.wait(30)
        deadline = time.monotonic() + 30
        while os.path.exists(f"/proc/{judge}") and time.monotonic() < deadline:
            time.sleep(0.05)
        # (it was the server's child: once the server is gone, init reaps it)
        assert not os.path.exists(f"/proc/{judge}"), "a stopped judge outlived its server"
    finally:
        server.kill()


# --- on the GPU ----------------------------------------------------------------------------

ATTACH = '''
import sys, torch
from adaexplore.evaluator.sandbox import ring
g = ring.Geometry.from_job(eval(sys.argv[2]))
torch.zeros(1, device="cuda")  # the CUDA context first
memory = ring.attach(int(sys.argv[1]), g, 0)
memory.slot(1, 1 << 20).copy_(torch.arange(1 << 20, device="cuda", dtype=torch.int32).view(torch.uint8)[: 1 << 20])
torch.cuda.synchronize()
print("written")
'''


@gpu
def test_device_ring_memory_made_by_one_process_is_written_by_another_that_got_its_descriptor():
    g = ring.Geometry.for_device("cuda:0")
    memory = ring.make(g)
    assert memory.tensor.device.type == "cuda" and memory.tensor.numel() >= g.nbytes
    fd = memory.fd
    os.set_inheritable(fd, True)
    out = subprocess.run([sys.executable, "-c", ATTACH, str(fd), repr(g.to_job())], pass_fds=(fd,),
                         capture_output=True, text=True, timeout=120)
    assert "written" in out.stdout, out.stderr[-2000:]
    got = memory.slot(1, 1 << 20).clone()
    want = torch.arange(1 << 20, device="cuda", dtype=torch.int32).view(torch.uint8)[: 1 << 20]
    assert torch.equal(got, want)
    memory.close()


@gpu
def test_a_gigabyte_output_reaches_the_judge_through_device_rings(tmp_path):
    from test_judge import big_task

    task = big_task(3, 1 << 28)  # one output of 1 GiB
    with Evaluator(work_dir=tmp_path, baselines=("eager",)) as ev:
        assert ev.validate_task(task).ok
        passthrough = task.source + '''

import triton
import triton.language as tl


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


class ModelNew(Model):
    def forward(self, x):
        y = x * 3 + 1.0
        out = torch.empty_like(y)
        _copy[(triton.cdiv(y.numel(), 1024),)](y, out, y.numel(), BLOCK=1024)
        return out
'''
        result = ev.evaluate(task, passthrough)
        assert result.status in (Status.correct, Status.cheat_detected), result
        stats = ev.judge.stats()
        assert stats["ring_bytes_in"] == stats["bytes_in"] >= 10 * (1 << 30) and stats["rings_open"] == 0
