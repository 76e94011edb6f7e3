"""A task too large for this machine is refused when it is registered, with its size and what the
machine offers, never answered with an infrastructure error after a retry; and on the CPU the
judge's budget follows the memory that is free."""

from __future__ import annotations

import logging
import re

import anyio
import pytest
from mcp import Client
from server_support import EXAMPLES

from adaexplore.evaluator import Evaluator
from adaexplore.evaluator.judge import process as judge_process
from adaexplore.evaluator.judge.process import CPU_KEEP_BYTES, CPU_MIN_BYTES, cpu_budget, default_budget
from adaexplore.evaluator.results import Status
from adaexplore.evaluator.task import Task, check_task_source

GB = 10**9
BUDGET = 64 << 20  # the judge's, lowered: 0.07 GB
# One output of 16 MB a trial: five trials, the check run and the inputs keep more than BUDGET.
LARGE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0


def get_inputs():
    return [torch.randn(1 << 22)]


def get_init_inputs():
    return []
'''
SAYS_SIZE_AND_BUDGET = re.compile(r"need \d+\.\d\d GB, more than the judge's budget of 0\.07 GB")


def large_task() -> Task:
    check_task_source(LARGE)
    return Task(name="large", source=LARGE)


def reference_runs(ev: Evaluator) -> int:
    return sum(1 for t in ev.trace or [] if t["kind"] == "reference")


def test_the_cpu_budget_is_half_of_the_memory_available_when_plenty_is():
    # 20 GB free on a 24 GiB machine: 10 GB, where an eighth of the machine gave 3.2 GB.
    assert cpu_budget(20 * GB) == 10 * GB


def test_the_cpu_budget_leaves_the_server_and_its_workers_their_share():
    assert cpu_budget(6 * GB) == 6 * GB - CPU_KEEP_BYTES
    assert cpu_budget(1 * GB) == CPU_MIN_BYTES  # and never falls to nothing


def test_the_cpu_budget_grows_with_the_memory_available():
    budgets = [cpu_budget(n * GB) for n in range(0, 200, 3)]
    assert budgets == sorted(budgets)


def test_a_cpu_judge_sizes_its_budget_by_the_memory_available_now(monkeypatch):
    monkeypatch.setattr(judge_process, "available_memory", lambda: 20 * GB)
    assert default_budget(judge_process.torch.device("cpu")) == 10 * GB
    monkeypatch.setattr(judge_process, "available_memory", lambda: None)  # the system cannot say
    assert 0 < default_budget(judge_process.torch.device("cpu")) <= 4 << 30


@pytest.mark.slow
def test_registering_a_task_too_large_is_a_tool_error_with_its_size_and_the_budget(tmp_path, caplog):
    from adaexplore.server.core.config import ServerConfig
    from adaexplore.server.face.app import build_server

    with Evaluator(work_dir=tmp_path / "ev", judge_budget_bytes=BUDGET, judge_host_budget_bytes=0, trace=True) as ev:
        mcp, svc = build_server(ServerConfig(data_dir=tmp_path / "data", seed=0), evaluator=ev)
        try:
            async def register() -> tuple[bool, str]:
                async with Client(mcp) as c:
                    res = await c.call_tool("register_task", {"source": LARGE, "name": "large"})
                    return res.is_error, res.content[0].text

            with caplog.at_level(logging.INFO):
                is_error, text = anyio.run(register)
            assert is_error and "task too large for this server:" in text, text
            assert SAYS_SIZE_AND_BUDGET.search(text), text
            assert "infra" not in text and "retry" not in text
            assert reference_runs(ev) == 1
            assert svc.tasks.list_tasks().tasks == []  # refused: nothing was registered
        finally:
            svc.close()
    assert "retrying" not in caplog.text


@pytest.mark.slow
def test_adaexplore_eval_refuses_a_task_too_large_before_any_candidate_runs(tmp_path, monkeypatch, capsys, caplog):
    from adaexplore import evaluator as face
    from adaexplore.server.face import cli

    task = tmp_path / "large.py"
    task.write_text(LARGE)
    made: list[Evaluator] = []

    class Lowered(Evaluator):
        def __init__(self, **kwargs):
            super().__init__(**kwargs, work_dir=tmp_path / "ev", judge_budget_bytes=BUDGET, judge_host_budget_bytes=0)
            made.append(self)

    monkeypatch.setattr(face, "Evaluator", Lowered)
    with caplog.at_level(logging.INFO):
        code = cli.main(["eval", str(task), str(EXAMPLES / "kernels" / "softmax.py")])
    out = capsys.readouterr()
    assert code == 2
    assert out.err.startswith("error: task too large for this machine:"), out.err
    assert SAYS_SIZE_AND_BUDGET.search(out.err), out.err
    assert "infra" not in out.err and out.out == ""
    assert [reference_runs(ev) for ev in made] == [1]
    assert not [t for t in made[0].trace or [] if t["kind"] == "candidate"]  # no candidate ran
    assert "retrying" not in caplog.text


@pytest.mark.slow
def test_a_candidate_of_a_task_grown_too_large_is_not_tried_twice(tmp_path, caplog):
    # (a task registered where more memory was free: its reference no longer fits here)
    source = (EXAMPLES / "kernels" / "softmax.py").read_text()
    with Evaluator(work_dir=tmp_path, judge_budget_bytes=BUDGET, judge_host_budget_bytes=0, trace=True) as ev:
        with caplog.at_level(logging.INFO):
            result = ev.evaluate(large_task(), source)
        assert result.status is Status.infra_error
        assert result.error.message.startswith("the task is too large for this machine:")
        assert SAYS_SIZE_AND_BUDGET.search(result.error.message), result.error.message
        assert reference_runs(ev) == 1
    assert "retrying" not in caplog.text

