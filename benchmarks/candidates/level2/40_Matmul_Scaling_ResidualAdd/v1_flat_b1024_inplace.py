"""KernelBench level 2, 40_Matmul_Scaling_ResidualAdd: torch.mm (cuBLAS) for x @ W.T; one flat Triton kernel (BLOCK=1024, num_warps=4, in place) for bias, * scaling_factor, + itself (residual).

A candidate for KernelBench's harness and for our evaluator alike (both load `ModelNew`).
Runs in the process that evaluates it; under TRITON_INTERPRET=1 on a CPU as well.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def epilogue_kernel(y_ptr, bias_ptr, out_ptr, n_elements, n_cols, scaling_factor, BLOCK: tl.constexpr):
    # One flat pass over the GEMM's output: bias (by column) and the whole elementwise chain.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = y + tl.load(bias_ptr + offs % n_cols, mask=mask, other=0.0)
    y = y * scaling_factor + y
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = float(scaling_factor)

    def forward(self, x):
        # cuBLAS GEMM without its bias; bias and epilogue run in one Triton pass in place.
        y = torch.mm(x.contiguous(), self.matmul.weight.t())
        out = y
        n = y.numel()
        epilogue_kernel[(triton.cdiv(n, 1024),)](y, self.matmul.bias, out, n, y.shape[1], self.scaling_factor, BLOCK=1024, num_warps=4)
        return out
