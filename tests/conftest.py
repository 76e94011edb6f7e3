"""What every test shares: settings for a CPU run, paths, the session's evaluator (runs in pytest's process).

Tests live in one folder per part of adaexplore (tests/evaluator, tests/server, tests/search, tests/skills)
plus tests/acceptance, tests/benchmarks and tests/project; a new folder needs nothing more. Their
shared helpers (this module, `server_support`, `search_trees`) stay here at tests/, which is put
on sys.path below, so `from conftest import ...` works from any folder. Test file names are unique
across folders (pytest's default import mode needs that without packages).
"""

import os
import sqlite3
import sys

# torch.compile baselines cost 10-20 s per task; tests that need them ask for them explicitly. Servers
# read this through their settings; evaluators made here are given the same.
os.environ.setdefault("ADAEXPLORE_BASELINES", "eager")
# The skill memory's proposals are lexical unless a test turns embeddings on (tests/server/test_memory_retrieval.py),
# so what a test expects of them does not depend on whether the `memory` extra is installed.
os.environ.setdefault("ADAEXPLORE_MEMORY_EMBEDDINGS", "off")

# Candidate kernels run through Triton's interpreter when no GPU is present.
try:
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
except ImportError:  # pragma: no cover
    pass

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:  # the shared helpers import by their plain names from every folder
    sys.path.insert(0, str(TESTS))

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
EXPLOITS = TESTS / "exploits"
HAS_CUDA = bool(torch.cuda.is_available())
gpu = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")


@pytest.fixture(scope="session")
def evaluator(tmp_path_factory):
    """One evaluator (one warm parent process) shared by the whole test session."""
    from adaexplore.evaluator.evaluator import Evaluator

    ev = Evaluator(work_dir=tmp_path_factory.mktemp("evaluator"), baselines=("eager",))
    yield ev
    ev.close()


@pytest.fixture
def admitting_evaluator(tmp_path):
    """An evaluator (tracing its jobs) that admits jobs by device memory as on a GPU with 8 GiB
    for jobs, so a job that runs out of memory beside others is run again as there."""
    from adaexplore.evaluator.device_memory import DeviceMemory
    from adaexplore.evaluator.evaluator import Evaluator

    ev = Evaluator(work_dir=tmp_path / "ev", trace=True)
    ev.runner._memory = DeviceMemory(capacity_bytes=8 << 30)
    yield ev
    ev.close()


def job_spec(kind: str, **fields):
    """A bare job of `kind` with `fields` set: for tests of how the runner treats a job, whose
    workers (if any) are stubbed out."""
    from adaexplore.common.vocab import Job
    from adaexplore.evaluator.job_spec import JobSpec
    from adaexplore.evaluator.results import EvalProtocol
    from adaexplore.evaluator.sandbox.confine import Plan

    bare = {"task_source": "", "protocol": EvalProtocol(), "device": "cpu", "threads": 1, "judge_key": "",
            "host_memory_bytes": 0, "sandbox": Plan()}
    return JobSpec(kind=Job(kind), **{**bare, **fields})


def example_task(name: str, **protocol):
    from adaexplore.evaluator.results import EvalProtocol
    from adaexplore.evaluator.task import load_task_file

    task = load_task_file(EXAMPLES / "tasks" / f"{name}.py")
    if protocol:
        task = task.model_copy(update={"protocol": EvalProtocol(**protocol)})
    return task

# In CI, property tests replay the same examples every run, so a landing never hinges on a draw;
# locally they explore new ones.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    _hypothesis_settings.load_profile("ci")


_FAILURE_LOG = os.environ.get("ADAEXPLORE_FAILURE_LOG")


def pytest_runtest_logreport(report):
    """With ADAEXPLORE_FAILURE_LOG set, each failure's traceback is appended to that file as it
    happens (a run cut short by its time limit still says why its tests failed)."""
    if _FAILURE_LOG and report.failed:
        with open(_FAILURE_LOG, "a") as fh:
            fh.write(f"==== {report.nodeid} ({report.when})\n{report.longreprtext}\n")


# The hostile-code suites' server: a data directory with a token table, and a sandboxed evaluator
# that hides it (one per test module).
@pytest.fixture(scope="module")
def server_data_dir(tmp_path_factory):
    """A server's data directory with a database that holds a token table."""
    path = tmp_path_factory.mktemp("server-data")
    db = sqlite3.connect(path / "adaexplore.db")
    db.execute("create table tokens (name text, hash text, scopes text)")
    db.execute("insert into tokens values ('alice', 'secret-hash-of-alice', 'read,write')")
    db.commit()
    db.close()
    return path


@pytest.fixture(scope="module")
def sandboxed(server_data_dir):
    from adaexplore.evaluator.evaluator import Evaluator
    from adaexplore.evaluator.sandbox.confine import LEVEL_FULL

    ev = Evaluator(work_dir=server_data_dir / "work", hidden_paths=[server_data_dir], max_parallel=2)
    if ev.sandbox_level() != LEVEL_FULL:
        ev.close()
        pytest.skip("this machine cannot make namespaces: the sandbox runs at its weaker level")
    yield ev
    ev.close()
