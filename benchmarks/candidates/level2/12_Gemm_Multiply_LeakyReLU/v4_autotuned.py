"""KernelBench level 2, 12_Gemm_Multiply_LeakyReLU: torch.mm (cuBLAS) for x @ W.T; one autotuned flat Triton kernel (8 configs) for bias, * multiplier, LeakyReLU.

A candidate for KernelBench's harness and for our evaluator alike (both load `ModelNew`).
Runs in the process that evaluates it; under TRITON_INTERPRET=1 on a CPU as well.
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b in (1024, 2048, 4096, 8192) for w in (4, 8)]
if os.environ.get("TRITON_INTERPRET") == "1":
    CONFIGS = CONFIGS[:1]  # the interpreter cannot benchmark configurations


# Autotuning runs the kernel several times, so it writes a separate output, never in place.
@triton.autotune(configs=CONFIGS, key=["n_elements", "n_cols"])
@triton.jit
def epilogue_kernel(y_ptr, bias_ptr, out_ptr, n_elements, n_cols, multiplier, negative_slope, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = y + tl.load(bias_ptr + offs % n_cols, mask=mask, other=0.0)
    y = y * multiplier
    y = tl.where(y > 0, y, y * negative_slope)
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = float(multiplier)
        self.negative_slope = float(negative_slope)

    def forward(self, x):
        # cuBLAS GEMM without its bias; bias and epilogue in one autotuned Triton pass.
        y = torch.mm(x.contiguous(), self.gemm.weight.t())
        out = torch.empty_like(y)
        n = y.numel()
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
        epilogue_kernel[grid](y, self.gemm.bias, out, n, y.shape[1], self.multiplier, self.negative_slope)
        return out
