"""What the harness watches inside a candidate's process.

Bound at import, in the warm parent, before any candidate code exists: the original
harness functions, the global torch flags, and a counter of Triton kernel launches.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from typing import Any

import torch
import torch.testing
from torch.utils._python_dispatch import TorchDispatchMode

# Functions a candidate might replace to fool comparison or timing.
_GUARDED_PATHS = (
    "torch.allclose", "torch.equal", "torch.isclose", "torch.testing.assert_close",
    "torch.cuda.synchronize", "torch.cuda.Event.record", "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize", "torch.cuda.Stream.synchronize",
    "time.perf_counter", "time.perf_counter_ns", "time.time", "time.monotonic",
    "torch.Tensor.__eq__", "torch.Tensor.sub", "torch.Tensor.abs",
)
_MODULES = {"torch": torch, "time": time}


def _resolve(path: str) -> Any:
    head, *rest = path.split(".")
    obj: Any = _MODULES[head]
    for part in rest:
        obj = getattr(obj, part, None)
    return obj


_ORIGINALS = {p: _resolve(p) for p in _GUARDED_PATHS}


def replaced_functions() -> list[str]:
    """Names of guarded functions that no longer are the originals."""
    return [p for p, orig in _ORIGINALS.items() if _resolve(p) is not orig]


# --- global flags --------------------------------------------------------------------

def _read_flags() -> dict[str, object]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "torch.backends.cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction":
                torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
            "torch.backends.cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
            "torch.backends.cudnn.benchmark": torch.backends.cudnn.benchmark,
            "torch.backends.cudnn.deterministic": torch.backends.cudnn.deterministic,
            "torch.backends.cudnn.enabled": torch.backends.cudnn.enabled,
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "num_threads": torch.get_num_threads(),
            "default_dtype": torch.get_default_dtype(),
            "grad_enabled": torch.is_grad_enabled(),
        }


def _write_flag(name: str, value) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "deterministic_algorithms":
            torch.use_deterministic_algorithms(bool(value))
        elif name == "float32_matmul_precision":
            torch.set_float32_matmul_precision(value)
        elif name == "num_threads":
            torch.set_num_threads(value)
        elif name == "default_dtype":
            torch.set_default_dtype(value)
        elif name == "grad_enabled":
            torch.set_grad_enabled(value)
        else:
            *owner, attr = name.split(".")
            setattr(_resolve(".".join(owner)), attr, value)


class FlagGuard:
    """Snapshot of the global torch flags; `restore` puts them back and says which changed."""

    def __init__(self) -> None:
        self.snapshot = _read_flags()
        self.changed: list[str] = []

    def restore(self) -> list[str]:
        now = _read_flags()
        for name, value in self.snapshot.items():
            if now[name] != value:
                if name not in self.changed:
                    self.changed.append(name)
                _write_flag(name, value)
        return self.changed


# --- Triton launches -----------------------------------------------------------------

class LaunchCounter:
    """Counts Triton kernel launches by wrapping the launchers of JIT and interpreted kernels;
    inside `skipping()`, launches are dropped instead (and not counted)."""

    def __init__(self) -> None:
        self.count = 0
        self.skip = False
        self._installed = False
        self._originals: list[tuple[type, object]] = []

    def uninstall(self) -> None:
        """Put the launchers back (before timing: counting would add to every launch)."""
        for cls, original in self._originals:
            cls.run = original  # type: ignore[attr-defined]
        self._originals.clear()
        self._installed = False

    def install(self) -> None:
        if self._installed:
            return
        from triton.runtime import jit as jit_mod

        targets = [jit_mod.JITFunction]
        try:
            from triton.runtime import interpreter

            targets.append(interpreter.InterpretedFunction)
        except ImportError:  # pragma: no cover - older Triton
            pass
        for cls in targets:
            original = cls.run
            self._originals.append((cls, original))

            def counting_run(self_, *args, __orig=original, **kwargs):
                if self.skip:
                    return None
                self._bump()
                return __orig(self_, *args, **kwargs)

            cls.run = counting_run
        self._installed = True

    def _bump(self) -> None:
        self.count += 1

    @contextlib.contextmanager
    def skipping(self):
        """Every Triton launch inside is dropped: what the forward returns then is not the kernels' work."""
        self.skip = True
        try:
            yield
        finally:
            self.skip = False


# --- aten ops and poisoned allocations ----------------------------------------------------

# Ops that move, view or allocate data but compute nothing of the task's result.
TRIVIAL_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full", "scalar_tensor",
    "copy_", "copy", "clone", "_to_copy", "to", "view", "_unsafe_view", "reshape", "expand", "permute",
    "transpose", "t", "contiguous", "as_strided", "slice", "select", "unsqueeze", "squeeze", "detach",
    "alias", "lift_fresh", "fill_", "zero_", "narrow", "flatten", "unflatten", "split", "split_with_sizes",
    "chunk", "unbind", "resize_", "set_", "_local_scalar_dense", "item", "arange", "view_as", "expand_as",
    "_reshape_alias", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_same_size",
    "_has_compatible_shallow_copy_type", "lift_fresh_copy", "record_stream", "randn", "rand", "normal_",
    "uniform_", "random_", "stack", "cat", "pad", "constant_pad_nd", "index", "index_select", "_pin_memory",
    "is_pinned", "numpy_T", "movedim", "dim", "size", "stride", "storage_offset", "_foreach_copy_",
})
_EMPTY_OPS = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})


def op_name(func) -> str:
    """`aten.add.Tensor` -> `add`."""
    return getattr(func, "_overloadpacket", func).__name__ if hasattr(func, "_overloadpacket") else str(func)


class OpRecorder(TorchDispatchMode):
    """Records the aten ops run; optionally fills fresh uninitialized allocations with NaN.

    Poisoning means a kernel that leaves part of its output unwritten, relying on whatever the
    allocator hands back (often the previous call's result), produces NaN instead.
    """

    def __init__(self, poison: bool) -> None:
        super().__init__()
        self.poison = poison
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = op_name(func)
        self.ops.add(name)
        if self.poison and name in _EMPTY_OPS and isinstance(out, torch.Tensor) and out.numel():
            with torch.no_grad():
                if out.is_floating_point() or out.is_complex():
                    out.fill_(float("nan"))
                elif out.dtype == torch.bool:
                    out.fill_(True)
                else:
                    out.fill_(torch.iinfo(out.dtype).max // 3)
        return out


def compute_ops(ops: set[str]) -> set[str]:
    """The ops that do arithmetic of the task (not movement, views or allocation)."""
    return {o for o in ops if o not in TRIVIAL_OPS and not o.startswith("_foreach")}


@contextlib.contextmanager
def recording(poison: bool):
    rec = OpRecorder(poison)
    with rec:
        yield rec
