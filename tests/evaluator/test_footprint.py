"""A reference job's memory is counted on the meta device, without the device: a reference that
ran out of memory beside other jobs runs again with what it needs reserved, not alone."""

from __future__ import annotations

import types

import pytest

from adaexplore.evaluator.results import EvalProtocol
from adaexplore.evaluator.worker.footprint import reference_footprint


def task_module(source: str) -> types.ModuleType:
    module = types.ModuleType("task")
    exec(compile(source, "<task>", "exec"), module.__dict__)
    return module


ELEMENTWISE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.rand(4096, 393216)]  # 6.4 GB: never made, only counted

def get_init_inputs():
    return []
'''

LINEAR = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8192, 8192)  # 268 MB of weights

    def forward(self, x):
        return self.fc(x).relu_()  # in place: no second output

def get_inputs():
    return [torch.rand(1024, 8192)]

def get_init_inputs():
    return []
'''


def test_an_elementwise_reference_needs_its_inputs_their_snapshot_and_two_outputs():
    n = 4096 * 393216 * 4
    assert reference_footprint(task_module(ELEMENTWISE), EvalProtocol()) == 4 * n


def test_weights_count_and_an_operation_in_place_takes_no_new_memory():
    weights = (8192 * 8192 + 8192) * 4
    activations = 1024 * 8192 * 4
    # inputs and their snapshot, then one output per forward (the in-place ReLU adds none)
    assert reference_footprint(task_module(LINEAR), EvalProtocol()) == weights + 4 * activations


@pytest.mark.parametrize("forward", [
    "return x * float(x.sum().item())",  # needs values: the meta device has none
    "return torch.from_numpy(x.numpy())",
])
def test_a_reference_that_cannot_run_on_the_meta_device_is_not_counted(forward):
    source = ELEMENTWISE.replace("return torch.relu(x)", forward)
    assert reference_footprint(task_module(source), EvalProtocol()) is None


def test_a_reference_too_slow_to_count_is_not_counted():
    source = ELEMENTWISE.replace("return torch.relu(x)", "for _ in range(10**7):\n            x = x + 1\n        return x")
    assert reference_footprint(task_module(source), EvalProtocol(), budget_s=0.2) is None


OOM_WHEN_REAL = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        if x.device.type != "meta":  # counted, it runs; run, it finds the device full
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB")
        return x * 2


def get_inputs():
    # 1 GiB when counted on the meta device; the job that really runs makes 8 numbers
    return [torch.rand((1 << 28) if torch.empty(0).device.type == "meta" else 8)]


def get_init_inputs():
    return []
'''


def test_a_reference_crowded_out_runs_again_with_its_footprint_reserved_then_alone(admitting_evaluator):
    from adaexplore.evaluator.task import Task, check_task_source

    ev = admitting_evaluator
    check_task_source(OOM_WHEN_REAL)
    validation = ev.validate_task(Task(name="oom_when_real", source=OOM_WHEN_REAL))
    assert not validation.ok and validation.error.error_class == "TaskTooLarge"
    runs = [(t["alone"], t["reserved_bytes"]) for t in ev.trace if t["kind"] == "reference"]
    unknown = ev.runner.device_memory().estimate(None, candidate=False)
    counted = ev.runner.device_memory().for_footprint(4 << 30)  # 1 GiB of inputs, their snapshot, two outputs
    # beside others with a fifth of the device; again with its footprint; then alone
    assert runs == [(0.0, unknown), (0.0, counted), (1.0, 8 << 30)]
    assert [t["kind"] for t in ev.trace].count("footprint") == 1


def test_a_reference_whose_footprint_is_no_more_than_it_had_reserved_runs_again_alone(admitting_evaluator):
    from adaexplore.evaluator.task import Task, check_task_source

    source = OOM_WHEN_REAL.replace("(1 << 28) if torch.empty(0).device.type == \"meta\" else 8", "8")
    ev = admitting_evaluator
    check_task_source(source)
    assert not ev.validate_task(Task(name="small_oom", source=source)).ok
    # its neighbours, not its size, took the memory: a larger reservation would not help
    assert [t["alone"] for t in ev.trace if t["kind"] == "reference"] == [0.0, 1.0]


LARGE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * SCALE


def get_inputs():
    return [torch.randn(1 << 16)]


def get_init_inputs():
    return []
'''


def large_tasks(*scales: int) -> list:
    """Tasks of LARGE, one per scale (so each has a reference of its own)."""
    from adaexplore.evaluator.task import Task, check_task_source

    tasks = []
    for scale in scales:
        source = LARGE.replace("SCALE", str(scale))
        check_task_source(source)
        tasks.append(Task(name=f"large_{scale}", source=source))
    return tasks


def test_large_references_are_counted_first_reserve_their_count_and_run_one_at_a_time(admitting_evaluator):
    import threading

    ev = admitting_evaluator
    ev.runner.judge_budget = 1 << 20  # each task keeps 7 outputs and its inputs of 256 KiB: large beside 1 MiB
    tasks = large_tasks(2, 3, 4)
    results: list = []
    threads = [threading.Thread(target=lambda t=t: results.append(ev.validate_task(t))) for t in tasks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3 and all(r.ok for r in results)
    refs = sorted((t["at"] - t["run_s"], t["at"], t["reserved_bytes"]) for t in ev.trace if t["kind"] == "reference")
    assert len(refs) == 3 and [t["kind"] for t in ev.trace].count("footprint") == 3
    assert all(later[0] >= earlier[1] - 0.05 for earlier, later in zip(refs, refs[1:]))  # never two at once
    # each reserved what its count says from its first run (its inputs, their snapshot, two outputs)
    assert {r[2] for r in refs} == {ev.runner.device_memory().for_footprint(4 * (1 << 18))}


def test_a_large_reference_waits_for_the_room_it_keeps_before_it_runs_at_all(tmp_path):
    import threading
    import time

    from adaexplore.evaluator.device_memory import DeviceMemory
    from adaexplore.evaluator.evaluator import Evaluator

    tasks = large_tasks(2, 3)
    # each keeps 2 MiB while it registers and 1.25 MiB (its trials) after: one fits beside the other only idle
    with Evaluator(work_dir=tmp_path / "ev", trace=True, judge_budget_bytes=3 << 20, judge_host_budget_bytes=0) as ev:
        ev.runner._memory = DeviceMemory(capacity_bytes=8 << 30)
        ev.runner.judge_budget = 3 << 20
        first, second = tasks
        assert ev.validate_task(first).ok
        results: list = []
        with ev.runner.in_use.hold(ev.judge_key(first, first.protocol)):
            worker = threading.Thread(target=lambda: results.append(ev.validate_task(second)))
            worker.start()
            time.sleep(3)
            runs_while_held = [t for t in ev.trace if t["kind"] == "reference"]
            released = time.monotonic()
        worker.join(120)
        assert results and results[0].ok, results
        assert len(runs_while_held) == 1  # the first task's only: the second waited without trying
        second_runs = [t for t in ev.trace if t["kind"] == "reference"][1:]
        assert len(second_runs) == 1  # one run, after the room was there, never turned away
        assert second_runs[0]["at"] - second_runs[0]["run_s"] >= released - 0.05
