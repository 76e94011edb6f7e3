"""Profiling of a correct candidate: where the time goes and how far it is from the task's floor.

Spans two processes: the profile job (`run.run_profile`) runs in a forked worker, and
`run.profile_candidate` and the report's pure functions run in the trusted evaluator process.

* `run`: the profile job and `profile_candidate` (called by `Evaluator.profile`);
* `report`: the report types and pure functions (`summarize_profile`, `kernel_breakdown`,
  `build_report`), testable without a GPU;
* `floor`: the task's floor from the reference (FLOPs counted and bytes summed BEFORE the
  candidate is imported) and `floor_ms`;
* `peaks`: device peaks (measured once per device, cached on disk by the trusted parent).

The candidate's Triton launch metadata is captured in the worker by `worker.kernel_capture`;
its names are offered here too, imported on first use (that module imports `report`).
"""

from __future__ import annotations

from .floor import HALF_DTYPES, dominant_dtype, floor_ms, flops_peak, task_floor, tensor_bytes  # noqa: F401
from .peaks import COPY_BYTES, PEAKS_FILE, DevicePeaks, PeaksCache, measure_peaks, peaks_key, plausible_peaks  # noqa: F401
from .report import (  # noqa: F401
    MAX_KERNEL_NAME,
    MAX_KERNELS,
    KernelTime,
    ProfileReport,
    TritonKernelInfo,
    build_report,
    is_triton_kernel,
    kernel_breakdown,
    short_kernel_name,
    summarize_profile,
)
from .run import MAX_TIMED_RUNS, MIN_WARMUP, PROFILE_RUNS, profile_candidate, run_profile  # noqa: F401

_CAPTURE = ("KernelCapture", "device_rows", "jit_function_names")


def __getattr__(name: str):
    if name in _CAPTURE:
        from ..worker import kernel_capture

        return getattr(kernel_capture, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
