"""KernelBench level 2, 99_Matmul_GELU_Softmax: torch.mm (cuBLAS) for x @ W.T; one Triton kernel
per row for bias, exact GELU and a numerically safe softmax, with the row held in registers.

A candidate for KernelBench's harness and for our evaluator alike (both load `ModelNew`).
Runs in the process that evaluates it; under TRITON_INTERPRET=1 on a CPU as well.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_softmax_kernel(y_ptr, bias_ptr, out_ptr, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    y = tl.load(y_ptr + row * N + cols, mask=mask, other=0.0) + tl.load(bias_ptr + cols, mask=mask, other=0.0)
    y = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))
    y = tl.where(mask, y, float("-inf"))
    e = tl.exp(y - tl.max(y, axis=0))
    tl.store(out_ptr + row * N + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = torch.mm(x.contiguous(), self.linear.weight.t())
        n = y.shape[1]
        block = triton.next_power_of_2(n)
        # In place: each program reads its whole row before writing it.
        gelu_softmax_kernel[(y.shape[0],)](y, self.linear.bias, y, n, BLOCK_N=block,
                                           num_warps=8 if block >= 4096 else 4)
        return y
