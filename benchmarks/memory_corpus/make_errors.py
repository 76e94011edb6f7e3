"""Produce the error texts of the labeled rule corpus by running small broken kernels.

Runs in one Python process, either on the local machine with the Triton CPU interpreter
(``TRITON_INTERPRET=1``, set below before Triton is imported), or with ``--gpu`` on a machine
with a CUDA GPU (tensors created on it, kernels compiled for it). Each case launches one
kernel that makes one mistake; the exception class and message it raises are written to
``errors.json`` (interpreter) or ``errors_gpu.json`` (GPU) beside this script, keyed by the
case name, with the Triton and torch versions. A case that raises nothing is recorded with
``error_class: null`` (a silent mistake there).

    python benchmarks/memory_corpus/make_errors.py            # interpreter
    python benchmarks/memory_corpus/make_errors.py --gpu --only dot_too_small,item_in_kernel,load_without_mask,\
        python_if_on_tensor,python_max_on_tensors,static_range_runtime_bound,where_condition_float

The recorded ``errors_gpu.json`` holds the cases that are silent in the interpreter (the second
command), run on an H200 (torch 2.11.0+cu130, Triton 3.6.0).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

GPU = "--gpu" in sys.argv
if not GPU:
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.language.extra import libdevice  # noqa: E402

OUT = Path(__file__).with_name("errors_gpu.json" if GPU else "errors.json")
if GPU:
    torch.set_default_device("cuda")
CASES: dict[str, callable] = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


@case
def tanh_missing():
    @triton.jit
    def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        tl.store(y_ptr + o, tl.tanh(tl.load(x_ptr + o)))
    x = torch.randn(16)
    k[(1,)](x, torch.empty_like(x), BLOCK=16)


@case
def libdevice_tanh_none():
    @triton.jit
    def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        y = libdevice.tanh(tl.load(x_ptr + o))
        tl.store(y_ptr + o, y * 2.0)
    x = torch.randn(16)
    k[(1,)](x, torch.empty_like(x), BLOCK=16)


@case
def atomic_add_empty_buffer():
    @triton.jit
    def k(x_ptr, out_ptr, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + o), axis=0))
    x = torch.ones(16)
    out = torch.empty(1)
    out.fill_(1234.0)  # what an uninitialized buffer may hold
    k[(1,)](x, out, BLOCK=16)
    assert abs(out.item() - 16.0) < 1e-3, f"expected 16.0, got {out.item()}"


@case
def arange_runtime_bound():
    @triton.jit
    def k(x_ptr, y_ptr, n):
        o = tl.arange(0, n)
        tl.store(y_ptr + o, tl.load(x_ptr + o))
    x = torch.randn(16)
    k[(1,)](x, torch.empty_like(x), 16)


@case
def arange_not_power_of_two():
    @triton.jit
    def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        tl.store(y_ptr + o, tl.load(x_ptr + o))
    x = torch.randn(10)
    k[(1,)](x, torch.empty_like(x), BLOCK=10)


@case
def linear_weight_transposed():
    @triton.jit
    def k(x_ptr, w_ptr, y_ptr, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr):
        rm, rk, rn = tl.arange(0, M), tl.arange(0, K), tl.arange(0, N)
        x = tl.load(x_ptr + rm[:, None] * K + rk[None, :])
        w = tl.load(w_ptr + rn[:, None] * K + rk[None, :])  # (N, K) as stored by nn.Linear
        tl.store(y_ptr + rm[:, None] * N + rn[None, :], tl.dot(x, w))
    lin = torch.nn.Linear(32, 16)
    x = torch.randn(16, 32)
    k[(1,)](x, lin.weight.detach(), torch.empty(16, 16), M=16, K=32, N=16)


@case
def dtype_called_as_cast():
    @triton.jit
    def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        tl.store(y_ptr + o, tl.float32(tl.load(x_ptr + o)))
    x = torch.randn(16, dtype=torch.float16)
    k[(1,)](x, torch.empty(16), BLOCK=16)


@case
def item_in_kernel():
    @triton.jit
    def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        s = tl.load(x_ptr).item()
        tl.store(y_ptr + o, tl.load(x_ptr + o) * s)
    x = torch.randn(16)
    k[(1,)](x, torch.empty_like(x), BLOCK=16)


@case
def dot_too_small():
    @triton.jit
    def k(a_ptr, b_ptr, c_ptr, M: tl.constexpr):
        r = tl.arange(0, M)
        a = tl.load(a_ptr + r[:, None] * M + r[None, :])
        b = tl.load(b_ptr + r[:, None] * M + r[None, :])
        tl.store(c_ptr + r[:, None] * M + r[None, :], tl.dot(a, b))
    a = torch.randn(8, 8)
    k[(1,)](a, a, torch.empty(8, 8), M=8)


@case
def dot_mixed_dtypes():
    @triton.jit
    def k(a_ptr, b_ptr, c_ptr, M: tl.constexpr):
        r = tl.arange(0, M)
        a = tl.load(a_ptr + r[:, None] * M + r[None, :])
        b = tl.load(b_ptr + r[:, None] * M + r[None, :])
        tl.store(c_ptr + r[:, None] * M + r[None, :], tl.dot(a, b))
    k[(1,)](torch.randn(16, 16), torch.randn(16, 16).half(), torch.empty(16, 16), M=16)


@case
def dot_one_dimensional():
    @triton.jit
    def k(a_ptr, b_ptr, c_ptr, M: tl.constexpr):
        r = tl.arange(0, M)
        c = tl.dot(tl.load(a_ptr + r), tl.load(b_ptr + r))
        tl.store(c_ptr + r, c)
    k[(1,)](torch.randn(16), torch.randn(16), torch.empty(16), M=16)


@case
def load_without_mask():
    @triton.jit
    def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + o, tl.load(x_ptr + o), mask=o < n)
    x = torch.randn(20)
    k[(2,)](x, torch.empty_like(x), 20, BLOCK=16)


@case
def mask_shape_mismatch():
    @triton.jit
    def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        r = tl.arange(0, BLOCK)
        offs = r[:, None] * BLOCK + r[None, :]
        m = tl.arange(0, 2 * BLOCK) < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)
    x = torch.randn(16, 16)
    k[(1,)](x, torch.empty_like(x), 256, BLOCK=16)


@case
def max_fill_zero():
    @triton.jit
    def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        tl.store(y_ptr, tl.max(tl.load(x_ptr + o, mask=o < n, other=0.0), axis=0))
    x = -torch.rand(10) - 1.0
    y = torch.empty(1)
    k[(1,)](x, y, 10, BLOCK=16)
    assert torch.allclose(y, x.max().reshape(1)), f"max {y.item():.4f} but reference {x.max().item():.4f}"


@case
def running_max_start_zero():
    @triton.jit
    def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        m = 0.0
        for start in range(0, n, BLOCK):
            o = start + tl.arange(0, BLOCK)
            m = tl.maximum(m, tl.max(tl.load(x_ptr + o, mask=o < n, other=-float("inf")), axis=0))
        tl.store(y_ptr, m)
    x = -torch.rand(64) - 1.0
    y = torch.empty(1)
    k[(1,)](x, y, 64, BLOCK=16)
    assert torch.allclose(y, x.max().reshape(1)), f"max {y.item():.4f} but reference {x.max().item():.4f}"


@case
def python_if_on_tensor():
    @triton.jit
    def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + o)
        if x > 0:
            x = x * 2
        tl.store(y_ptr + o, x)
    x = torch.randn(16)
    k[(1,)](x, torch.empty_like(x), BLOCK=16)


@case
def python_max_on_tensors():
    @triton.jit
    def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + o)
        tl.store(y_ptr + o, max(x, 0.0))
    x = torch.randn(16)
    k[(1,)](x, torch.empty_like(x), BLOCK=16)


@case
def program_id_axis_three():
    @triton.jit
    def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
        o = tl.program_id(3) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + o, tl.load(x_ptr + o))
    x = torch.randn(16)
    k[(1,)](x, torch.empty_like(x), BLOCK=16)


@case
def zeros_runtime_shape():
    @triton.jit
    def k(y_ptr, n):
        acc = tl.zeros((n,), dtype=tl.float32)
        tl.store(y_ptr + tl.arange(0, 16), acc)
    k[(1,)](torch.empty(16), 16)


@case
def sum_axis_out_of_range():
    @triton.jit
    def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        tl.store(y_ptr, tl.sum(tl.load(x_ptr + o), axis=1))
    k[(1,)](torch.randn(16), torch.empty(1), BLOCK=16)


@case
def grid_not_a_tuple():
    @triton.jit
    def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        tl.store(y_ptr + o, tl.load(x_ptr + o))
    x = torch.randn(16)
    k[1](x, torch.empty_like(x), BLOCK=16)


@case
def plain_python_helper():
    def helper(v):
        return v * 2

    @triton.jit
    def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        tl.store(y_ptr + o, helper(tl.load(x_ptr + o)))
    x = torch.randn(16)
    k[(1,)](x, torch.empty_like(x), BLOCK=16)


@case
def float_pointer_offset():
    @triton.jit
    def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK) * 1.0
        tl.store(y_ptr + o, tl.load(x_ptr + o))
    x = torch.randn(16)
    k[(1,)](x, torch.empty_like(x), BLOCK=16)


@case
def reshape_wrong_numel():
    @triton.jit
    def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        x = tl.reshape(tl.load(x_ptr + o), (4, 8))
        tl.store(y_ptr + o, tl.reshape(x, (BLOCK,)))
    x = torch.randn(16)
    k[(1,)](x, torch.empty_like(x), BLOCK=16)


@case
def static_range_runtime_bound():
    @triton.jit
    def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for i in tl.static_range(n):
            acc += tl.load(x_ptr + i * BLOCK + tl.arange(0, BLOCK))
        tl.store(y_ptr + tl.arange(0, BLOCK), acc)
    k[(1,)](torch.randn(64), torch.empty(16), 4, BLOCK=16)


@case
def store_tensor_to_scalar_pointer_block():
    @triton.jit
    def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + o)
        tl.store(y_ptr, x)
    x = torch.randn(16)
    k[(1,)](x, torch.empty(1), BLOCK=16)


@case
def host_tensor_arg_as_python_list():
    @triton.jit
    def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        tl.store(y_ptr + o, tl.load(x_ptr + o))
    k[(1,)]([1.0] * 16, torch.empty(16), BLOCK=16)


@case
def exp_of_integer_block():
    @triton.jit
    def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + o)
        tl.store(y_ptr + o, tl.exp(x.to(tl.int32)))
    x = torch.randn(16)
    k[(1,)](x, torch.empty_like(x), BLOCK=16)


@case
def arange_start_not_below_end():
    @triton.jit
    def k(y_ptr, BLOCK: tl.constexpr):
        o = tl.arange(BLOCK, 0)
        tl.store(y_ptr + o, o.to(tl.float32))
    k[(1,)](torch.empty(16), BLOCK=16)


@case
def zeros_shape_not_power_of_two():
    @triton.jit
    def k(y_ptr, BLOCK: tl.constexpr):
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        tl.store(y_ptr + tl.arange(0, 16), tl.sum(acc, axis=0))
    k[(1,)](torch.empty(16), BLOCK=12)


@case
def full_runtime_shape():
    @triton.jit
    def k(y_ptr, n, BLOCK: tl.constexpr):
        m = tl.full((n,), -float("inf"), tl.float32)
        tl.store(y_ptr + tl.arange(0, BLOCK), tl.max(m, axis=0))
    k[(1,)](torch.empty(16), 16, BLOCK=16)


@case
def where_condition_float():
    @triton.jit
    def k(x_ptr, y_ptr, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + o)
        tl.store(y_ptr + o, tl.where(x, x, 0.0))
    x = torch.randn(16)
    k[(1,)](x, torch.empty_like(x), BLOCK=16)


def main() -> int:
    out = {"triton": triton.__version__, "torch": torch.__version__, "interpreter": not GPU, "cases": {}}
    if GPU:
        out["device"] = torch.cuda.get_device_name()
    only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else list(CASES)
    for name, fn in CASES.items():
        if name not in only:
            continue
        try:
            fn()
            if GPU:
                torch.cuda.synchronize()
            entry = {"error_class": None, "message": None}
        except Exception as exc:  # noqa: BLE001 - the failure is what we record
            entry = {"error_class": type(exc).__name__, "message": str(exc).strip()[:1500],
                     "where": traceback.extract_tb(exc.__traceback__)[-1].name}
        out["cases"][name] = entry
        print(f"{name:40s} {entry['error_class']}: {(entry['message'] or '')[:150]!r}")
    OUT.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
