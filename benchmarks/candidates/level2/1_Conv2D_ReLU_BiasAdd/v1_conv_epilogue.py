"""KernelBench level 2, 1_Conv2D_ReLU_BiasAdd: the convolution without its bias in cuDNN (via
torch); one Triton pass adds the convolution's bias, applies ReLU and adds the extra per-channel
bias, in place, one program row per (image, channel) plane so both biases are scalars.

A candidate for KernelBench's harness and for our evaluator alike (both load `ModelNew`).
Runs in the process that evaluates it; under TRITON_INTERPRET=1 on a CPU as well.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def bias_relu_bias_kernel(y_ptr, conv_bias_ptr, bias_ptr, C, HW, BLOCK: tl.constexpr):
    plane = tl.program_id(0)
    channel = plane % C
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < HW
    ptrs = y_ptr + plane.to(tl.int64) * HW + offs
    y = tl.load(ptrs, mask=mask, other=0.0) + tl.load(conv_bias_ptr + channel)
    tl.store(ptrs, tl.maximum(y, 0.0) + tl.load(bias_ptr + channel), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding, self.conv.dilation,
                     self.conv.groups).contiguous()
        n, c, h, w = y.shape
        grid = (n * c, triton.cdiv(h * w, 1024))
        bias_relu_bias_kernel[grid](y, self.conv.bias, self.bias, c, h * w, BLOCK=1024, num_warps=4)
        return y
