# Broken candidate for tasks/gelu_scale.py: defines the kernel and a launcher, but no ModelNew class.
"""Exhibits a missing ModelNew: the module is named `GeluScaleTriton` instead."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_scale_kernel(x_ptr, out_ptr, n_elements, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32) * scale
    t = 1.0 - 2.0 / (tl.exp(1.5957691216057308 * (x + 0.044715 * x * x * x)) + 1.0)
    tl.store(out_ptr + offs, 0.5 * x * (1.0 + t), mask=mask)


class GeluScaleTriton(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        gelu_scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), self.scale, BLOCK=1024)
        return out
