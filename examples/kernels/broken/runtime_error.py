# Broken candidate for tasks/softmax.py: raises at run time in the host code.
"""Exhibits runtime_error: the host code unpacks a 2-D shape into three names."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * n_cols + cols, num / tl.sum(num, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        batch, n_rows, n_cols = x.shape  # ValueError: the input is 2-D
        out = torch.empty_like(x)
        softmax_kernel[(batch * n_rows,)](x, out, n_cols, BLOCK=triton.next_power_of_2(n_cols))
        return out
