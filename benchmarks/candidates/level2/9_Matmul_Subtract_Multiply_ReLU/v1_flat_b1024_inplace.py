"""KernelBench level 2, 9_Matmul_Subtract_Multiply_ReLU: torch.mm (cuBLAS) for x @ W.T; one flat Triton kernel (BLOCK=1024, num_warps=4, in place) for bias, - subtract_value, * multiply_value, ReLU.

A candidate for KernelBench's harness and for our evaluator alike (both load `ModelNew`).
Runs in the process that evaluates it; under TRITON_INTERPRET=1 on a CPU as well.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def epilogue_kernel(y_ptr, bias_ptr, out_ptr, n_elements, n_cols, subtract_value, multiply_value, BLOCK: tl.constexpr):
    # One flat pass over the GEMM's output: bias (by column) and the whole elementwise chain.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = y + tl.load(bias_ptr + offs % n_cols, mask=mask, other=0.0)
    y = tl.maximum((y - subtract_value) * multiply_value, 0.0)
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, subtract_value, multiply_value):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.subtract_value = float(subtract_value)
        self.multiply_value = float(multiply_value)

    def forward(self, x):
        # cuBLAS GEMM without its bias; bias and epilogue run in one Triton pass in place.
        y = torch.mm(x.contiguous(), self.linear.weight.t())
        out = y
        n = y.numel()
        epilogue_kernel[(triton.cdiv(n, 1024),)](y, self.linear.bias, out, n, y.shape[1], self.subtract_value, self.multiply_value, BLOCK=1024, num_warps=4)
        return out
