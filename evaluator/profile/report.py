"""Profile report types and the pure functions that build a report and summarize it as text.

Nothing here touches a GPU: `kernel_breakdown`, `build_report` and `summarize_profile` work on
numbers a profile job has already reported, in the trusted evaluator process.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import Field

from ..results import ErrorInfo, Model
from .floor import floor_ms, flops_peak
from .peaks import DevicePeaks

MAX_KERNEL_NAME = 160
MAX_KERNELS = 20  # rows of the breakdown kept in the report


# --- report types ----------------------------------------------------------------------------

class KernelTime(Model):
    """One GPU kernel (or memcpy/memset) of the profiled window, by name."""

    name: str
    calls: int  # over all profiled runs
    total_ms: float  # over all profiled runs
    ms_per_run: float
    share: float  # of all device time in the window
    triton: bool = False


class TritonKernelInfo(Model):
    """Launch metadata of one compiled Triton kernel the candidate launched."""

    name: str
    function: str | None = None  # the @triton.jit function it was compiled from
    launches: int = 0  # in the profiled window
    n_regs: int | None = None  # registers per thread
    n_spills: int | None = None  # as reported by Triton's loader
    shared_bytes: int | None = None
    num_warps: int | None = None
    num_stages: int | None = None


class ProfileReport(Model):
    """Where a correct candidate's time goes, against the device's peaks and the task's floor."""

    task_id: str = ""
    source_hash: str = ""
    device: str = "cpu"
    profiled: bool = False  # True when the per-kernel breakdown ran on a GPU
    candidate_ms: float | None = None
    timing_source: str | None = None  # "evaluation" (the verified timing) or "profile run"
    profiled_runs: int = 0
    kernels: list[KernelTime] = Field(default_factory=list)
    device_ms_per_run: float | None = None  # sum of kernel time per forward
    launches_per_run: float | None = None  # kernel launches (all kinds) per forward
    triton_share: float | None = None  # share of device time spent in the candidate's Triton kernels
    triton_kernels: list[TritonKernelInfo] = Field(default_factory=list)
    peaks: DevicePeaks | None = None
    floor_bytes: int | None = None  # inputs + outputs + parameters of the reference
    floor_flops: int | None = None  # FlopCounterMode on the reference forward (matmul, conv, attention)
    floor_dtype: str | None = None  # dominant floating dtype of inputs and parameters
    flops_peak_kind: str | None = None  # which matmul peak the floor uses: bf16, tf32 or fp32
    floor_ms: float | None = None
    bound: Literal["memory", "compute"] | None = None  # which side of the roofline the floor is on
    achieved_gbps: float | None = None  # floor_bytes / candidate time
    achieved_tflops: float | None = None  # floor_flops / candidate time
    bandwidth_fraction: float | None = None  # achieved_gbps / peak copy bandwidth
    flops_fraction: float | None = None  # achieved_tflops / the chosen matmul peak
    vs_floor: float | None = None  # candidate_ms / floor_ms
    notes: list[str] = Field(default_factory=list)
    error: ErrorInfo | None = None
    summary: str = ""


# --- pure helpers --------------------------------------------------------------------------------

def short_kernel_name(name: str, limit: int = 48) -> str:
    """`void at::native::vectorized_elementwise_kernel<4, ...>(...)` -> `vectorized_elementwise_kernel`."""
    base = name.strip()
    if base.startswith("void "):
        base = base[5:]
    depth, cut = 0, len(base)
    for i, ch in enumerate(base):  # drop template arguments and the parameter list
        if ch in "<(" and depth == 0:
            cut = i
            break
    base = base[:cut].rsplit("::", 1)[-1] or name.strip()
    return base if len(base) <= limit else base[: limit - 3] + "..."


_OLD_SUFFIX = re.compile(r"(_?[0-9]+[a-z]*)+")


def is_triton_kernel(name: str, triton_names: set[str] | frozenset[str]) -> bool:
    """True when a profiler kernel name is one of the candidate's Triton kernels.

    Triton names the compiled entry after the @triton.jit function; older releases append a
    specialization suffix such as `_0d1d2d3de`.
    """
    base = name.strip()
    if base.startswith("void "):
        base = base[5:]
    base = base.split("(", 1)[0].strip()
    if base in triton_names:
        return True
    for n in triton_names:
        if n and base.startswith(n) and _OLD_SUFFIX.fullmatch(base[len(n):]):
            return True
    return False


def kernel_breakdown(rows: list[tuple[str, int, float]], runs: int,
                     triton_names: set[str] | frozenset[str]) -> list[KernelTime]:
    """Rows of (kernel name, calls, total device ms) -> per-kernel times sorted by time, with shares."""
    merged: dict[str, list] = {}
    for name, calls, ms in rows:
        if ms is None or not math.isfinite(ms) or ms < 0:
            continue
        entry = merged.setdefault(name, [0, 0.0])
        entry[0] += int(calls)
        entry[1] += float(ms)
    total = sum(ms for _, ms in merged.values())
    runs = max(1, runs)
    out = [KernelTime(name=name[:MAX_KERNEL_NAME], calls=calls, total_ms=ms, ms_per_run=ms / runs,
                      share=(ms / total) if total > 0 else 0.0, triton=is_triton_kernel(name, triton_names))
           for name, (calls, ms) in merged.items()]
    out.sort(key=lambda k: -k.total_ms)
    return out


def build_report(*, floor: dict | None, peaks: DevicePeaks | None, kernels: list[KernelTime],
                 triton_kernels: list[TritonKernelInfo], candidate_ms: float | None, runs: int,
                 notes: list[str] | None = None, **fields) -> ProfileReport:
    """Combine the facts of a profile job into a report with derived numbers and a summary."""
    floor = floor or {}
    nbytes, flops, dtype = floor.get("bytes"), floor.get("flops"), floor.get("dtype")
    kind, tflops = flops_peak(peaks, dtype)
    copy_gbps = peaks.copy_gbps if peaks else None
    fl_ms, bound = floor_ms(nbytes, flops, copy_gbps, tflops)
    device_total = sum(k.total_ms for k in kernels)
    report = ProfileReport(
        candidate_ms=candidate_ms, profiled_runs=runs if kernels else 0, kernels=kernels[:MAX_KERNELS],
        device_ms_per_run=device_total / max(1, runs) if kernels else None,
        launches_per_run=sum(k.calls for k in kernels) / max(1, runs) if kernels else None,
        triton_share=(sum(k.total_ms for k in kernels if k.triton) / device_total) if device_total > 0 else None,
        triton_kernels=triton_kernels, peaks=peaks, floor_bytes=nbytes, floor_flops=flops, floor_dtype=dtype,
        flops_peak_kind=kind, floor_ms=fl_ms, bound=bound, notes=list(notes or []), **fields)
    if candidate_ms and candidate_ms > 0:
        seconds = candidate_ms / 1e3
        if nbytes is not None:
            report.achieved_gbps = nbytes / seconds / 1e9
            if copy_gbps:
                report.bandwidth_fraction = report.achieved_gbps / copy_gbps
        if flops is not None:
            report.achieved_tflops = flops / seconds / 1e12
            if tflops:
                report.flops_fraction = report.achieved_tflops / tflops
        if fl_ms:
            report.vs_floor = candidate_ms / fl_ms
    report.summary = summarize_profile(report)
    return report


def _bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"


def _flops(n: float) -> str:
    for unit, size in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("KFLOP", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} FLOP"


def _bw(gbps: float) -> str:
    return f"{gbps / 1e3:.2f} TB/s" if gbps >= 1000 else f"{gbps:.0f} GB/s"


def _ms(ms: float) -> str:
    return f"{ms:.3g} ms" if ms >= 0.01 else f"{ms * 1e3:.3g} us"


def summarize_profile(report: ProfileReport, max_lines: int = 6) -> str:
    """At most `max_lines` lines an agent can act on."""
    lines: list[str] = []
    hints: list[str] = []  # specific findings first; the roofline's generic advice goes last
    roofline_hints: list[str] = []
    floor_bits = []
    if report.floor_bytes is not None:
        floor_bits.append(f"moves at least {_bytes(report.floor_bytes)}")
    if report.floor_flops is not None:
        floor_bits.append(f"{_flops(report.floor_flops)} matmul/conv" if report.floor_flops else "no matmul/conv FLOPs")
    if not report.profiled:
        why = report.error.message if report.error else "no candidate was profiled"
        lines.append(f"not profiled: {why}")
        if floor_bits:
            lines.append("task floor: " + ", ".join(floor_bits)
                         + (f" = {_ms(report.floor_ms)} at the measured peaks ({report.bound}-bound)"
                            if report.floor_ms else " (a time floor needs the GPU's measured peaks)"))
        lines.extend(f"note: {n}" for n in report.notes[: max(0, max_lines - len(lines))])
        return "\n".join(lines[:max_lines])

    # 1. roofline position and distance to the floor
    if report.bound and report.floor_ms:
        frac = report.bandwidth_fraction if report.bound == "memory" else report.flops_fraction
        if report.bound == "memory" and report.achieved_gbps is not None and report.peaks and report.peaks.copy_gbps:
            pos = f"{_bw(report.achieved_gbps)} of {_bw(report.peaks.copy_gbps)} measured peak ({frac:.0%})"
        elif report.bound == "compute" and report.achieved_tflops is not None and report.flops_fraction is not None:
            peak = report.achieved_tflops / report.flops_fraction
            pos = (f"{report.achieved_tflops:.3g} of {peak:.3g} TFLOP/s measured {report.flops_peak_kind} matmul peak "
                   f"({frac:.0%})")
        else:
            pos = "position unknown"
        lines.append(f"{report.bound}-bound: {pos}")
        tail = f"floor {_ms(report.floor_ms)} ({', '.join(floor_bits)})"
        if report.candidate_ms is not None and report.vs_floor is not None:
            tail += f"; you are at {_ms(report.candidate_ms)} = {report.vs_floor:.1f}x the floor"
        lines.append(tail)
        if report.vs_floor is not None:
            if report.vs_floor <= 1.3:
                hints.insert(0, "within 1.3x of the floor: little headroom left")
            elif report.floor_ms < 0.005:
                roofline_hints.append("the floor is under 5 us, so launch overhead dominates: "
                                      "use as few kernel launches (and torch ops) per forward as possible")
            elif report.bound == "memory" and (report.bandwidth_fraction or 0) < 0.5:
                roofline_hints.append("memory-bound at under half of peak bandwidth: read each input once "
                                      "(fuse passes), use contiguous, wide loads and enough programs to fill the GPU")
            elif report.bound == "compute" and (report.flops_fraction or 0) < 0.5:
                roofline_hints.append("compute-bound at under half of the matmul peak: use tl.dot on larger "
                                      "tiles (bf16/tf32 inputs), more pipeline stages, and autotune block sizes")
    elif report.candidate_ms is not None:
        lines.append(f"runtime {_ms(report.candidate_ms)}; no floor ("
                     + (", ".join(floor_bits) if floor_bits else "floor unavailable") + ")")

    # 2. Triton vs the rest
    if report.triton_share is not None:
        triton_rows = [k for k in report.kernels if k.triton]
        others = [k for k in report.kernels if not k.triton]
        text = (f"{len(triton_rows)} Triton kernel{'s' if len(triton_rows) != 1 else ''} take "
                f"{report.triton_share:.0%} of GPU time")
        if others:
            top = others[0]
            text += (f"; other kernels {1 - report.triton_share:.0%} (top: {short_kernel_name(top.name)} "
                     f"{top.share:.0%}, {top.calls / max(1, report.profiled_runs):.3g} calls/run)")
            if 1 - report.triton_share >= 0.2:
                hints.append(f"{1 - report.triton_share:.0%} of GPU time is outside Triton "
                             f"({short_kernel_name(top.name)}): fold that work (copies, casts, "
                             "contiguous(), torch ops) into your kernels")
        if report.launches_per_run is not None:
            text += f"; {report.launches_per_run:.3g} launches/run"
            per_run = report.device_ms_per_run
            if report.launches_per_run >= 4 and per_run is not None and per_run < 0.05:
                hints.append("many launches for little work: fuse kernels to save launch overhead")
        lines.append(text)

    # 3. Triton kernels' resources
    if report.triton_kernels:
        parts = []
        for k in sorted(report.triton_kernels, key=lambda k: -k.launches)[:3]:
            bits = []
            if k.n_regs is not None:
                bits.append(f"{k.n_regs} regs")
            if k.n_spills is not None:
                bits.append(f"spills {k.n_spills}")
            if k.shared_bytes is not None:
                bits.append(f"{_bytes(k.shared_bytes)} shared")
            if k.num_warps is not None:
                bits.append(f"{k.num_warps} warps")
            if k.num_stages is not None:
                bits.append(f"{k.num_stages} stage{'s' if k.num_stages != 1 else ''}")
            parts.append(f"{k.name}: {', '.join(bits) or 'no metadata'}")
            if k.n_spills:
                hints.append(f"{k.name} spills registers: shrink BLOCK sizes or num_stages, or raise num_warps")
            elif k.n_regs is not None and k.n_regs >= 200:
                hints.append(f"{k.name} uses {k.n_regs} registers per thread: occupancy is low; "
                             "smaller tiles or fewer stages may help")
        lines.append("kernel " + "; ".join(parts))

    hints += roofline_hints
    if hints:
        lines.append("hint: " + "; ".join(hints[:2]))
    room = max_lines - len(lines)
    if room > 0 and report.notes:
        lines.append("note: " + "; ".join(report.notes)[:300])
    return "\n".join(lines[:max_lines])
