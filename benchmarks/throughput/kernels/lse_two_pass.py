"""logsumexp: two passes over each row (max, then sum of exponentials): reads the data twice."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def lse_two_pass_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    for c0 in range(0, n_cols, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf")))
    top = tl.max(m, axis=0)
    s = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, n_cols, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf"))
        s += tl.exp(x - top)
    tl.store(out_ptr + row, top + tl.log(tl.sum(s, axis=0)))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        lse_two_pass_kernel[(rows,)](x, out, cols, x.stride(0), BLOCK=1024, num_warps=4)
        return out
