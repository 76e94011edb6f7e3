"""KernelBench level 2, 49_ConvTranspose3d_Softmax_Sigmoid: the transposed convolution (with its
bias) in cuDNN (via torch); the softmax over channels and the sigmoid in one fused Triton kernel.
Each program takes one image and a tile of BLOCK_S voxels (flattened d, h, w) with all channels at
once: it loads the [channels, BLOCK_S] tile (contiguous along the voxels), takes the softmax down
the channel axis, applies the sigmoid and writes the (N, C, D, H, W) output.

A candidate for KernelBench's harness and for our evaluator alike (both load `ModelNew`).
Runs in the process that evaluates it; under TRITON_INTERPRET=1 on a CPU as well.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_sigmoid_kernel(y_ptr, out_ptr, C, S, BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr):
    # y, out: (N, C, S) contiguous, S = D*H*W; softmax over C for each (n, voxel).
    pid_s = tl.program_id(0)
    n = tl.program_id(1).to(tl.int64)
    chans = tl.arange(0, BLOCK_C)
    offs_s = pid_s.to(tl.int64) * BLOCK_S + tl.arange(0, BLOCK_S)
    c_mask = chans < C
    s_mask = offs_s < S
    mask = c_mask[:, None] & s_mask[None, :]

    offs = ((n * C + chans.to(tl.int64)) * S)[:, None] + offs_s[None, :]
    x = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    x = tl.where(c_mask[:, None], x, float("-inf"))
    x_max = tl.max(x, axis=0)
    e = tl.exp(x - x_max[None, :])  # padded channels give exp(-inf) = 0
    p = e / tl.sum(e, axis=0)[None, :]
    res = 1.0 / (1.0 + tl.exp(-p))  # p lies in [0, 1]: no overflow
    tl.store(out_ptr + offs, res.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias=True):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding, bias=bias)

    def forward(self, x):
        y = self.conv_transpose(x).contiguous()
        n, c = y.shape[:2]
        s = y[0, 0].numel()
        out = torch.empty_like(y)
        block_c = triton.next_power_of_2(c)
        block_s = max(16, min(256, 8192 // block_c))
        block_s = min(block_s, max(16, triton.next_power_of_2(s)))
        num_warps = 8 if block_c * block_s >= 8192 else 4
        grid = (triton.cdiv(s, block_s), n)
        softmax_sigmoid_kernel[grid](y, out, c, s, BLOCK_C=block_c, BLOCK_S=block_s, num_warps=num_warps)
        return out
