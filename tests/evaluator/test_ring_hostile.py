"""A job cannot take the judge down through its CPU ring: the ring's memfd is sealed at its size,
and where a ring shrank all the same, its pieces are refused (by the evaluator as forged, by the
judge unread) rather than read past the end of its memory, which would kill the reader."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading

import pytest
import torch
from conftest import EXAMPLES, example_task
from test_frame_limits import Taker as PipeTaker

from adaexplore.common.vocab import Kind, Status
from adaexplore.evaluator.evaluator import Evaluator
from adaexplore.evaluator.judge.client import RingLease
from adaexplore.evaluator.sandbox import ring, wire
from adaexplore.evaluator.sandbox.frames import FrameReader

SOFTMAX = (EXAMPLES / "kernels" / "softmax.py").read_text()

# The example softmax kernel, which takes its ring's memfd while it still may (the worker maps the
# ring, and closes its descriptor, on its first output), and cuts the ring to nothing each time
# it has announced a piece: the judge reads that piece next. Whatever the sandbox says, it then
# goes on honestly.
SHRINKER = SOFTMAX + '''

import os

from adaexplore.evaluator.sandbox import wire as _wire


def _ring_fd():
    for name in os.listdir("/proc/self/fd"):
        try:
            if "memfd:adaexplore-ring" in os.readlink(f"/proc/self/fd/{name}"):
                return os.dup(int(name))
        except OSError:
            pass
    return None


_FD = _ring_fd()
print("ring fd found" if _FD is not None else "no ring fd", flush=True)
_said = []
_write_frame = _wire.write_frame


def _write_then_shrink(fd, data):
    _write_frame(fd, data)
    if _FD is not None and b'"piece"' in bytes(data[:256]):
        try:
            os.ftruncate(_FD, 0)
            outcome = "ring truncated"
        except OSError as exc:  # the sandbox says no; the kernel goes on honestly
            outcome = f"ring not truncated: {type(exc).__name__}"
        if not _said:  # said once: the feedback keeps only the end of what it prints
            _said.append(outcome)
            print(outcome, flush=True)


_wire.write_frame = _write_then_shrink
'''


@pytest.fixture(scope="module")
def ringed(tmp_path_factory):
    ev = Evaluator(work_dir=tmp_path_factory.mktemp("ring-hostile"), baselines=("eager",), max_parallel=2)
    yield ev
    ev.close()


def test_a_job_that_truncates_its_ring_does_not_kill_the_judge(ringed):
    task = example_task("softmax", timeout_s=120)
    assert ringed.validate_task(task).ok
    judge = ringed.judge.pid()
    results: dict[str, object] = {}

    def evaluate(name: str, source: str) -> None:
        results[name] = ringed.evaluate(task, source)

    threads = [threading.Thread(target=evaluate, args=a)
               for a in (("shrinker", SHRINKER), ("bystander", SOFTMAX + "\n# a bystander\n"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    shrinker, bystander = results["shrinker"], results["bystander"]
    assert ringed.judge.pid() == judge, "the judge died"  # the same judge, with every reference it held
    assert bystander.status is Status.correct, bystander.feedback()  # type: ignore[attr-defined]
    assert shrinker.status is not Status.infra_error, shrinker.feedback()  # type: ignore[attr-defined]
    assert shrinker.status in (Status.correct, Status.cheat_detected)  # type: ignore[attr-defined]
    if not ringed.is_gpu:  # a GPU's ring is device memory exported as a descriptor: no file size to change
        tail = shrinker.stdout_tail or ""  # type: ignore[attr-defined]
        assert "ring fd found" in tail, tail  # the attack had its ring in hand, and was told no
        assert "ring not truncated: PermissionError" in tail, tail
    assert ringed.evaluate(task, SOFTMAX + "\n# later\n").status is Status.correct
    assert ringed.judge.pid() == judge and ringed.judge.ring_note is None  # served through rings throughout


def test_a_cpu_ring_cannot_be_shrunk_grown_or_unsealed_by_whoever_holds_its_memfd():
    g = ring.Geometry.for_device("cpu")
    memory = ring.make(g)
    try:
        fd = memory.fd
        for size in (0, g.nbytes - 1, g.nbytes + 4096):
            with pytest.raises(PermissionError):
                os.ftruncate(fd, size)
        with pytest.raises(PermissionError):  # no further seal either (one on writes would stop the job)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)
        assert os.fstat(fd).st_size == g.nbytes and memory.intact()
        memory.slot(1, 16).fill_(7)  # still written as before: only its size is fixed
        assert memory.slot(1, 16).tolist() == [7] * 16
    finally:
        memory.close()


def unsealed_ring(nbytes: int) -> int:
    """A ring's memfd as an unsealed one would be (no seals: a kernel that could not make them)."""
    fd = os.memfd_create("adaexplore-ring", os.MFD_CLOEXEC)
    os.ftruncate(fd, nbytes)
    return fd


class Taker(PipeTaker):
    """A receiver that notes the pieces passed on to it."""

    def __init__(self) -> None:
        self.pieces: list[tuple] = []

    def piece(self, *where) -> None:
        self.pieces.append(where)


def test_a_piece_in_a_ring_that_shrank_is_refused_as_forged_before_it_is_passed_on():
    g = ring.Geometry(slot_bytes=4096, slots=2, nbytes=8192, device="cpu")
    fd = unsealed_ring(g.nbytes)
    lease = RingLease(None, "g1", g, [fd], 0)  # type: ignore[arg-type]  # no judge: pieces go to the taker
    taker = Taker()
    reader = FrameReader("n0", sink=lambda head, metas: taker, ring=lease)
    meta, _ = wire.sendable(torch.zeros(2048))  # two slots' worth
    reader.feed(wire.pack({"kind": Kind.trial, "trial": 0, "nonce": "n0", "ring": [meta]}))
    reader.feed(wire.pack({"kind": Kind.piece, "nonce": "n0", "index": 0, "offset": 0, "n": 4096, "slot": 0}))
    assert reader.error is None and len(taker.pieces) == 1
    os.ftruncate(fd, 0)
    reader.feed(wire.pack({"kind": Kind.piece, "nonce": "n0", "index": 0, "offset": 4096, "n": 4096, "slot": 1}))
    assert reader.error is not None and "shrank" in reader.error  # a forged report: cheat_detected
    assert len(taker.pieces) == 1  # the judge was never sent to read it
    os.close(fd)


# A judge in a process of its own, whose ring is made unsealed and cut short before a piece of it
# is announced: reading that piece would end the process with SIGBUS.
UNSEALED_JUDGE = '''
import os, socket
from adaexplore.common.vocab import JudgeOp
from adaexplore.evaluator.judge.process import Judge
from adaexplore.evaluator.sandbox import ring, wire

ring._seal = lambda fd: None
ours, theirs = socket.socketpair()
fds, fds_theirs = socket.socketpair()
judge = Judge("cpu", 1 << 30, theirs, 0, fds_theirs)
replies = wire.receive_messages(ours)
judge.handle({"op": JudgeOp.ring_open, "req": "r"}, [])
ring_id = next(replies)[0]["ring"]
_, (memfd, credit), _, _ = socket.recv_fds(fds, 16, 2)
judge.handle({"op": JudgeOp.begin, "req": "t", "key": "k", "slot": "trial:0", "mode": "store",
              "metas": [{"dtype": "uint8", "shape": [4096]}]}, [])
assert next(replies)[0]["accepted"]
os.ftruncate(memfd, 0)
judge.handle({"op": JudgeOp.piece, "req": "t", "ring": ring_id, "index": 0, "offset": 0, "n": 4096, "slot": 1}, [])
print("piece:", next(replies)[0].get("error"))
assert os.read(credit, 1) == b"c"  # its slot handed back all the same
judge.handle({"op": JudgeOp.stats, "req": "s"}, [])
print("rings open:", next(replies)[0]["stats"]["rings_open"])
'''


def test_a_judge_refuses_to_read_a_piece_in_a_ring_that_shrank_and_serves_on():
    out = subprocess.run([sys.executable, "-c", UNSEALED_JUDGE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"the judge ended with {out.returncode}: {out.stderr[-2000:]}"
    assert "piece: ValueError: a piece in a ring whose memory shrank" in out.stdout
    assert "rings open: 1" in out.stdout
