"""Profiling of a correct candidate: where the time goes and how far it is from the task's floor.

Three parts:

* the report types and pure functions (`summarize_profile`, `kernel_breakdown`, `floor_ms`,
  `build_report`), testable without a GPU;
* the worker side (`run_profile`, the job kind "profile"): device peaks (measured once per
  device, cached on disk by the trusted parent), the task's floor from the reference
  (FLOPs counted and bytes summed BEFORE the candidate is imported), then the candidate's
  per-kernel breakdown under `torch.profiler` and its Triton kernels' launch metadata;
* the trusted side (`profile_candidate`), called by `Evaluator.profile`.

Nothing here is a verdict: numbers come from the candidate's own process and are advice.
Every GPU probe is wrapped so that a failure becomes a note with a reason, never an exception.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
from pathlib import Path
from typing import Literal

from pydantic import Field

from .types import ErrorInfo, Model

PROFILE_RUNS = 5  # forward passes recorded by torch.profiler
MAX_TIMED_RUNS = 50  # CUDA-event timed runs when the evaluation's timing is not available
MIN_WARMUP = 3
COPY_BYTES = 2 << 30  # device-to-device copy used to measure bandwidth (bytes per copy)
MAX_KERNEL_NAME = 160
MAX_KERNELS = 20  # rows of the breakdown kept in the report
PEAKS_FILE = "device_peaks.json"
HALF_DTYPES = ("bfloat16", "float16")


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


class DevicePeaks(Model):
    """What this device measurably sustains (not datasheet numbers)."""

    device_name: str
    torch_version: str
    copy_gbps: float | None = None  # device-to-device copy, (read + written) bytes / s, in GB/s
    bf16_tflops: float | None = None  # torch.matmul bf16 8192^3
    fp32_tflops: float | None = None  # torch.matmul fp32 4096^3, TF32 off
    tf32_tflops: float | None = None  # torch.matmul fp32 4096^3, TF32 on
    notes: list[str] = Field(default_factory=list)


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


def flops_peak(peaks: DevicePeaks | None, dtype: str | None) -> tuple[str | None, float | None]:
    """The matmul peak a floor should use: bf16 for half-precision tasks, else TF32 (tl.dot's
    default for fp32 inputs), falling back to plain fp32."""
    if peaks is None:
        return None, None
    order = ["bf16", "tf32", "fp32"] if dtype in HALF_DTYPES else ["tf32", "fp32", "bf16"]
    for kind in order:
        value = getattr(peaks, f"{kind}_tflops")
        if value:
            return kind, value
    return None, None


def floor_ms(nbytes: int | None, flops: int | None, copy_gbps: float | None,
             tflops: float | None) -> tuple[float | None, str | None]:
    """max(bytes / peak bandwidth, flops / peak FLOP/s) in ms, and which term is larger."""
    mem = nbytes / (copy_gbps * 1e9) * 1e3 if nbytes is not None and copy_gbps else None
    comp = flops / (tflops * 1e12) * 1e3 if flops and tflops else (0.0 if flops == 0 else None)
    if mem is None and comp is None:
        return None, None
    if mem is None:
        return comp, "compute"
    if comp is None or mem >= comp:
        return mem, "memory"
    return comp, "compute"


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


# --- floor (worker side, before any candidate code exists) ---------------------------------------

def tensor_bytes(tensors) -> int:
    """Bytes of distinct tensors (the same data seen twice counts once)."""
    import torch

    seen: set[tuple] = set()
    total = 0
    for t in tensors:
        if not isinstance(t, torch.Tensor) or t.numel() == 0:
            continue
        key = (t.device.type, t.data_ptr(), tuple(t.shape), t.dtype)
        if key in seen:
            continue
        seen.add(key)
        total += t.numel() * t.element_size()
    return total


def dominant_dtype(tensors) -> str | None:
    import torch

    by_dtype: dict[str, int] = {}
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            name = str(t.dtype).removeprefix("torch.")
            by_dtype[name] = by_dtype.get(name, 0) + t.numel() * t.element_size()
    return max(by_dtype, key=by_dtype.get) if by_dtype else None


def task_floor(task, protocol, device) -> dict:
    """FLOPs of the reference forward and its minimum bytes (inputs + outputs + parameters)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from . import harness

    model = harness.build_model(task.Model, task, protocol, device)
    inputs = harness.make_inputs(task, harness.timing_seed(protocol, 0), device)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        outputs = harness.as_outputs(model(*inputs))
    state: list = []
    if isinstance(model, torch.nn.Module):
        state = [*model.parameters(), *model.buffers()]
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    outs = [o for o in outputs if isinstance(o, torch.Tensor)]
    return {"flops": int(counter.get_total_flops()), "bytes": tensor_bytes([*tensors, *state, *outs]),
            "input_bytes": tensor_bytes(tensors), "param_bytes": tensor_bytes(state),
            "output_bytes": tensor_bytes(outs), "dtype": dominant_dtype([*tensors, *state])}


# --- device peaks (worker side, before any candidate code exists) --------------------------------

def peaks_key(device_name: str, torch_version: str) -> str:
    return f"{device_name} | torch {torch_version}"


def _time_cuda(fn, iters: int, repeats: int = 3) -> float:
    """Best mean ms per call of `fn` over `repeats` groups of `iters` calls, by CUDA events."""
    from . import timing

    best = math.inf
    for _ in range(repeats):
        start, end = timing._Event(enable_timing=True), timing._Event(enable_timing=True)
        timing._event_record(start)
        for _ in range(iters):
            fn()
        timing._event_record(end)
        timing._synchronize()
        best = min(best, timing._elapsed_time(start, end) / iters)
    return best


def measure_peaks(device) -> DevicePeaks:
    """Copy bandwidth and matmul throughput of this device, each probe failing on its own."""
    import torch

    peaks = DevicePeaks(device_name=torch.cuda.get_device_name(device), torch_version=torch.__version__)

    def probe(label: str, fn) -> float | None:
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - a failed probe is a note, not a failure
            peaks.notes.append(f"{label} not measured: {type(exc).__name__}: {str(exc)[:160]}")
            return None
        finally:
            try:
                torch.cuda.empty_cache()
            except Exception:  # noqa: BLE001
                pass

    def copy() -> float:
        n = COPY_BYTES // 4
        src = torch.ones(n, dtype=torch.float32, device=device)
        dst = torch.empty_like(src)
        for _ in range(3):
            dst.copy_(src)
        torch.cuda.synchronize(device)
        ms = _time_cuda(lambda: dst.copy_(src), iters=10)
        return 2 * n * 4 / (ms / 1e3) / 1e9

    def matmul(n: int, dtype, tf32: bool) -> float:
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            a = torch.randn(n, n, device=device, dtype=dtype)
            b = torch.randn(n, n, device=device, dtype=dtype)
            for _ in range(3):
                torch.matmul(a, b)
            torch.cuda.synchronize(device)
            ms = _time_cuda(lambda: torch.matmul(a, b), iters=10)
            return 2 * n ** 3 / (ms / 1e3) / 1e12
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old

    peaks.copy_gbps = probe("copy bandwidth", copy)
    peaks.bf16_tflops = probe("bf16 matmul", lambda: matmul(8192, torch.bfloat16, False))
    peaks.fp32_tflops = probe("fp32 matmul", lambda: matmul(4096, torch.float32, False))
    peaks.tf32_tflops = probe("tf32 matmul", lambda: matmul(4096, torch.float32, True))
    return peaks


def plausible_peaks(peaks: DevicePeaks) -> bool:
    """Sanity bounds before a measurement is cached (it came from a worker process)."""
    ok = peaks.copy_gbps is not None and 1.0 < peaks.copy_gbps < 1e5
    for v in (peaks.bf16_tflops, peaks.fp32_tflops, peaks.tf32_tflops):
        ok = ok and (v is None or 0.001 < v < 1e5)
    return ok


class PeaksCache:
    """Measured peaks per device key, as a JSON file written only by the trusted process."""

    _locks: dict[str, threading.Lock] = {}
    _guard = threading.Lock()

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        with self._guard:
            self.lock = self._locks.setdefault(str(self.path), threading.Lock())

    def load(self) -> dict[str, DevicePeaks]:
        try:
            raw = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        out: dict[str, DevicePeaks] = {}
        if isinstance(raw, dict):
            for key, value in raw.items():
                try:
                    out[str(key)] = DevicePeaks.model_validate(value)
                except ValueError:
                    continue
        return out

    def save(self, key: str, peaks: DevicePeaks) -> None:
        with self.lock:
            data = {k: v.model_dump(mode="json") for k, v in self.load().items()}
            data[key] = peaks.model_dump(mode="json")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
            os.replace(tmp, self.path)


# --- Triton launch metadata (worker side) -------------------------------------------------------

_JIT_TYPES = ("JITFunction", "InterpretedFunction")


def _unwrap_jit(obj):
    """The JITFunction (or interpreted function) under an Autotuner/Heuristics chain, or None."""
    for _ in range(8):
        if obj is None:
            return None
        if type(obj).__name__ in _JIT_TYPES:
            return obj
        obj = getattr(obj, "fn", None)
    return None


def jit_function_names(module) -> set[str]:
    """Names of the @triton.jit functions defined at the top level of a module."""
    names: set[str] = set()
    for value in list(vars(module).values()):
        try:
            fn = _unwrap_jit(value)
            if fn is None:
                continue
            name = getattr(fn, "__name__", None) or getattr(getattr(fn, "fn", None), "__name__", None)
            if isinstance(name, str) and name:
                names.add(name)
        except Exception:  # noqa: BLE001 - odd objects in a candidate's namespace
            continue
    return names


def _meta(kernel, field: str):
    try:
        value = getattr(kernel.metadata, field)
    except Exception:  # noqa: BLE001
        try:
            value = kernel.metadata[field]  # a dict in some releases
        except Exception:  # noqa: BLE001
            return None
    return value


def _as_int(value) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


class KernelCapture:
    """Wraps `JITFunction.run`, which returns the compiled kernel it launched, to keep those kernels."""

    def __init__(self) -> None:
        self.kernels: dict[int, list] = {}  # id(kernel) -> [kernel, function name, launches]
        self.errors: list[str] = []

    def install(self, cls=None) -> None:
        if cls is None:
            from triton.runtime.jit import JITFunction as cls  # noqa: N813
        original = cls.run
        capture = self

        def run(self_, *args, **kwargs):
            kernel = original(self_, *args, **kwargs)
            try:
                capture.record(self_, kernel, bool(kwargs.get("warmup", False)))
            except Exception as exc:  # noqa: BLE001 - never break the candidate's launch
                if len(capture.errors) < 3:
                    capture.errors.append(f"{type(exc).__name__}: {exc}")
            return kernel

        cls.run = run

    def record(self, fn, kernel, warmup: bool) -> None:
        if kernel is None:
            return
        entry = self.kernels.get(id(kernel))
        if entry is None:
            name = getattr(fn, "__name__", None) or getattr(getattr(fn, "fn", None), "__name__", None)
            entry = self.kernels[id(kernel)] = [kernel, name, 0]
        if not warmup:
            entry[2] += 1

    def reset_counts(self) -> None:
        for entry in self.kernels.values():
            entry[2] = 0

    def names(self) -> set[str]:
        out: set[str] = set()
        for kernel, fn_name, _ in self.kernels.values():
            for n in (getattr(kernel, "name", None), _meta(kernel, "name"), fn_name):
                if isinstance(n, str) and n:
                    out.add(n)
        return out

    def infos(self, launched_only: bool = True) -> list[TritonKernelInfo]:
        out = []
        for kernel, fn_name, launches in self.kernels.values():
            if launched_only and not launches:
                continue
            name = getattr(kernel, "name", None) or _meta(kernel, "name") or fn_name or "?"
            out.append(TritonKernelInfo(
                name=str(name)[:MAX_KERNEL_NAME], function=fn_name, launches=launches,
                n_regs=_as_int(getattr(kernel, "n_regs", None)), n_spills=_as_int(getattr(kernel, "n_spills", None)),
                shared_bytes=_as_int(_meta(kernel, "shared")), num_warps=_as_int(_meta(kernel, "num_warps")),
                num_stages=_as_int(_meta(kernel, "num_stages"))))
        out.sort(key=lambda k: -k.launches)
        return out


# --- the profiler's rows (worker side) ------------------------------------------------------------

def device_rows(events) -> list[tuple[str, int, float]]:
    """(name, calls, device ms) of the GPU-side entries of `prof.key_averages()` (or `prof.events()`)."""
    rows = []
    for evt in events:
        dtype = getattr(evt, "device_type", None)
        if getattr(dtype, "name", str(dtype)).split(".")[-1] not in ("CUDA", "PrivateUse1", "HIP"):
            continue
        us = None
        for attr in ("self_device_time_total", "self_cuda_time_total", "device_time_total", "cuda_time_total"):
            value = getattr(evt, attr, None)
            if isinstance(value, (int, float)):
                us = float(value)
                break
        if us is None:
            continue
        rows.append((str(getattr(evt, "key", None) or getattr(evt, "name", "?")), int(getattr(evt, "count", 1) or 1),
                     us / 1e3))
    return rows


# --- the job ------------------------------------------------------------------------------------------

def run_profile(job: dict, rep) -> None:
    """Peaks, floor, then (with a candidate, on a GPU) the candidate's profile. Reports facts only."""
    import torch

    from . import harness, jobs
    from .types import Protocol

    protocol = Protocol.model_validate(job["protocol"])
    device = jobs._device(job)
    notes: list[str] = []

    def note(text: str) -> None:
        notes.append(text[:240])

    # 1. device peaks, from the parent's cache or measured now (before any candidate code)
    if device.type == "cuda":
        try:
            key = peaks_key(torch.cuda.get_device_name(device), torch.__version__)
            known = (job.get("known_peaks") or {}).get(key)
            if known:
                rep.send({"kind": "peaks", "key": key, "peaks": known, "cached": True})
            else:
                peaks = measure_peaks(device)
                rep.send({"kind": "peaks", "key": key, "peaks": peaks.model_dump(mode="json"), "cached": False})
        except Exception as exc:  # noqa: BLE001
            note(f"device peaks unavailable: {type(exc).__name__}: {exc}")

    # 2. the floor, from the trusted reference, still before the candidate is imported
    try:
        task = harness.load_task(job["task_source"])
    except BaseException as exc:  # noqa: BLE001
        rep.send({"kind": "infra", "message": f"task failed to load in worker: {exc}"})
        return
    try:
        rep.send({"kind": "floor", **task_floor(task, protocol, device)})
    except Exception as exc:  # noqa: BLE001
        note(f"floor not computed: {type(exc).__name__}: {exc}")
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()

    source = job.get("candidate_source")
    ok = True
    if source and device.type == "cuda":
        ok = _profile_candidate_in_worker(job, rep, task, protocol, device, source, note)
    rep.send({"kind": "notes", "notes": notes})
    if ok:
        rep.send({"kind": "done"})


def _profile_candidate_in_worker(job, rep, task, protocol, device, source: str, note) -> bool:
    """Import, warm up, time and profile the candidate; False when it failed (already reported)."""
    import torch

    from . import harness, jobs, timing

    # 3. the candidate
    capture = KernelCapture()
    try:
        capture.install()
    except Exception as exc:  # noqa: BLE001
        note(f"Triton launch metadata unavailable: {type(exc).__name__}: {exc}")
    try:
        module = harness.load_candidate(source, job["scratch"])
        model = harness.build_model(module.ModelNew, task, protocol, device)
        inputs = harness.make_inputs(task, harness.timing_seed(protocol, 0), device)
    except BaseException as exc:  # noqa: BLE001
        jobs._fail(rep, harness.classify(exc, "import"), exc, source, "load")
        return False
    triton_names = jit_function_names(module)

    def run(_i: int = 0):
        with torch.no_grad():
            return model(*inputs)

    try:
        for i in range(max(MIN_WARMUP, protocol.warmup_runs)):
            run(i)
        torch.cuda.synchronize(device)
    except BaseException as exc:  # noqa: BLE001
        jobs._fail(rep, harness.classify(exc, "run"), exc, source, "profile")
        return False

    if job.get("time_candidate", True):
        try:
            event_ms, _, _ = timing.time_on_gpu(run, lambda _i: None, warmup=0,
                                                runs=min(protocol.timed_runs, MAX_TIMED_RUNS),
                                                flush_l2=protocol.flush_l2, device=device)
            stats = timing.summarize(event_ms, protocol.trim_fraction)
            rep.send({"kind": "timing", "median_ms": stats.median_ms, "mean_ms": stats.mean_ms})
        except Exception as exc:  # noqa: BLE001
            note(f"candidate timing failed: {type(exc).__name__}: {exc}")

    # 4. per-kernel breakdown
    capture.reset_counts()
    try:
        from torch.profiler import ProfilerActivity, profile

        torch.cuda.synchronize(device)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for i in range(PROFILE_RUNS):
                run(i)
            torch.cuda.synchronize(device)
        rows = device_rows(prof.key_averages())
        if not rows:
            rows = device_rows(prof.events())
        if not rows:
            note("the profiler recorded no GPU kernels (CUPTI unavailable?)")
        triton_names |= capture.names()
        rep.send({"kind": "kernels", "runs": PROFILE_RUNS, "rows": [list(r) for r in rows],
                  "triton_names": sorted(triton_names)})
    except Exception as exc:  # noqa: BLE001
        note(f"torch.profiler failed: {type(exc).__name__}: {exc}")

    try:
        infos = capture.infos()
        if not infos and capture.kernels:
            infos = capture.infos(launched_only=False)
        rep.send({"kind": "triton", "kernels": [k.model_dump(mode="json") for k in infos]})
        if capture.errors:
            note("launch capture: " + "; ".join(capture.errors))
        if not capture.kernels:
            note("no compiled Triton kernel was seen at launch (the launch path may differ in this Triton)")
    except Exception as exc:  # noqa: BLE001
        note(f"Triton launch metadata failed: {type(exc).__name__}: {exc}")
    return True


# --- the trusted side ----------------------------------------------------------------------------------

def profile_candidate(evaluator, task, source: str | None, protocol=None) -> ProfileReport:
    """Profile a correct candidate (or, with no source, only the floor and the peaks)."""
    from .service import _worker_failure
    from .task import source_hash

    protocol = protocol or task.protocol
    base = {"task_id": task.task_id, "source_hash": source_hash(source) if source else "",
            "device": evaluator.device}
    candidate_ms, timing_source = None, None
    if source and evaluator.is_gpu:
        result = evaluator.evaluate(task, source, protocol)
        if not result.ok:
            detail = result.cheat_reason or (result.error.message if result.error else "")
            report = ProfileReport(**base, error=ErrorInfo(
                error_class="NotCorrect", message=f"only a correct candidate is profiled; this one is "
                                                  f"{result.status.value}" + (f": {detail[:300]}" if detail else "")))
            report.summary = summarize_profile(report)
            return report
        if result.timing is not None:
            candidate_ms, timing_source = result.timing.median_ms, "evaluation"

    cache = PeaksCache(Path(evaluator.work_dir) / PEAKS_FILE)
    job_source = source if evaluator.is_gpu else None
    job = evaluator._job("profile", task, protocol, candidate_source=job_source,
                         known_peaks={k: v.model_dump(mode="json") for k, v in cache.load().items()},
                         time_candidate=candidate_ms is None)
    if evaluator.is_gpu:
        with evaluator.gpu_lock():
            res = evaluator._run(job, protocol.timeout_s)
    else:
        res = evaluator._run(job, protocol.timeout_s)

    notes: list[str] = []
    floor: dict | None = None
    peaks: DevicePeaks | None = None
    rows: list[tuple[str, int, float]] = []
    runs = 0
    triton_names: set[str] = set()
    triton_infos: list[TritonKernelInfo] = []
    for head, _ in res.messages:
        kind = head.get("kind")
        try:
            if kind == "peaks" and peaks is None:
                peaks = DevicePeaks.model_validate(head["peaks"])
                if not head.get("cached"):
                    if plausible_peaks(peaks):
                        cache.save(str(head["key"]), peaks)
                    else:
                        notes.append("measured peaks look implausible; not cached")
            elif kind == "floor" and floor is None:
                floor = {"bytes": int(head["bytes"]), "flops": int(head["flops"]), "dtype": head.get("dtype")}
            elif kind == "timing" and candidate_ms is None:
                candidate_ms, timing_source = float(head["median_ms"]), "profile run"
            elif kind == "kernels" and not rows:
                runs = int(head.get("runs", PROFILE_RUNS))
                rows = [(str(r[0]), int(r[1]), float(r[2])) for r in head.get("rows", [])]
                triton_names = {str(n) for n in head.get("triton_names", [])}
            elif kind == "triton" and not triton_infos:
                triton_infos = [TritonKernelInfo.model_validate(k) for k in head.get("kernels", [])]
            elif kind == "infra":
                notes.append("infra: " + str(head.get("message", ""))[:240])
            elif kind == "notes":
                notes.extend(str(n)[:240] for n in head.get("notes", [])[:10])
        except (KeyError, TypeError, ValueError) as exc:
            notes.append(f"unreadable {kind} message: {exc}")

    error = _worker_failure(res, subject="profile run")
    if error is None and res.first("done") is None:
        error = ErrorInfo(error_class="IncompleteRun", message="the profile run ended without finishing")
    kernels = kernel_breakdown(rows, runs, triton_names)
    if not evaluator.is_gpu:
        error = error or ErrorInfo(
            error_class="NoGPU", message=f"profiling needs a CUDA device; this evaluator runs on "
                                         f"{evaluator.device} (only the task's floor was computed)")
    report = build_report(floor=floor, peaks=peaks, kernels=kernels, triton_kernels=triton_infos,
                          candidate_ms=candidate_ms if evaluator.is_gpu else None, runs=runs, notes=notes,
                          **base, profiled=evaluator.is_gpu and bool(source) and error is None,
                          timing_source=timing_source,
                          error=error)
    return report
