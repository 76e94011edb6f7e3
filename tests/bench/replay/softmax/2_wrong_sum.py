"""Softmax variant 2 (runs, wrong_output): the compile error is repaired with a constexpr BLOCK, but
padded lanes load 0.0 instead of -inf, so exp(0) = 1 leaks into the sum whenever BLOCK > n_cols
(here the block is rounded up to a multiple of 512)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * n_cols + cols, num / tl.sum(num, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        BLOCK = max(512, triton.next_power_of_2(x.shape[1]))
        softmax_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=BLOCK)
        return out
