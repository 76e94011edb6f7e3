"""The trusted parent's decoding and comparison: hostile bytes never crash it or pass."""

import math
import os
import threading

import pytest
import torch
from conftest import gpu
from hypothesis import given, settings
from hypothesis import strategies as st

from adaexplore.evaluator.compare import compare_outputs
from adaexplore.evaluator.results import Status, Tolerance
from adaexplore.evaluator.sandbox import wire
from adaexplore.evaluator.sandbox.pool import decode_messages
from adaexplore.evaluator.timing_stats import summarize


def test_tensor_round_trip_keeps_dtype_and_values():
    for t in [torch.randn(3, 4), torch.arange(10, dtype=torch.int64), torch.randn(5).to(torch.bfloat16),
              torch.tensor([True, False]), torch.empty(0, 3)]:
        meta, raw = wire.encode_tensor(t)
        back = wire.decode_tensor(meta, memoryview(raw))
        assert back.dtype == t.dtype and back.shape == t.shape and torch.equal(back, t)


def test_lying_tensor_headers_are_rejected():
    meta, raw = wire.encode_tensor(torch.randn(4))
    with pytest.raises(wire.WireError):
        wire.decode_tensor({**meta, "shape": [5]}, memoryview(raw))
    with pytest.raises(wire.WireError):
        wire.decode_tensor({**meta, "dtype": "object"}, memoryview(raw))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_garbage_on_the_result_channel_is_an_error_not_a_crash(blob):
    messages, err, truncated = decode_messages(blob)
    assert isinstance(messages, list) and isinstance(truncated, bool)
    assert err is None or isinstance(err, str)


def test_a_stream_cut_inside_a_frame_keeps_its_whole_frames():
    whole = wire.pack({"kind": "trial", "trial": 0}) + wire.pack({"kind": "done"})
    cut = whole + wire.pack({"kind": "ops"})[:-3]
    messages, err, truncated = decode_messages(cut)
    assert err is None and truncated and [h["kind"] for h, _ in messages] == ["trial", "done"]
    assert decode_messages(whole) == (messages, None, False)


def _sent(data: bytes):
    """A socket from which `data` can be read, and then the end of the stream."""
    import socket

    ours, theirs = socket.socketpair()
    threading.Thread(target=lambda: (ours.sendall(data), ours.close()), daemon=True).start()
    return theirs


def test_frames_received_into_the_reused_buffer_come_out_as_sent_small_and_large_alike():
    sizes = [10, 3 << 20, 0, 5, 2 << 20]  # one larger than the first buffer, then smaller ones in it
    sent = [(i, os.urandom(n)) for i, n in enumerate(sizes)]
    stream = b"".join(wire.pack({"op": "chunk", "index": i}, [blob]) for i, blob in sent)
    got = [(head["index"], bytes(blobs[0])) for head, blobs in wire.receive_messages(_sent(stream))]
    assert got == sent  # each message read before the next is asked for, as the judge does


def test_a_socket_stream_cut_inside_a_frame_or_claiming_a_huge_frame_is_an_error():
    frame = wire.pack({"op": "chunk"}, [b"x" * 1000])
    with pytest.raises(wire.WireError, match="ended inside a frame"):
        list(wire.receive_messages(_sent(frame + frame[:-10])))
    with pytest.raises(wire.WireError, match="too large"):
        list(wire.receive_messages(_sent((wire.MAX_FRAME + 1).to_bytes(8, "little"))))


def test_compare_statuses():
    tol = Tolerance()
    ref = [torch.ones(4, 4)]
    assert compare_outputs([torch.ones(4, 4)], ref, tol).status is Status.correct
    assert compare_outputs([torch.ones(4, 4) + 5e-3], ref, tol).status is Status.correct
    assert compare_outputs([torch.ones(2, 8)], ref, tol).status is Status.shape_mismatch
    bad = torch.ones(4, 4)
    bad[2, 3] = 2.0
    v = compare_outputs([bad], ref, tol)
    assert v.status is Status.wrong_output and v.mismatch.index == [2, 3] and v.mismatch.max_abs_error == 1.0
    nan = torch.ones(4, 4)
    nan[1, 1] = math.nan
    assert compare_outputs([nan], ref, tol).status is Status.nan_output
    assert compare_outputs([torch.ones(4, 4, dtype=torch.float64)], ref, tol).status is Status.wrong_output
    assert compare_outputs([torch.ones(4, 4)] * 2, ref, tol).status is Status.shape_mismatch


def test_trimmed_statistics():
    samples = [1.0] * 90 + [100.0] * 5 + [0.01] * 5
    stats = summarize(samples, 0.05)
    assert stats.runs == 90 and stats.mean_ms == 1.0 and stats.median_ms == 1.0 and stats.min_ms == 0.01


def _read_back(tensors):
    """What a reader gets from `write_tensors` over a real socket."""
    import socket

    ours, theirs = socket.socketpair()

    def write() -> None:
        wire.write_tensors(ours.fileno(), {"kind": "trial"}, tensors)
        ours.close()

    writer = threading.Thread(target=write)
    writer.start()
    head, blobs = next(wire.receive_messages(theirs))
    writer.join()
    theirs.close()
    return head, [wire.decode_tensor(m, b) for m, b in zip(head["tensors"], blobs)]


def test_tensors_written_piece_by_piece_read_back_exactly_whatever_their_layout_and_dtype():
    big = torch.rand(3 * (1 << 20) + 7)
    sent = [big, torch.arange(12).reshape(3, 4).t(), torch.tensor([True, False]), torch.empty(0, 5),
            torch.tensor(2.5, dtype=torch.float16), torch.zeros(4, dtype=torch.uint16)]
    head, got = _read_back(sent)
    assert head["kind"] == "trial" and len(got) == len(sent)
    assert torch.equal(got[0], big) and torch.equal(got[1], sent[1].contiguous())
    assert torch.equal(got[2], sent[2]) and got[3].shape == (0, 5) and got[4].item() == 2.5
    assert got[5].dtype == torch.float32 and torch.equal(got[5], torch.zeros(4))  # a dtype that may not travel


@gpu
def test_gpu_tensors_larger_than_the_staging_buffer_arrive_whole(monkeypatch):
    monkeypatch.setattr(wire, "STAGING_BYTES", 1 << 20)
    monkeypatch.setattr(wire, "_staging", [])
    x = torch.rand(5 * (1 << 18) + 3, device="cuda")  # 5 MB and a bit: six pieces of the buffer
    _, got = _read_back([x, x[::2]])
    assert torch.equal(got[0], x.cpu()) and torch.equal(got[1], x[::2].cpu())
