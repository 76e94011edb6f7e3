"""The message kinds that pass between the evaluator's processes, declared once.

Imported by every process: the trusted evaluator, the warm parent and the forked workers. It is
a leaf module (no torch, nothing of this package) so that any of them can import it cheaply.

* `Kind`: the `"kind"` of each frame a worker's harness writes on its result pipe;
* `Job`: the `"kind"` of a job request (which runner the worker starts);
* `Op`: the `"op"` of each control request from the pool to the warm parent;
* `Reply`: the keys of the warm parent's replies on the control socket.

Each is a `str` enum whose members equal, hash and format as their values, so the bytes on the
wire are the same as with plain strings. orjson writes a member used as a value as its value,
but refuses one used as a dict key: keys are written as `Reply.x.value`.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, TypedDict


class _Name(str, Enum):
    """A `str` enum that behaves as its value in comparisons, hashing, `str()` and formatting."""

    __hash__ = str.__hash__
    __format__ = str.__format__

    def __str__(self) -> str:
        return str.__str__(self)


class Kind(_Name):
    """Frame kinds a worker reports (harness -> trusted evaluator)."""

    trial = "trial"  # one correctness trial's outputs
    inputs = "inputs"  # the reference's inputs (degenerate-task checks)
    repeat = "repeat"  # the reference run again on the same inputs
    ops = "ops"  # PyTorch operations seen, launches, flags reset
    check = "check"  # the reference's outputs on the timing inputs
    device = "device"  # device name and library versions
    error = "error"  # an exception, classified
    infra = "infra"  # a failure of ours, not the candidate's
    violation = "violation"  # the candidate broke a rule while running
    done = "done"  # the job ran to its end (always last)
    timing = "timing"  # timing samples and the check run's outputs
    peaks = "peaks"  # device peaks (profile job)
    floor = "floor"  # the task's floor (profile job)
    notes = "notes"  # profile notes
    kernels = "kernels"  # per-kernel profiler rows (profile job)
    triton = "triton"  # Triton launch metadata (profile job)


class Job(_Name):
    """Job kinds (trusted evaluator -> worker, inside a run request)."""

    reference = "reference"
    candidate = "candidate"
    timing = "timing"
    profile = "profile"


class Op(_Name):
    """Control requests (pool -> warm parent)."""

    run = "run"  # fork a worker for a job; its result pipe travels with the request
    go = "go"  # open a gated job's timing gate
    pause = "pause"  # stop every job's processes but one
    resume = "resume"  # let paused jobs run on
    kill = "kill"  # kill a job's process group
    exit = "exit"  # shut the warm parent down


class Reply(_Name):
    """Keys (and the gate's value) of the warm parent's replies (warm parent -> pool)."""

    ready = "ready"  # the warm parent is up; also the value of `gate` when a job waits at its gate
    paused = "paused"  # a pause took effect (its value is the request's token)
    finished = "finished"  # a job's process ended (with how)
    gate = "gate"  # a gated job is ready to measure


# --- frame heads (JSON headers; tensors travel as blobs beside them) ---------------------------

class FrameHead(TypedDict, total=False):
    """Fields every frame from a worker may carry besides its own."""

    kind: str
    nonce: str
    tensors: list[dict[str, Any]]


class TrialHead(FrameHead, total=False):
    trial: int
    launches: int


class OpsHead(FrameHead, total=False):
    ops: list[str]
    flags: list[dict[str, Any]]
    launches: int
    flags_reset: list[str]


class ErrorHead(FrameHead, total=False):
    status: str
    phase: str
    error: dict[str, Any]


class InfraHead(FrameHead, total=False):
    message: str


class ViolationHead(FrameHead, total=False):
    reason: str


class TimingHead(FrameHead, total=False):
    event_ms: list[float]
    drain_ms: list[float]
    flush_ms: list[float]
    method: str
    replaced: list[str]
    flags_reset: list[str]
    autotuned: list[str]


class RunRequest(TypedDict):
    """`Op.run`: a job for a fresh worker."""

    op: str
    job_id: str
    timeout_s: float
    job: dict[str, Any]


class FinishedReply(TypedDict, total=False):
    """`Reply.finished`: how a job's process ended (or why it never started: `infra`)."""

    job_id: str
    finished: bool
    exit_code: int | None
    signal: int | None
    timed_out: bool
    elapsed_s: float
    output_tail: str
    infra: str
