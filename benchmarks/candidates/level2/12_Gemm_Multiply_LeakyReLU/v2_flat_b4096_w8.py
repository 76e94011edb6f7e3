"""KernelBench level 2, 12_Gemm_Multiply_LeakyReLU: torch.mm (cuBLAS) for x @ W.T; one flat Triton kernel (BLOCK=4096, num_warps=8) for bias, * multiplier, LeakyReLU.

A candidate for KernelBench's harness and for our evaluator alike (both load `ModelNew`).
Runs in the process that evaluates it; under TRITON_INTERPRET=1 on a CPU as well.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def epilogue_kernel(y_ptr, bias_ptr, out_ptr, n_elements, n_cols, multiplier, negative_slope, BLOCK: tl.constexpr):
    # One flat pass over the GEMM's output: bias (by column) and the whole elementwise chain.
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
        # cuBLAS GEMM without its bias; bias and epilogue run in one Triton pass.
        y = torch.mm(x.contiguous(), self.gemm.weight.t())
        out = torch.empty_like(y)
        n = y.numel()
        epilogue_kernel[(triton.cdiv(n, 4096),)](y, self.gemm.bias, out, n, y.shape[1], self.multiplier, self.negative_slope, BLOCK=4096, num_warps=8)
        return out
