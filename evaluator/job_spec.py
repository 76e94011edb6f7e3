"""A worker job's request, typed: what the trusted evaluator asks one forked worker to do.

Built and read in the trusted evaluator process (the job runner's sink, reservations and trace
read its fields). It crosses into the worker as a plain dict, once, when the runner hands it
to the pool (`to_job`): the warm parent, `worker.jobs` and the profile job read that dict, so
its keys are the wire format and do not change here.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ..common.vocab import Job
from .results import EvalProtocol
from .sandbox.confine import Plan


@dataclass(frozen=True)
class JobSpec:
    """One job. The fields after `sandbox` are optional: None leaves the key out of the job, so
    a worker sees a key only where the trusted side set one (`time_candidate`, say, is true
    when absent)."""

    kind: Job
    task_source: str
    protocol: EvalProtocol
    device: str  # as the worker names it ("cuda:0" where it is shown one GPU)
    threads: int  # its share of intra-op threads
    judge_key: str  # where its reference's outputs live in the judge
    host_memory_bytes: int  # its cgroup's limit: memfds and shared memory count too
    sandbox: Plan
    memory_limit_bytes: int | None = None  # its address-space limit (CPU only)
    candidate_source: str | None = None
    hand_on_compiled: bool | None = None  # send the compiled kernels on, for its timing jobs
    then_time: bool | None = None  # after its verdict, prepare its first timing and wait at its gate
    check_run: bool | None = None  # a reference job's check run, which the baselines compare with
    evict_in_use: bool | None = None  # a reference job's outputs may evict those of tasks in use
    compile: bool | None = None  # a timing job of the torch.compile baseline
    inductor_cache_dir: str | None = None
    compiled: bytes | None = None  # the candidate's kernels its correctness job compiled
    known_peaks: dict[str, Any] | None = None  # a profile job's device peaks measured before
    time_candidate: bool | None = None  # whether a profile job times the candidate itself

    def to_job(self) -> dict[str, Any]:
        """The job as the worker receives it."""
        job = {f.name: getattr(self, f.name) for f in fields(self)}
        job["protocol"] = self.protocol.model_dump(mode="json")
        job["sandbox"] = self.sandbox.to_job()
        return {k: v for k, v in job.items() if v is not None}
