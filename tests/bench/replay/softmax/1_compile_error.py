"""Softmax variant 1 (fails: compile_error): the row length is passed as a plain argument and used in tl.arange, which needs a tl.constexpr."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols):
    row = tl.program_id(0)
    cols = tl.arange(0, n_cols)
    x = tl.load(x_ptr + row * n_cols + cols).to(tl.float32)
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * n_cols + cols, num / tl.sum(num, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, out, x.shape[1])
        return out
