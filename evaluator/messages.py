"""The frame heads and requests that pass between the evaluator's processes.

Imported by every process: the trusted evaluator, the warm parent and the forked workers. It is
a leaf module (no torch, nothing of this package but the shared vocabulary) so that any of them
can import it cheaply. The kinds these frames carry (`Kind`, `Job`, `Op`, `Reply`) are declared in
`adaexplore.common.vocab`.
"""

from __future__ import annotations

from typing import Any, TypedDict

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


class FootprintHead(FrameHead, total=False):
    need_bytes: int
    output_bytes: int
    input_bytes: int


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


class RunRequest(TypedDict, total=False):
    """`Op.run`: a job for a fresh worker. Its `bytes` values travel as blobs beside the header;
    `blob_keys` names them in order."""

    op: str
    job_id: str
    timeout_s: float
    job: dict[str, Any]
    blob_keys: list[str]


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


# A candidate's compiled kernels (its job's own Triton cache, as a tar) handed to its timing jobs,
# so that they load what the correctness job compiled instead of compiling it again: at most this.
COMPILED_MAX_BYTES = 32 << 20


def output_checked(job: dict[str, Any]) -> bool:
    """Whether a timing job's check-run output is compared with the reference's: a candidate's
    or a compiled reference's is; the eager reference's timing run is not, so it is not sent."""
    return bool(job.get("candidate_source") or job.get("compile"))
