"""Each part of adaexplore shows its public names in one place, its package's `__all__`."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

FACES = ["adaexplore.common", "adaexplore.evaluator", "adaexplore.search", "adaexplore.server", "adaexplore.skills"]


@pytest.mark.parametrize("face", FACES)
def test_every_public_name_of_a_face_exists_and_imports(face):
    module = importlib.import_module(face)
    for name in module.__all__:
        assert getattr(module, name) is not None, name
        namespace: dict[str, object] = {}
        exec(f"from {face} import {name}", namespace)
        assert namespace[name] is getattr(module, name)


@pytest.mark.parametrize("face", FACES)
def test_a_face_lists_no_private_name_and_no_name_twice(face):
    names = importlib.import_module(face).__all__
    assert not [name for name in names if name.startswith("_")]
    assert len(set(names)) == len(names)


def test_the_evaluator_face_loads_torch_only_when_the_evaluator_is_asked_for():
    code = ("import sys; from adaexplore.evaluator import EvaluatorFleet, EvaluatorLike, Task, EvalResult; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_fleet_and_one_evaluator_both_answer_what_the_server_asks():
    from adaexplore.evaluator import Evaluator, EvaluatorFleet, EvaluatorLike

    asked = {name for name in dir(EvaluatorLike) if not name.startswith("_")}
    assert asked >= {"device", "is_gpu", "evaluate", "validate_task", "profile", "close"}
    assert asked <= set(dir(Evaluator))
    assert asked <= set(dir(EvaluatorFleet(members=[Member("cpu")])))  # type: ignore[list-item]


class Member:
    """A fleet member that records where it was asked to profile."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.profiled: list[str | None] = []

    def profile(self, task, source, protocol=None, device=None):
        self.profiled.append(device)
        return self.device

    def close(self) -> None:
        pass


def test_a_fleet_profiles_on_the_member_whose_gpu_timed_the_candidate():
    from adaexplore.evaluator import EvaluatorFleet

    first, second = Member("cuda:0"), Member("cuda:1")
    fleet = EvaluatorFleet(members=[first, second])  # type: ignore[list-item]
    assert fleet.profile(None, "src", None, device="cuda:1") == "cuda:1"  # type: ignore[arg-type]
    assert fleet.profile(None, "src", None) == "cuda:0"  # type: ignore[arg-type]
    assert second.profiled == ["cuda:1"] and first.profiled == [None]
