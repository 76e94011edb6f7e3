"""softmax: 1024-wide chunks; one pass for the running max and sum, one to write."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_online_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    s = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, n_cols, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf"))
        m_new = tl.maximum(m, x)
        empty = m_new == -float("inf")
        s = s * tl.where(empty, 0.0, tl.exp(m - m_new)) + tl.where(empty, 0.0, tl.exp(x - m_new))
        m = m_new
    top = tl.max(m, axis=0)
    den = tl.sum(tl.where(m == -float("inf"), 0.0, s * tl.exp(m - top)), axis=0)
    for c0 in range(0, n_cols, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf"))
        tl.store(out_ptr + row * stride + cols, tl.exp(x - top) / den, mask=cols < n_cols)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty_like(x)
        softmax_online_kernel[(rows,)](x, out, cols, x.stride(0), BLOCK=1024, num_warps=4)
        return out
