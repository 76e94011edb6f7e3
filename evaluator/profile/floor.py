"""The task's floor: FLOPs and minimum bytes of the reference forward, and the time they need at
the device's measured peaks.

`task_floor` runs in the worker on the trusted reference, before any candidate code exists;
`flops_peak` and `floor_ms` are pure.
"""

from __future__ import annotations

from .peaks import DevicePeaks

HALF_DTYPES = ("bfloat16", "float16")


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
    return max(by_dtype, key=by_dtype.__getitem__) if by_dtype else None


def task_floor(task, protocol, device) -> dict:
    """FLOPs of the reference forward and its minimum bytes (inputs + outputs + parameters)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from ..worker import harness

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
