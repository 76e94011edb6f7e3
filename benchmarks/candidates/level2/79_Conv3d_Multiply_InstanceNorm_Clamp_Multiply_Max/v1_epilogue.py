"""KernelBench level 2, 79_Conv3d_Multiply_InstanceNorm_Clamp_Multiply_Max: the convolution (with
its bias) in cuDNN (via torch); everything after it in two Triton passes. Pass 1 reads each
(image, channel) volume in SPLIT chunks, multiplies by the channel's multiplier and writes shifted
partial sums and sums of squares. Pass 2, one program per image and block of voxels, loops over
the channels: folds the partials into the channel's mean and biased variance, normalizes
(InstanceNorm3d, no affine, batch statistics), clamps, multiplies again and keeps the running
max over channels, writing the (N, D, H, W) output.

A candidate for KernelBench's harness and for our evaluator alike (both load `ModelNew`).
Runs in the process that evaluates it; under TRITON_INTERPRET=1 on a CPU as well.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mul_partial_stats_kernel(x_ptr, mult_ptr, part_ptr, C, L, chunk_len,
                             SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    # One program per ((image, channel) plane, split): sums of (x*m - shift) and its square
    # over its chunk; shift = the plane's first x*m (keeps E[d^2] - E[d]^2 well conditioned).
    plane = tl.program_id(0)
    sp = tl.program_id(1)
    m = tl.load(mult_ptr + plane % C).to(tl.float32)
    base = plane.to(tl.int64) * L
    shift = tl.load(x_ptr + base).to(tl.float32) * m
    start = sp.to(tl.int64) * chunk_len
    lanes = tl.arange(0, BLOCK)
    acc1 = tl.zeros([BLOCK], dtype=tl.float32)
    acc2 = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, chunk_len, BLOCK):
        idx = start + off + lanes
        mask = ((off + lanes) < chunk_len) & (idx < L)
        v = tl.load(x_ptr + base + idx, mask=mask, other=0.0).to(tl.float32) * m
        d = tl.where(mask, v - shift, 0.0)
        acc1 += d
        acc2 += d * d
    out = (plane.to(tl.int64) * SPLIT + sp) * 2
    tl.store(part_ptr + out, tl.sum(acc1, axis=0))
    tl.store(part_ptr + out + 1, tl.sum(acc2, axis=0))


@triton.jit
def norm_clamp_mul_max_kernel(x_ptr, mult_ptr, part_ptr, out_ptr, C, L, eps, cmin, cmax,
                              SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    n = tl.program_id(0)
    s = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    smask = s < L
    sidx = tl.arange(0, SPLIT)
    nf = L.to(tl.float32)
    acc = tl.full([BLOCK], float("-inf"), dtype=tl.float32)
    for c in range(0, C):
        plane = n.to(tl.int64) * C + c
        m = tl.load(mult_ptr + c).to(tl.float32)
        pbase = plane * SPLIT * 2
        s1 = tl.sum(tl.load(part_ptr + pbase + sidx * 2), axis=0)
        s2 = tl.sum(tl.load(part_ptr + pbase + sidx * 2 + 1), axis=0)
        shift = tl.load(x_ptr + plane * L).to(tl.float32) * m
        md = s1 / nf
        var = tl.maximum(s2 / nf - md * md, 0.0)
        mean = shift + md
        rstd = 1.0 / tl.sqrt(var + eps)
        v = tl.load(x_ptr + plane * L + s, mask=smask, other=0.0).to(tl.float32) * m
        z = (v - mean) * rstd
        z = tl.minimum(tl.maximum(z, cmin), cmax)
        z = z * m
        acc = tl.maximum(acc, z)
    tl.store(out_ptr + n.to(tl.int64) * L + s, acc, mask=smask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, multiplier_shape, clamp_min, clamp_max):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.multiplier = nn.Parameter(torch.randn(multiplier_shape))
        self.instance_norm = nn.InstanceNorm3d(out_channels)
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        # InstanceNorm3d here: affine=False, no running stats, so batch statistics always.
        assert not self.instance_norm.affine and not self.instance_norm.track_running_stats
        y = self.conv(x).contiguous()
        n, c, d, h, w = y.shape
        L = d * h * w
        mult = self.multiplier.expand(c, 1, 1, 1).reshape(c).contiguous()

        # Pass 1: partial sums of x*m per plane; split planes so that there are enough programs.
        rows = n * c
        BLOCK = 2048
        max_split = triton.next_power_of_2(triton.cdiv(L, BLOCK))
        split = 1
        while rows * split < 1024 and split < max_split and split < 64:
            split *= 2
        chunk_len = triton.cdiv(triton.cdiv(L, split), BLOCK) * BLOCK
        part = torch.empty((rows, split, 2), device=y.device, dtype=torch.float32)
        mul_partial_stats_kernel[(rows, split)](y, mult, part, c, L, chunk_len,
                                                SPLIT=split, BLOCK=BLOCK, num_warps=8)

        # Pass 2: normalize, clamp, multiply, max over channels.
        out = torch.empty((n, d, h, w), device=y.device, dtype=y.dtype)
        BLOCK_S = min(1024, triton.next_power_of_2(L))
        grid = (n, triton.cdiv(L, BLOCK_S))
        norm_clamp_mul_max_kernel[grid](y, mult, part, out, c, L, float(self.instance_norm.eps),
                                        float(self.clamp_min), float(self.clamp_max),
                                        SPLIT=split, BLOCK=BLOCK_S, num_warps=4)
        return out
