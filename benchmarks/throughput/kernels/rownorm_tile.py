"""rownorm: four rows per program, 1024-wide 2-D tiles."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rownorm_tile_kernel(x_ptr, out_ptr, n_rows, n_cols, stride, BR: tl.constexpr, BC: tl.constexpr):
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    acc = tl.zeros((BR, BC), dtype=tl.float32)
    for c0 in range(0, n_cols, BC):
        cols = c0 + tl.arange(0, BC)
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        x = tl.load(x_ptr + rows[:, None] * stride + cols[None, :], mask=mask, other=0.0)
        acc += x * x
    tl.store(out_ptr + rows, tl.sqrt(tl.sum(acc, axis=1)), mask=rows < n_rows)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        rownorm_tile_kernel[(triton.cdiv(rows, 4),)](x, out, rows, cols, x.stride(0), BR=4, BC=1024, num_warps=8)
        return out
