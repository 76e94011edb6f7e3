"""Worker-side kernel capture: the candidate's Triton kernels and their launch metadata, and the
GPU rows of a `torch.profiler` run.

Every probe of Triton's internals is guarded: odd objects or a different launch path become notes.
"""

from __future__ import annotations

from typing import Any

from ..profile.report import MAX_KERNEL_NAME, TritonKernelInfo

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

    def install(self, cls: Any = None) -> None:
        if cls is None:
            from triton.runtime.jit import JITFunction

            cls = JITFunction
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
