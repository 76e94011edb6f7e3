"""KernelBench level 2, 81_Gemm_Swish_Divide_Clamp_Tanh_Clamp: torch.mm (cuBLAS) for x @ W.T; a 2-D tiled Triton kernel (16x256, num_warps=4, in place, bias once per column tile) for bias, Swish, / 2, clamp, tanh, clamp.

A candidate for KernelBench's harness and for our evaluator alike (both load `ModelNew`).
Runs in the process that evaluates it; under TRITON_INTERPRET=1 on a CPU as well.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def epilogue_kernel(y_ptr, bias_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # 2-D tiles: the bias is loaded once per column tile instead of once per element.
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    ptrs = y_ptr + rows[:, None].to(tl.int64) * N + cols[None, :]
    bias = tl.load(bias_ptr + cols, mask=cols < N, other=0.0)
    y = tl.load(ptrs, mask=mask, other=0.0).to(tl.float32) + bias[None, :]
    y = y * tl.sigmoid(y) / 2.0
    y = tl.minimum(tl.maximum(y, -1.0), 1.0)
    # tanh(y) = 2 sigmoid(2y) - 1: one exp, and exact enough on [-1, 1]
    y = 2.0 * tl.sigmoid(2.0 * y) - 1.0
    y = tl.minimum(tl.maximum(y, -1.0), 1.0)
    tl.store(ptrs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=bias)

    def forward(self, x):
        # cuBLAS GEMM without its bias; bias and epilogue in 2-D Triton tiles, in place.
        y = torch.mm(x.contiguous(), self.gemm.weight.t())
        M, N = y.shape
        grid = (triton.cdiv(M, 16), triton.cdiv(N, 256))
        epilogue_kernel[grid](y, self.gemm.bias, M, N, BLOCK_M=16, BLOCK_N=256, num_warps=4)
        return y
