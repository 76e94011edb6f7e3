"""What the evaluator keeps of a job's result stream is bounded: messages, and what their headers
take once decoded, so a job that floods its pipe with valid frames grows the evaluator by
megabytes, not gigabytes, and gets a verdict of its own (its results were too large)."""

from __future__ import annotations

import gc

import orjson
import pytest
import torch
from conftest import EXAMPLES, example_task

from adaexplore.common.vocab import Kind, Status
from adaexplore.evaluator.evaluator import Evaluator
from adaexplore.evaluator.sandbox import frames, wire
from adaexplore.evaluator.sandbox.frames import MAX_HEADER, FrameReader
from adaexplore.evaluator.sandbox.ring import Geometry

SOFTMAX = (EXAMPLES / "kernels" / "softmax.py").read_text()
NONCE = "n0"


def rss_bytes(field: str = "VmRSS") -> int:
    with open("/proc/self/status") as fh:
        line = next(line for line in fh if line.startswith(field + ":"))
    return int(line.split()[1]) << 10


def padded(value, left: int = 256) -> dict:
    """A note whose header is as large as a header may be, `value` repeated to fill it."""
    unit = len(orjson.dumps(value)) + 1
    return {"kind": Kind.notes, "nonce": NONCE, "notes": [value] * ((MAX_HEADER - left) // unit)}


def test_a_flood_of_small_messages_stops_at_the_message_limit():
    reader = FrameReader(NONCE)
    note = wire.pack({"kind": Kind.notes, "nonce": NONCE, "notes": []})
    reader.feed(note * 10_000)
    assert reader.overflow and reader.stopped
    assert len(reader.messages) == frames.MAX_MESSAGES
    assert reader.overflow_reason == f"more than {frames.MAX_MESSAGES} messages"


def test_a_flood_of_the_largest_headers_stops_at_the_header_limit():
    reader = FrameReader(NONCE)
    big = wire.pack(padded("x" * 1000))
    assert MAX_HEADER - 2048 < len(big) <= MAX_HEADER + 64  # each about as large as one may be
    fed = 0
    while not reader.stopped and fed < 64:
        reader.feed(big)
        fed += 1
    assert reader.overflow and "of message headers" in (reader.overflow_reason or "")
    kept = len(reader.messages)
    assert 8 <= kept <= frames.MAX_HEADER_BYTES // MAX_HEADER and fed == kept + 1


def test_headers_that_decode_to_many_small_objects_count_for_the_memory_they_take():
    # "[[],[],...]": three bytes of text, some 60 bytes of Python objects each, once decoded.
    big = wire.pack(padded([]))
    gc.collect()
    before = rss_bytes()
    reader = FrameReader(NONCE)
    for _ in range(32):
        reader.feed(big)
    grown = rss_bytes() - before
    assert reader.overflow and len(reader.messages) == 0  # the first such header is past the limit alone
    assert grown < 100 << 20, f"the reader grew by {grown >> 20} MiB"


class Ring:
    """A ring that takes every piece and counts them."""

    geometry = Geometry(slot_bytes=4096, slots=2, nbytes=8192, device="cpu")

    def __init__(self) -> None:
        self.pieces = 0

    def piece(self, receiver, index, offset, n, slot) -> None:
        self.pieces += 1

    def intact(self) -> bool:
        return True


class Taker:
    def write(self, index, offset, data) -> None:
        raise AssertionError("a ring frame's bytes never come on the pipe")

    def close(self) -> dict:
        return {"stored": True}

    def abort(self) -> None:
        pass


def test_ring_pieces_are_not_kept_so_an_output_may_come_in_any_number_of_them():
    ring = Ring()
    reader = FrameReader(NONCE, sink=lambda head, metas: Taker(), ring=ring, max_messages=10)
    meta, _ = wire.sendable(torch.zeros(1024 * 300))  # 300 slots' worth
    reader.feed(wire.pack({"kind": Kind.trial, "trial": 0, "nonce": NONCE, "ring": [meta]}))
    for k in range(300):
        reader.feed(wire.pack({"kind": Kind.piece, "nonce": NONCE, "index": 0, "offset": k * 4096, "n": 4096,
                               "slot": k % 2}))
    assert not reader.stopped and ring.pieces == 300
    assert [(head["kind"], payload) for head, payload in reader.messages] == [(Kind.trial, [{"stored": True}])]


def test_the_most_an_honest_job_reports_fits_the_limits_with_room_to_spare():
    # Fifty trials of a task with 100 outputs, and a timing report of 10,000 runs.
    metas = [{"dtype": "float32", "shape": [128, 4096]}] * 100
    heads = [{"kind": Kind.trial, "trial": t, "launches": 3, "nonce": NONCE, "ring": metas} for t in range(50)]
    runs = [0.123456789 + i * 1e-9 for i in range(10_000)]
    heads.append({"kind": Kind.timing, "nonce": NONCE, "event_ms": runs, "drain_ms": runs, "flush_ms": runs,
                  "method": "cuda_events", "replaced": [], "flags_reset": [], "autotuned": {}})
    taken = sum(frames.decoded_bytes(orjson.dumps({"h": h, "n": []})) for h in heads)
    assert len(heads) * 50 < frames.MAX_MESSAGES and taken * 2 < frames.MAX_HEADER_BYTES


# The example softmax kernel, which in its first forward writes 1,536 notes to its result pipe,
# each with a header as large as one may be and the job's nonce: 1.5 GiB, valid frame by frame.
FLOODER = SOFTMAX.replace("class ModelNew(nn.Module):", "class _Honest(nn.Module):") + '''

import gc

from adaexplore.evaluator.sandbox import wire
from adaexplore.evaluator.worker.harness import Reporter

_flooded = []


class ModelNew(_Honest):
    def forward(self, x):
        if not _flooded:
            _flooded.append(1)
            rep = next(o for o in gc.get_objects() if isinstance(o, Reporter))
            note = wire.pack({"kind": "notes", "nonce": rep.nonce, "notes": ["x" * ((1 << 20) - 256)]})
            try:
                for _ in range(1536):
                    wire.write_frame(rep.fd, note)
            except OSError:  # nobody reads any more
                pass
        return super().forward(x)
'''


@pytest.fixture(scope="module")
def evaluator_here(tmp_path_factory):
    ev = Evaluator(work_dir=tmp_path_factory.mktemp("frame-limits"), baselines=("eager",))
    yield ev
    ev.close()


def test_a_job_flooding_its_result_pipe_with_valid_frames_grows_the_evaluator_by_little(evaluator_here):
    task = example_task("softmax", timeout_s=120)
    assert evaluator_here.evaluate(task, SOFTMAX).status is Status.correct  # all of it warmed up
    gc.collect()
    with open("/proc/self/clear_refs", "w") as fh:  # the peak from here on: VmHWM starts over
        fh.write("5")
    before = rss_bytes()
    result = evaluator_here.evaluate(task, FLOODER)
    grown = rss_bytes("VmHWM") - before
    assert grown < 100 << 20, f"the evaluator grew by {grown >> 20} MiB"
    assert result.status is Status.runtime_error, result.feedback()
    assert result.error is not None and result.error.error_class == "OutputTooLarge"
    assert "16.0 MiB of message headers" in result.error.message  # the limit it went past, by name
    assert evaluator_here.evaluate(task, SOFTMAX + "\n# later\n").status is Status.correct
