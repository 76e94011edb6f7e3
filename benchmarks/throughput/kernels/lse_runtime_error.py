"""logsumexp: runtime error: the launch leaves out the row stride."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def lse_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    s = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, n_cols, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf"))
        m_new = tl.maximum(m, x)
        empty = m_new == -float("inf")
        alpha = tl.where(empty, 0.0, tl.exp(m - m_new))
        p = tl.where(empty, 0.0, tl.exp(x - m_new))
        s = s * alpha + p
        m = m_new
    top = tl.max(m, axis=0)
    total = tl.sum(tl.where(m == -float("inf"), 0.0, s * tl.exp(m - top)), axis=0)
    tl.store(out_ptr + row, top + tl.log(total))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        lse_kernel[(rows,)](x, out, cols, BLOCK=2048, num_warps=8)
        return out
