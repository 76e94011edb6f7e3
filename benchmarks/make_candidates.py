"""Writes the GEMM-epilogue candidates of benchmarks/candidates/level2 from one table.

Runs on any machine, once, by hand (`python benchmarks/make_candidates.py`); its output is
committed. Each written file is a standalone candidate (a `ModelNew` with its Triton kernels
inline) that both KernelBench's harness and our evaluator load. The tasks here are a linear
layer followed by an elementwise chain; per task five variants move that chain (and the bias)
into Triton in different ways, the last one the GEMM too. Candidates for tasks of other shapes
are written by hand in the same folder.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

OUT = Path(__file__).resolve().parent / "candidates" / "level2"

# name -> constructor signature, module body, weight and bias expressions, scalar attributes
# passed to the kernels, the epilogue on the fp32 value `y` (bias already added), what it computes.
TASKS: dict[str, dict] = {
    "12_Gemm_Multiply_LeakyReLU": dict(
        init="in_features, out_features, multiplier, negative_slope",
        body=["self.gemm = nn.Linear(in_features, out_features)", "self.multiplier = float(multiplier)",
              "self.negative_slope = float(negative_slope)"],
        weight="self.gemm.weight", bias="self.gemm.bias", scalars=["multiplier", "negative_slope"],
        epilogue=["y = y * multiplier", "y = tl.where(y > 0, y, y * negative_slope)"],
        what="bias, * multiplier, LeakyReLU"),
    "63_Gemm_ReLU_Divide": dict(
        init="in_features, out_features, divisor",
        body=["self.linear = nn.Linear(in_features, out_features)", "self.divisor = float(divisor)"],
        weight="self.linear.weight", bias="self.linear.bias", scalars=["divisor"],
        epilogue=["y = tl.maximum(y, 0.0) / divisor"],
        what="bias, ReLU, / divisor"),
    "86_Matmul_Divide_GELU": dict(
        init="input_size, output_size, divisor",
        body=["self.linear = nn.Linear(input_size, output_size)", "self.divisor = float(divisor)"],
        weight="self.linear.weight", bias="self.linear.bias", scalars=["divisor"],
        epilogue=["y = y / divisor", "y = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))"],
        what="bias, / divisor, exact (erf) GELU"),
    "9_Matmul_Subtract_Multiply_ReLU": dict(
        init="in_features, out_features, subtract_value, multiply_value",
        body=["self.linear = nn.Linear(in_features, out_features)", "self.subtract_value = float(subtract_value)",
              "self.multiply_value = float(multiply_value)"],
        weight="self.linear.weight", bias="self.linear.bias", scalars=["subtract_value", "multiply_value"],
        epilogue=["y = tl.maximum((y - subtract_value) * multiply_value, 0.0)"],
        what="bias, - subtract_value, * multiply_value, ReLU"),
    "81_Gemm_Swish_Divide_Clamp_Tanh_Clamp": dict(
        init="in_features, out_features, bias=True",
        body=["self.gemm = nn.Linear(in_features, out_features, bias=bias)"],
        weight="self.gemm.weight", bias="self.gemm.bias", scalars=[],
        epilogue=["y = y * tl.sigmoid(y) / 2.0",
                  "y = tl.minimum(tl.maximum(y, -1.0), 1.0)",
                  "# tanh(y) = 2 sigmoid(2y) - 1: one exp, and exact enough on [-1, 1]",
                  "y = 2.0 * tl.sigmoid(2.0 * y) - 1.0",
                  "y = tl.minimum(tl.maximum(y, -1.0), 1.0)"],
        what="bias, Swish, / 2, clamp, tanh, clamp"),
    "53_Gemm_Scaling_Hardtanh_GELU": dict(
        init="in_features, out_features, scaling_factor, hardtanh_min, hardtanh_max",
        body=["self.gemm = nn.Linear(in_features, out_features)", "self.scaling_factor = float(scaling_factor)",
              "self.hardtanh_min = float(hardtanh_min)", "self.hardtanh_max = float(hardtanh_max)"],
        weight="self.gemm.weight", bias="self.gemm.bias", scalars=["scaling_factor", "hardtanh_min", "hardtanh_max"],
        epilogue=["y = tl.minimum(tl.maximum(y * scaling_factor, hardtanh_min), hardtanh_max)",
                  "y = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))"],
        what="bias, * scaling_factor, Hardtanh, exact GELU"),
    "76_Gemm_Add_ReLU": dict(
        init="in_features, out_features, bias_shape",
        body=["self.gemm = nn.Linear(in_features, out_features, bias=False)",
              "self.bias = nn.Parameter(torch.randn(bias_shape))"],
        weight="self.gemm.weight", bias="self.bias", scalars=[],
        epilogue=["y = tl.maximum(y, 0.0)"],
        what="+ bias parameter, ReLU"),
    "29_Matmul_Mish_Mish": dict(
        init="in_features, out_features",
        body=["self.linear = nn.Linear(in_features, out_features)"],
        weight="self.linear.weight", bias="self.linear.bias", scalars=[],
        epilogue=["# mish(y) = y * tanh(softplus(y)); softplus is linear past 20, as in PyTorch",
                  "sp = tl.where(y > 20.0, y, tl.log(1.0 + tl.exp(tl.minimum(y, 20.0))))",
                  "y = y * (2.0 * tl.sigmoid(2.0 * sp) - 1.0)",
                  "sp = tl.where(y > 20.0, y, tl.log(1.0 + tl.exp(tl.minimum(y, 20.0))))",
                  "y = y * (2.0 * tl.sigmoid(2.0 * sp) - 1.0)"],
        what="bias, Mish, Mish"),
    "40_Matmul_Scaling_ResidualAdd": dict(
        init="in_features, out_features, scaling_factor",
        body=["self.matmul = nn.Linear(in_features, out_features)", "self.scaling_factor = float(scaling_factor)"],
        weight="self.matmul.weight", bias="self.matmul.bias", scalars=["scaling_factor"],
        epilogue=["y = y * scaling_factor + y"],
        what="bias, * scaling_factor, + itself (residual)"),
}

# The five variants of a search-shaped task; first-contact-only tasks get the first one.
SEARCH = ["12_Gemm_Multiply_LeakyReLU", "63_Gemm_ReLU_Divide", "86_Matmul_Divide_GELU",
          "9_Matmul_Subtract_Multiply_ReLU", "81_Gemm_Swish_Divide_Clamp_Tanh_Clamp", "53_Gemm_Scaling_Hardtanh_GELU"]

HEAD = '''"""KernelBench level 2, {name}: {summary}

A candidate for KernelBench's harness and for our evaluator alike (both load `ModelNew`).
Runs in the process that evaluates it; under TRITON_INTERPRET=1 on a CPU as well.
"""
{imports}
import torch
import torch.nn as nn
import triton
import triton.language as tl
'''


def _indent(lines: list[str], n: int) -> str:
    return textwrap.indent("\n".join(lines), " " * n)


def _sig(spec: dict) -> str:
    return "".join(f", {s}" for s in spec["scalars"])


def _args(spec: dict) -> str:
    return "".join(f", self.{s}" for s in spec["scalars"])


def _module(spec: dict, forward: list[str]) -> str:
    return (f"\n\nclass ModelNew(nn.Module):\n    def __init__(self, {spec['init']}):\n        super().__init__()\n"
            + _indent(spec["body"], 8) + "\n\n    def forward(self, x):\n" + _indent(forward, 8) + "\n")


def flat(spec: dict, block: int, warps: int, in_place: bool) -> tuple[str, str]:
    kernel = f'''

@triton.jit
def epilogue_kernel(y_ptr, bias_ptr, out_ptr, n_elements, n_cols{_sig(spec)}, BLOCK: tl.constexpr):
    # One flat pass over the GEMM's output: bias (by column) and the whole elementwise chain.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = y + tl.load(bias_ptr + offs % n_cols, mask=mask, other=0.0)
{_indent(spec["epilogue"], 4)}
    tl.store(out_ptr + offs, y, mask=mask)
'''
    forward = [f"# cuBLAS GEMM without its bias; bias and epilogue run in one Triton pass{' in place' if in_place else ''}.",
               f"y = torch.mm(x.contiguous(), {spec['weight']}.t())",
               "out = y" if in_place else "out = torch.empty_like(y)",
               "n = y.numel()",
               f"epilogue_kernel[(triton.cdiv(n, {block}),)](y, {spec['bias']}, out, n, y.shape[1]{_args(spec)}, "
               f"BLOCK={block}, num_warps={warps})",
               "return out"]
    what = (f"torch.mm (cuBLAS) for x @ W.T; one flat Triton kernel (BLOCK={block}, num_warps={warps}"
            f"{', in place' if in_place else ''}) for {spec['what']}")
    return kernel + _module(spec, forward), what


def tiled(spec: dict, bm: int, bn: int, warps: int) -> tuple[str, str]:
    kernel = f'''

@triton.jit
def epilogue_kernel(y_ptr, bias_ptr, M, N{_sig(spec)}, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # 2-D tiles: the bias is loaded once per column tile instead of once per element.
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    ptrs = y_ptr + rows[:, None].to(tl.int64) * N + cols[None, :]
    bias = tl.load(bias_ptr + cols, mask=cols < N, other=0.0)
    y = tl.load(ptrs, mask=mask, other=0.0).to(tl.float32) + bias[None, :]
{_indent(spec["epilogue"], 4)}
    tl.store(ptrs, y, mask=mask)
'''
    forward = ["# cuBLAS GEMM without its bias; bias and epilogue in 2-D Triton tiles, in place.",
               f"y = torch.mm(x.contiguous(), {spec['weight']}.t())",
               "M, N = y.shape",
               f"grid = (triton.cdiv(M, {bm}), triton.cdiv(N, {bn}))",
               f"epilogue_kernel[grid](y, {spec['bias']}, M, N{_args(spec)}, BLOCK_M={bm}, BLOCK_N={bn}, "
               f"num_warps={warps})",
               "return y"]
    what = (f"torch.mm (cuBLAS) for x @ W.T; a 2-D tiled Triton kernel ({bm}x{bn}, num_warps={warps}, in place, "
            f"bias once per column tile) for {spec['what']}")
    return kernel + _module(spec, forward), what


def autotuned(spec: dict) -> tuple[str, str]:
    kernel = f'''

CONFIGS = [triton.Config({{"BLOCK": b}}, num_warps=w) for b in (1024, 2048, 4096, 8192) for w in (4, 8)]
if os.environ.get("TRITON_INTERPRET") == "1":
    CONFIGS = CONFIGS[:1]  # the interpreter cannot benchmark configurations


# Autotuning runs the kernel several times, so it writes a separate output, never in place.
@triton.autotune(configs=CONFIGS, key=["n_elements", "n_cols"])
@triton.jit
def epilogue_kernel(y_ptr, bias_ptr, out_ptr, n_elements, n_cols{_sig(spec)}, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = y + tl.load(bias_ptr + offs % n_cols, mask=mask, other=0.0)
{_indent(spec["epilogue"], 4)}
    tl.store(out_ptr + offs, y, mask=mask)
'''
    forward = ["# cuBLAS GEMM without its bias; bias and epilogue in one autotuned Triton pass.",
               f"y = torch.mm(x.contiguous(), {spec['weight']}.t())",
               "out = torch.empty_like(y)",
               "n = y.numel()",
               "grid = lambda meta: (triton.cdiv(n, meta[\"BLOCK\"]),)",
               f"epilogue_kernel[grid](y, {spec['bias']}, out, n, y.shape[1]{_args(spec)})",
               "return out"]
    what = f"torch.mm (cuBLAS) for x @ W.T; one autotuned flat Triton kernel (8 configs) for {spec['what']}"
    return kernel + _module(spec, forward), what


def full_gemm(spec: dict, bm: int, bn: int, bk: int, warps: int, stages: int) -> tuple[str, str]:
    kernel = f'''

@triton.jit
def gemm_epilogue_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, M, N, K, stride_xm, stride_wn{_sig(spec)},
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         GROUP_M: tl.constexpr):
    # Grouped launch order: programs that run together share rows of x and columns of W in L2.
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    width = GROUP_M * num_n
    first_m = (pid // width) * GROUP_M
    size_m = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % size_m
    pid_n = (pid % width) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(x_ptr + rm[:, None].to(tl.int64) * stride_xm + kk[None, :],
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        # W is [N, K]: read as a transposed [BLOCK_K, BLOCK_N] tile.
        b = tl.load(w_ptr + rn[None, :].to(tl.int64) * stride_wn + kk[:, None],
                    mask=(rn[None, :] < N) & (kk[:, None] < K), other=0.0)
        acc += tl.dot(a, b)
    # Epilogue on the accumulator, in registers: the GEMM's output never goes to memory unfinished.
    y = acc + tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
{_indent(spec["epilogue"], 4)}
    tl.store(out_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], y,
             mask=(rm[:, None] < M) & (rn[None, :] < N))
'''
    forward = ["x = x.contiguous()",
               f"w = {spec['weight']}",
               "M, K = x.shape",
               "N = w.shape[0]",
               "out = torch.empty((M, N), device=x.device, dtype=torch.float32)",
               f"grid = (triton.cdiv(M, {bm}) * triton.cdiv(N, {bn}),)",
               f"gemm_epilogue_kernel[grid](x, w, {spec['bias']}, out, M, N, K, x.stride(0), w.stride(0){_args(spec)},",
               f"                           BLOCK_M={bm}, BLOCK_N={bn}, BLOCK_K={bk}, GROUP_M=8,",
               f"                           num_warps={warps}, num_stages={stages})",
               "return out"]
    what = (f"the whole layer in Triton: tiled tl.dot GEMM ({bm}x{bn}x{bk}, grouped order, num_warps={warps}, "
            f"num_stages={stages}; TF32 on the GPU) with {spec['what']} fused on the accumulator")
    return kernel + _module(spec, forward), what


VARIANTS = {
    "v1_flat_b1024_inplace": lambda s: flat(s, 1024, 4, True),
    "v2_flat_b4096_w8": lambda s: flat(s, 4096, 8, False),
    "v3_tiled_16x256": lambda s: tiled(s, 16, 256, 4),
    "v4_autotuned": autotuned,
    "v5_triton_gemm_128x128": lambda s: full_gemm(s, 128, 128, 32, 8, 3),
}


def write(name: str, variant: str) -> Path:
    code, what = VARIANTS[variant](TASKS[name])
    path = OUT / name / f"{variant}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    imports = "\nimport os\n" if "os.environ" in code else ""
    path.write_text(HEAD.format(name=name, summary=what + ".", imports=imports) + code)
    return path


def main() -> None:
    for name in TASKS:
        for variant in (VARIANTS if name in SEARCH else ["v1_flat_b1024_inplace"]):
            print(write(name, variant))


if __name__ == "__main__":
    main()
