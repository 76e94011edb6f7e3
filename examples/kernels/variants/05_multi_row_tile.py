"""Softmax variant 5 (correct, faster): each program handles a [ROWS, BLOCK] tile of several rows,
reducing along axis 1, with num_warps matched to the tile; fewer, fuller programs."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_rows_kernel(x_ptr, out_ptr, n_rows, n_cols, stride,
                        ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    offs = rows[:, None] * stride + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=-float("inf")).to(tl.float32)
    num = tl.exp(x - tl.max(x, axis=1)[:, None])
    out = num / tl.sum(num, axis=1)[:, None]
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        BLOCK = triton.next_power_of_2(n_cols)
        ROWS = 4
        grid = (triton.cdiv(n_rows, ROWS),)
        softmax_rows_kernel[grid](x, out, n_rows, n_cols, x.stride(0), ROWS=ROWS, BLOCK=BLOCK, num_warps=4)
        return out
