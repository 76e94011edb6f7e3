"""Device peaks: what this GPU measurably sustains, whether a measurement is plausible, and the
on-disk cache of measurements kept by the trusted parent.

Measured in the worker before any candidate code exists; each probe fails on its own, as a note.
"""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path

from pydantic import Field

from ..results import Model

COPY_BYTES = 2 << 30  # device-to-device copy used to measure bandwidth (bytes per copy)
PEAKS_FILE = "device_peaks.json"


class DevicePeaks(Model):
    """What this device measurably sustains (not datasheet numbers)."""

    device_name: str
    torch_version: str
    copy_gbps: float | None = None  # device-to-device copy, (read + written) bytes / s, in GB/s
    bf16_tflops: float | None = None  # torch.matmul bf16 8192^3
    fp32_tflops: float | None = None  # torch.matmul fp32 4096^3, TF32 off
    tf32_tflops: float | None = None  # torch.matmul fp32 4096^3, TF32 on
    notes: list[str] = Field(default_factory=list)


def peaks_key(device_name: str, torch_version: str) -> str:
    return f"{device_name} | torch {torch_version}"


def _time_cuda(fn, iters: int, repeats: int = 3) -> float:
    """Best mean ms per call of `fn` over `repeats` groups of `iters` calls, by CUDA events."""
    from ..worker import timing

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
