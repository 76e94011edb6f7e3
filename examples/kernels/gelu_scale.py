"""Triton solution for tasks/gelu_scale.py: one fused pass computing tanh-GELU(x * scale)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_scale_kernel(x_ptr, out_ptr, n_elements, scale, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32) * scale
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    # tanh(u) = 1 - 2 / (exp(2u) + 1): saturates cleanly to +-1 for large |u|.
    tanh_inner = 1.0 - 2.0 / (tl.exp(2.0 * inner) + 1.0)
    y = 0.5 * x * (1.0 + tanh_inner)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        BLOCK = 1024
        grid = (triton.cdiv(n, BLOCK),)
        gelu_scale_kernel[grid](x, out, n, self.scale, BLOCK=BLOCK)
        return out
