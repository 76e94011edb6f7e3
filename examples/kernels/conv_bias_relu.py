"""Triton solution for tasks/conv_bias_relu.py: torch's convolution (without its bias), then one Triton
pass that adds the conv bias and the extra bias and applies ReLU."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def bias_bias_relu_kernel(y_ptr, conv_b_ptr, extra_b_ptr, out_ptr, n_elements, HW, C,
                          BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    ch = (offs // HW) % C
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b1 = tl.load(conv_b_ptr + ch, mask=mask, other=0.0).to(tl.float32)
    b2 = tl.load(extra_b_ptr + ch, mask=mask, other=0.0).to(tl.float32)
    out = tl.maximum(y + b1 + b2, 0.0)
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding,
                     self.conv.dilation, self.conv.groups).contiguous()
        out = torch.empty_like(y)
        n = y.numel()
        C = y.shape[1]
        HW = y.shape[2] * y.shape[3]
        BLOCK = 1024
        bias_bias_relu_kernel[(triton.cdiv(n, BLOCK),)](y, self.conv.bias, self.bias.reshape(-1), out,
                                                         n, HW, C, BLOCK=BLOCK)
        return out
