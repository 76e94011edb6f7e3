"""KernelBench level 2, 45_Gemm_Sigmoid_LogSumExp: both GEMMs in torch.mm (cuBLAS); the first
one's bias and sigmoid in a flat Triton kernel, the second one's bias and the row logsumexp in a
per-row Triton kernel (online max and sum over column blocks).

A candidate for KernelBench's harness and for our evaluator alike (both load `ModelNew`).
Runs in the process that evaluates it; under TRITON_INTERPRET=1 on a CPU as well.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_sigmoid_kernel(y_ptr, bias_ptr, n_elements, n_cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    y = tl.load(y_ptr + offs, mask=mask, other=0.0) + tl.load(bias_ptr + offs % n_cols, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.sigmoid(y), mask=mask)


@triton.jit
def bias_logsumexp_kernel(y_ptr, bias_ptr, out_ptr, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    # Per-lane running max and sum of exponentials. The max starts finite so that a lane that has
    # seen only masked columns (-inf) never computes exp(-inf - -inf).
    m = tl.full((BLOCK_N,), -1e30, dtype=tl.float32)
    s = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for c0 in range(0, N, BLOCK_N):
        cols = c0 + tl.arange(0, BLOCK_N)
        mask = cols < N
        v = tl.load(y_ptr + row * N + cols, mask=mask, other=0.0) + tl.load(bias_ptr + cols, mask=mask, other=0.0)
        v = tl.where(mask, v, float("-inf"))
        new_m = tl.maximum(m, v)
        s = s * tl.exp(m - new_m) + tl.exp(v - new_m)
        m = new_m
    top = tl.max(m, axis=0)
    total = tl.sum(s * tl.exp(m - top), axis=0)
    tl.store(out_ptr + row, top + tl.log(total))


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.linear1 = nn.Linear(input_size, hidden_size)
        self.linear2 = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        h = torch.mm(x.contiguous(), self.linear1.weight.t())
        n = h.numel()
        bias_sigmoid_kernel[(triton.cdiv(n, 2048),)](h, self.linear1.bias, n, h.shape[1], BLOCK=2048, num_warps=8)
        y = torch.mm(h, self.linear2.weight.t())
        out = torch.empty(y.shape[0], device=x.device, dtype=torch.float32)
        bias_logsumexp_kernel[(y.shape[0],)](y, self.linear2.bias, out, y.shape[1], BLOCK_N=512, num_warps=4)
        return out
