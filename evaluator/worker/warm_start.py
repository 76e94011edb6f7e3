"""The warm parent's entry point and its job table: which worker function runs each kind of job.

Runs in the warm parent, started by the pool as `python -P -m adaexplore.evaluator.worker.warm_start
FD`: `preload` imports the jobs' modules once there, so every forked child starts with the
harness's originals bound, before any candidate exists; `run_job` then runs in each forked child,
once the sandbox (`sandbox.warm_parent`) has confined it. The table lives here, with the worker,
so the sandbox imports neither the worker nor the profile.
"""

from __future__ import annotations

import time

from ...common.vocab import Job, Phase
from ..sandbox import warm_parent
from ..sandbox.compile_mark import CompileMark


def preload() -> None:
    """Import what every job runs, in the warm parent, so no child pays for it."""
    from .. import profile  # noqa: F401 - the profile job's module
    from . import (
        jobs,  # noqa: F401 - binds the harness's originals before any candidate exists
        kernel_capture,  # noqa: F401 - the profile job's launch capture
    )


def run_job(job: dict, result_fd: int, gate: int | None, mark: CompileMark, forked_at: float) -> None:
    """Run one job in a confined child: report through `result_fd`, its outputs through the ring."""
    from .. import profile as profiling
    from ..sandbox.compile_mark import install
    from ..sandbox.ring import Geometry, RingWriter
    from . import footprint, jobs, timing
    from .harness import Reporter

    runner = {Job.reference: jobs.run_reference, Job.candidate: jobs.run_candidate,
              Job.timing: jobs.run_timing, Job.profile: profiling.run_profile,
              Job.footprint: footprint.run_footprint}[job["kind"]]
    ring = job.get("ring")
    writer = RingWriter(int(ring["fd"]), int(ring["credit_fd"]), Geometry.from_job(ring)) if ring else None
    rep = Reporter(result_fd, job.get("nonce"), gate=gate, ring=writer)
    rep.phases[Phase.start] = time.monotonic() - forked_at  # the sandbox, imports: before any job code
    if job.get("sealed_compiled") and job.get("sealed_digest"):  # Triton's C helpers, built once, trusted
        from .harness import seed_sealed

        seed_sealed(job["sealed_compiled"], str(job["sealed_digest"]), job["scratch"])
    install(mark, timing.drain_device, tally=rep.phases)
    runner(job, rep)


def main() -> None:
    warm_parent.main(run_job, preload)


if __name__ == "__main__":
    main()
