"""KernelBench level 2, 14_Gemm_Divide_Sum_Scaling: all in Triton, by reassociation.

sum_j (x @ W.T)[i, j] = x[i, :] . (sum_j W[j, :]), so one Triton kernel sums W's rows into a
vector and a second one takes each row of x's dot product with it, halved and scaled: two
passes over the inputs instead of a GEMM of batch x hidden x input.
A candidate for KernelBench's harness and for our evaluator alike (both load `ModelNew`).
Runs in the process that evaluates it; under TRITON_INTERPRET=1 on a CPU as well.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def column_sum_kernel(w_ptr, out_ptr, H, K, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr):
    # out[k] = sum_h W[h, k]; each program owns BLOCK_K columns and walks all rows.
    cols = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for h0 in range(0, H, BLOCK_H):
        rows = h0 + tl.arange(0, BLOCK_H)
        tile = tl.load(w_ptr + rows[:, None].to(tl.int64) * K + cols[None, :],
                       mask=(rows[:, None] < H) & (cols[None, :] < K), other=0.0)
        acc += tl.sum(tile, axis=0)
    tl.store(out_ptr + cols, acc, mask=cols < K)


@triton.jit
def row_dot_kernel(x_ptr, v_ptr, out_ptr, K, scale, BLOCK_K: tl.constexpr):
    # out[i] = scale * x[i, :] . v, one program per row.
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        m = ks < K
        acc += tl.load(x_ptr + row * K + ks, mask=m, other=0.0) * tl.load(v_ptr + ks, mask=m, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) * scale)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))
        self.scaling_factor = float(scaling_factor)

    def forward(self, x):
        x = x.contiguous()
        w = self.weight.contiguous()
        hidden, k = w.shape
        wsum = torch.empty(k, device=x.device, dtype=torch.float32)
        # 32 columns a program: enough programs to keep every SM reading W.
        column_sum_kernel[(triton.cdiv(k, 32),)](w, wsum, hidden, k, BLOCK_H=128, BLOCK_K=32, num_warps=4)
        out = torch.empty((x.shape[0], 1), device=x.device, dtype=torch.float32)
        row_dot_kernel[(x.shape[0],)](x, wsum, out, k, self.scaling_factor / 2.0, BLOCK_K=1024, num_warps=4)
        return out
