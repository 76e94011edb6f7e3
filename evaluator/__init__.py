"""The evaluator's face: what the server and the CLI may use of tasks, evaluation and results.

Imported in the trusted process that evaluates (the server, or the `adaexplore eval` command).
Everything a caller outside this package needs is named in `__all__`; the modules behind it
(sandbox, worker, judge, profile, ...) are the evaluator's own business, and the server imports
none of them directly (tests/project/test_architecture.py holds it to that).

Each name loads on first use (see `_HOMES`): `Evaluator` imports torch, which takes seconds.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .evaluator import Evaluator
    from .fleet import EvaluatorFleet
    from .lint import static_verdict
    from .lint.hints import nan_hint
    from .profile.report import ProfileReport
    from .results import TOLERANCE_PROFILES, ErrorInfo, EvalProtocol, EvalResult, Status, TaskValidation, to_json
    from .sandbox.confine import LEVEL_FULL as SANDBOX_FULL
    from .task import (
        Task,
        TaskError,
        check_task_source,
        load_task_file,
        load_task_folder,
        source_hash,
        task_name_from_path,
    )

__all__ = [
    "SANDBOX_FULL",
    "TOLERANCE_PROFILES",
    "ErrorInfo",
    "EvalProtocol",
    "EvalResult",
    "Evaluator",
    "EvaluatorFleet",
    "EvaluatorLike",
    "ProfileReport",
    "Status",
    "Task",
    "TaskError",
    "TaskValidation",
    "check_task_source",
    "load_task_file",
    "load_task_folder",
    "nan_hint",
    "probe_sandbox",
    "source_hash",
    "static_verdict",
    "task_name_from_path",
    "to_json",
]


class EvaluatorLike(Protocol):
    """What the server asks of an evaluator: an `EvaluatorFleet`, one `Evaluator`, or a test's stand-in."""

    @property
    def device(self) -> str:
        """The device its results are timed on (a fleet: its first member's)."""
        ...

    @property
    def is_gpu(self) -> bool:
        """Whether candidates run on a GPU (and are timed and profiled there)."""
        ...

    def evaluate(self, task: Task, source: str, protocol: EvalProtocol | None = None) -> EvalResult:
        """Check and (on a GPU) time one candidate; never raises for a kernel's fault."""
        ...

    def validate_task(self, task: Task) -> TaskValidation:
        """Load, run and (on a GPU) time the reference of a new task."""
        ...

    def profile(self, task: Task, source: str | None, protocol: EvalProtocol | None = None,
                device: str | None = None) -> ProfileReport:
        """Profile a correct candidate on `device`, the one that timed it (None: any)."""
        ...

    def close(self) -> None:
        """Stop the processes it started."""
        ...


def probe_sandbox() -> tuple[str, str]:
    """The level of confinement workers would get on this machine, and what it means."""
    from .sandbox import confine

    return confine.probe()


# Where each public name lives. Names load on first use, so that importing one of the evaluator's
# modules (as the warm parent, the workers and the judge do) loads nothing else, and the server
# starting up does not import torch (seconds) before it has to.
_HOMES = {
    "SANDBOX_FULL": (".sandbox.confine", "LEVEL_FULL"),
    "TOLERANCE_PROFILES": (".results", "TOLERANCE_PROFILES"),
    "ErrorInfo": (".results", "ErrorInfo"),
    "EvalProtocol": (".results", "EvalProtocol"),
    "EvalResult": (".results", "EvalResult"),
    "Evaluator": (".evaluator", "Evaluator"),
    "EvaluatorFleet": (".fleet", "EvaluatorFleet"),
    "ProfileReport": (".profile.report", "ProfileReport"),
    "Status": (".results", "Status"),
    "Task": (".task", "Task"),
    "TaskError": (".task", "TaskError"),
    "TaskValidation": (".results", "TaskValidation"),
    "check_task_source": (".task", "check_task_source"),
    "load_task_file": (".task", "load_task_file"),
    "load_task_folder": (".task", "load_task_folder"),
    "nan_hint": (".lint.hints", "nan_hint"),
    "source_hash": (".task", "source_hash"),
    "static_verdict": (".lint", "static_verdict"),
    "task_name_from_path": (".task", "task_name_from_path"),
    "to_json": (".results", "to_json"),
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = _HOMES[name]
    value = getattr(import_module(module, __name__), attr)
    globals()[name] = value  # the next lookup finds it without coming here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
