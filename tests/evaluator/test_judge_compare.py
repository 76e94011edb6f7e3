"""The judge compares a candidate's outputs as their bytes arrive, a stage at a time: the verdict
is the one a whole comparison gives, and an output is never held whole beside the reference."""

from __future__ import annotations

import random
import socket

import pytest
import torch

from adaexplore.common.vocab import JudgeOp
from adaexplore.evaluator import compare as compare_mod
from adaexplore.evaluator.compare import OutputCheck, compare_outputs, zeros_pass
from adaexplore.evaluator.judge import process
from adaexplore.evaluator.judge.process import Judge
from adaexplore.evaluator.results import Status, Tolerance
from adaexplore.evaluator.sandbox import wire

TOL = Tolerance(atol=1e-2, rtol=1e-2)


def fed_in_pieces(got: list[torch.Tensor], expected: list[torch.Tensor], seed: int):
    """A verdict from pieces of random sizes, fed in random order."""
    check = OutputCheck(expected, TOL, trial=3)
    rng = random.Random(seed)
    pieces = []
    for i, g in enumerate(got):
        flat, start = g.reshape(-1), 0
        while start < flat.numel():
            n = rng.randint(1, 5000)
            pieces.append((i, start, flat[start:start + n]))
            start += n
    rng.shuffle(pieces)
    for i, start, piece in pieces:
        check.feed(i, start, piece)
    return check.verdict()


@pytest.mark.parametrize("case", ["correct", "wrong", "nan", "two_outputs_second_wrong"])
def test_outputs_fed_in_pieces_in_any_order_get_the_verdict_of_a_whole_comparison(case):
    torch.manual_seed(0)
    ref = [torch.randn(64, 301), torch.randn(7, 1000)]
    got = [r.clone() for r in ref]
    if case == "wrong":
        got[0][40, 17] += 3.0
        got[0][2, 5] += 1.0
    elif case == "nan":
        got[0][50, 200] = float("nan")
        got[0][60, 1] = float("inf")
    elif case == "two_outputs_second_wrong":
        got[1][6, 999] -= 0.5
    whole = compare_outputs(got, ref, TOL, trial=3)
    for seed in range(3):
        pieces = fed_in_pieces(got, ref, seed)
        assert pieces.status is whole.status
        assert repr(pieces.mismatch) == repr(whole.mismatch)  # repr: NaN equals NaN
    if case == "wrong":
        assert whole.mismatch is not None and whole.mismatch.index == [40, 17]
        assert whole.mismatch.mismatched_fraction == pytest.approx(2 / ref[0].numel())
    if case == "nan":
        assert whole.status is Status.nan_output and whole.mismatch.index == [50, 200]


def test_a_large_output_is_compared_a_piece_at_a_time(monkeypatch):
    monkeypatch.setattr(compare_mod, "PIECE_ELEMENTS", 1000)
    ref = [torch.randn(10_000)]
    got = [ref[0].clone()]
    got[0][9_999] = 5.0
    verdict = compare_outputs(got, ref, TOL)
    assert verdict.status is Status.wrong_output and verdict.mismatch.index == [9_999]
    assert zeros_pass([torch.full((5000,), 1e-4)], TOL) and not zeros_pass(ref, TOL)


class JudgeOnASocket:
    """A judge driven by hand, as the evaluator drives it, through its own socket."""

    def __init__(self, device: str = "cpu", budget_bytes: int = 1 << 30, host_budget_bytes: int = 0) -> None:
        self.ours, theirs = socket.socketpair()
        self.judge = Judge(device, budget_bytes, theirs, host_budget_bytes)
        self.replies = wire.receive_messages(self.ours)

    def send(self, head: dict, blobs: list | None = None) -> dict | None:
        self.judge.handle(head, [memoryview(bytearray(b)) for b in blobs or []])  # as received: writable
        if head["op"] in (JudgeOp.end,) or (head["op"] == JudgeOp.begin and head.get("mode") == "store"):
            return next(self.replies)[0]
        return None

    def stream(self, req: str, key: str, mode: str, tensors: list[torch.Tensor], piece: int,
               order=None, slot: str = "trial:0", in_use: list[str] | None = None) -> dict:
        metas = [{"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")} for t in tensors]
        answer = self.send({"op": JudgeOp.begin, "req": req, "key": key, "slot": slot, "mode": mode,
                            "metas": metas, "tolerance": TOL.model_dump(), "trial": 0, "in_use": in_use or []})
        if answer is not None:
            assert answer.get("accepted"), answer
        for index, t in enumerate(tensors):
            raw = t.contiguous().view(-1).view(torch.uint8).numpy().tobytes()
            offsets = list(range(0, len(raw), piece)) if order is None else order(len(raw), piece)
            for offset in offsets:
                self.send({"op": JudgeOp.chunk, "req": req, "index": index, "offset": offset},
                          [raw[offset:offset + piece]])
        return self.send({"op": JudgeOp.end, "req": req})


ON_THE_GPU = pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"))


@pytest.mark.parametrize("device", ["cpu", ON_THE_GPU])
def test_the_judge_compares_a_candidates_outputs_as_they_arrive_without_holding_them_whole(monkeypatch, device):
    monkeypatch.setattr(process, "STAGE_BYTES", 4096)
    side = JudgeOnASocket(device)
    ref = [torch.randn(3000), torch.arange(100, dtype=torch.int64)]
    assert side.stream("r", "task", "store", ref, piece=999) == {"req": "r", "stored": True}

    held = []
    feed = OutputCheck.feed
    monkeypatch.setattr(OutputCheck, "feed", lambda self, i, start, p: (held.append(p.numel() * p.element_size()),
                                                                      feed(self, i, start, p))[1])
    good = side.stream("c1", "task", "compare", [r.clone() for r in ref], piece=777)
    assert good["verdict"]["status"] == "correct"
    assert held and max(held) <= 4096  # pieces of one stage, never the 12 kB output

    bad = ref[0].clone()
    bad[2999] = 7.0  # in the last stage, after a piece boundary that splits no element
    answer = side.stream("c2", "task", "compare", [bad, ref[1]], piece=333)
    assert answer["verdict"]["status"] == "wrong_output"
    assert answer["verdict"]["mismatch"]["index"] == [2999]


def test_pieces_out_of_order_or_repeated_are_refused_not_compared():
    side = JudgeOnASocket()
    ref = [torch.randn(1000)]
    side.stream("r", "task", "store", ref, piece=4000)

    def repeat_first(n, piece):  # the first piece twice, so the last never comes
        offsets = list(range(0, n, piece))
        return [offsets[0]] + offsets[:-1]

    for mode, key in (("compare", "task"), ("store", "other")):
        answer = side.stream(f"x-{mode}", key, mode, [ref[0].clone()], piece=1000, order=repeat_first)
        # The relay sends pieces in order, so anything else is a fault of ours: the transfer is
        # dropped with an error, and its end finds nothing to answer for.
        assert "out of order" in answer["error"] and answer["ours"] is True
        assert next(side.replies)[0] == {"req": f"x-{mode}", "error": "no such transfer", "ours": True}


BIG_OUTPUT_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.randn(24 << 20)]  # 96 MB: more than one stage of the judge


def get_init_inputs():
    return []
'''

LAST_ELEMENT_WRONG = '''
import torch
import torch.nn as nn
import triton  # noqa: F401  (so that it is run and compared: plain PyTorch is settled before any run)


class ModelNew(nn.Module):
    def forward(self, x):
        out = x * 2.0
        out[-1] += 1.0
        return out
'''


def test_an_output_larger_than_a_stage_is_judged_whole_through_the_evaluator(tmp_path):
    from adaexplore.evaluator.evaluator import Evaluator
    from adaexplore.evaluator.task import Task, check_task_source

    check_task_source(BIG_OUTPUT_TASK)
    task = Task(name="big_output", source=BIG_OUTPUT_TASK)
    with Evaluator(work_dir=tmp_path, judge_budget_bytes=1 << 30) as ev:
        assert ev.validate_task(task).ok
        result = ev.evaluate(task, LAST_ELEMENT_WRONG)
    # The one wrong element sits in the output's last stage, past a stage boundary.
    assert result.status is Status.wrong_output, result.feedback()
    assert result.mismatch is not None and result.mismatch.index == [(24 << 20) - 1]
    assert result.mismatch.mismatched_fraction == pytest.approx(1 / (24 << 20))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_the_gpu_comparing_a_large_output_takes_a_few_stages_of_memory_not_copies_of_the_output():
    side = JudgeOnASocket("cuda")
    n = 1 << 28  # 1 GiB of float32
    raw = torch.randn(n)
    assert side.stream("r", "big", "store", [raw], piece=64 << 20) == {"req": "r", "stored": True}
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    got = raw.clone()
    got[-1] += 1.0
    answer = side.stream("c", "big", "compare", [got], piece=8 << 20)
    assert answer["verdict"]["status"] == "wrong_output" and answer["verdict"]["mismatch"]["index"] == [n - 1]
    extra = torch.cuda.max_memory_allocated() - base
    # A few stages and pieces' temporaries; receiving the output whole and comparing it in float64
    # took several times the output.
    assert extra < 2 << 30, f"the comparison took {extra / 2**30:.2f} GiB beside the stored reference"


def test_when_the_device_runs_out_under_the_judge_it_says_so_frees_what_it_took_and_goes_on(monkeypatch):
    side = JudgeOnASocket()

    def device_full(key, nbytes, in_use=frozenset()):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")

    monkeypatch.setattr(side.judge.store, "reserve", device_full)
    answer = side.send({"op": JudgeOp.begin, "req": "r", "key": "task", "slot": "trial:0", "mode": "store",
                        "metas": [{"shape": [10], "dtype": "float32"}]})
    # "oom" and "ours": the evaluator runs the job again with the device to itself
    assert answer is not None and answer["oom"] and answer["ours"] and "ran out of device memory" in answer["error"]
    assert "r" not in side.judge.pending
    monkeypatch.undo()
    assert side.stream("r2", "task", "store", [torch.ones(10)], piece=40) == {"req": "r2", "stored": True}


@pytest.mark.parametrize("device", ["cpu", ON_THE_GPU])
def test_a_reference_with_no_room_on_the_device_beside_tasks_in_use_is_kept_in_host_memory_and_judged_the_same(
        monkeypatch, device):
    monkeypatch.setattr(process, "STAGE_BYTES", 4096)
    side = JudgeOnASocket(device, budget_bytes=20_000, host_budget_bytes=1 << 20)
    busy = [torch.randn(3000)]  # 12 kB: the device share holds one such reference, not two
    assert side.stream("r1", "busy", "store", busy, piece=999) == {"req": "r1", "stored": True}
    ref = torch.randn(3000)
    for slot, tensors in (("inputs", [ref.clone()]), ("trial:0", [ref]), ("trial:1", [ref * 2])):
        answer = side.stream(f"s-{slot}", "new", "store", tensors, piece=999, slot=slot, in_use=["busy"])
        assert answer == {"req": f"s-{slot}", "stored": True}
    store = side.judge.store
    assert store.place_of("busy") == "device" and store.place_of("new") == "host"
    assert store.get("new", "trial:0")[0].device.type == "cpu"
    stats = side.judge.stats()
    assert stats["host_used_bytes"] == 36_000 and stats["used_bytes"] == 12_000  # inputs and two trials

    # Compared a stage at a time on the judge's device, against pieces of the reference moved there.
    assert side.stream("c1", "new", "compare", [ref.clone()], piece=777)["verdict"]["status"] == "correct"
    bad = ref.clone()
    bad[2500] += 1.0
    verdict = side.stream("c2", "new", "compare", [bad], piece=777)["verdict"]
    assert verdict["status"] == "wrong_output" and verdict["mismatch"]["index"] == [2500]

    # The task's flags come from the reference where it is: this one returns its input.
    side.judge.handle({"op": JudgeOp.flags, "req": "f", "key": "new", "tolerance": TOL.model_dump()}, [])
    flags = next(side.replies)[0]["flags"]
    assert [f["code"] for f in flags] == ["equals_input"]


@pytest.mark.parametrize("device", ["cpu", ON_THE_GPU])
def test_a_reference_larger_than_the_device_share_keeps_its_first_slots_there_the_rest_in_host_memory_and_is_judged_whole(
        monkeypatch, device):
    monkeypatch.setattr(process, "STAGE_BYTES", 4096)
    side = JudgeOnASocket(device, budget_bytes=30_000, host_budget_bytes=30_000)
    ref = torch.randn(3000)  # 12 kB a slot: two on the device, the third and fourth in host memory
    for slot, tensors in (("trial:0", [ref]), ("trial:1", [ref * 2]), ("inputs", [ref.clone()]),
                          ("repeat", [ref.clone()])):
        answer = side.stream(f"s-{slot}", "big", "store", tensors, piece=999, slot=slot)
        assert answer == {"req": f"s-{slot}", "stored": True}
    stats = side.judge.stats()
    assert stats["used_bytes"] == 24_000 and stats["host_used_bytes"] == 24_000
    assert side.judge.store.get("big", "trial:0")[0].device.type == torch.device(device).type
    assert side.judge.store.get("big", "repeat")[0].device.type == "cpu"

    for trial, want in ((0, ref), (1, ref * 2)):
        answer = side.stream(f"c{trial}", "big", "compare", [want.clone()], piece=777, slot=f"trial:{trial}")
        assert answer["verdict"]["status"] == "correct"
    bad = ref * 2
    bad[10] += 1.0
    verdict = side.stream("c-bad", "big", "compare", [bad], piece=777, slot="trial:1")["verdict"]
    assert verdict["status"] == "wrong_output" and verdict["mismatch"]["index"] == [10]

    # The flags read slots from both places: the forward returns its input, and repeats itself.
    side.judge.handle({"op": JudgeOp.flags, "req": "f", "key": "big", "tolerance": TOL.model_dump()}, [])
    assert [f["code"] for f in next(side.replies)[0]["flags"]] == ["equals_input"]
    assert side.judge.stats()["host_used_bytes"] == 0  # the inputs and the repeat are released after
