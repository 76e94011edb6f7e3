# Broken candidate for tasks/softmax.py: produces NaN.
"""Exhibits nan_output: masked lanes load -inf and the kernel subtracts the row max from an all
-inf padding, then divides 0 by 0 (the mask is dropped from the max and the sum)."""

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
    # Bug: "numerical stability" done wrong: subtracting +inf instead of the row max.
    shift = tl.max(x, axis=0) * float("inf")
    num = tl.exp(x - shift)
    tl.store(out_ptr + row * n_cols + cols, num / tl.sum(num, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return out
