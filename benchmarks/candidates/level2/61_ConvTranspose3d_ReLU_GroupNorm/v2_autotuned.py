"""KernelBench level 2, 61_ConvTranspose3d_ReLU_GroupNorm: the transposed convolution in cuDNN (via
torch); ReLU and group normalization in two autotuned Triton passes over its output. Pass one: each
program sums one chunk of one (image, group) range, ReLU applied, into a partial sum and sum of
squares. Pass two: each program reads its group's partials, forms mean and 1/std, and normalizes its
chunk in place with the channel's affine weight and bias. Both are autotuned over block size and warp
count (the in-place pass restores its tensor between the autotuner's trials).

A candidate for KernelBench's harness and for our evaluator alike (both load `ModelNew`).
Runs in the process that evaluates it; under TRITON_INTERPRET=1 on a CPU as well.
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_CHUNKS = 64  # programs per (image, group), at most; a power of two, so pass two reads the partials at once


CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b in (512, 1024, 2048, 4096) for w in (4, 8)]
if os.environ.get("TRITON_INTERPRET") == "1":
    CONFIGS = CONFIGS[:1]  # the interpreter cannot benchmark configurations


@triton.autotune(configs=CONFIGS, key=["group_len"])
@triton.jit
def relu_group_stats_kernel(y_ptr, part_ptr, group_len, chunk_len, CHUNKS: tl.constexpr, BLOCK: tl.constexpr):
    group = tl.program_id(0)
    chunk = tl.program_id(1)
    base = y_ptr + group.to(tl.int64) * group_len
    start = chunk * chunk_len
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    acc_sq = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, chunk_len, BLOCK):
        offs = start + off + tl.arange(0, BLOCK)
        mask = (offs < group_len) & (off + tl.arange(0, BLOCK) < chunk_len)
        v = tl.maximum(tl.load(base + offs, mask=mask, other=0.0), 0.0)
        acc += v
        acc_sq += v * v
    slot = part_ptr + (group * CHUNKS + chunk) * 2
    tl.store(slot, tl.sum(acc, axis=0))
    tl.store(slot + 1, tl.sum(acc_sq, axis=0))


@triton.autotune(configs=CONFIGS, key=["group_len"], restore_value=["y_ptr"])
@triton.jit
def relu_group_norm_kernel(y_ptr, part_ptr, w_ptr, b_ptr, group_len, chunk_len, channel_len, channels_per_group,
                           groups, eps, CHUNKS: tl.constexpr, BLOCK: tl.constexpr):
    group = tl.program_id(0)
    chunk = tl.program_id(1)
    parts = part_ptr + group * CHUNKS * 2 + tl.arange(0, CHUNKS) * 2
    mean = tl.sum(tl.load(parts), axis=0) / group_len
    var = tl.maximum(tl.sum(tl.load(parts + 1), axis=0) / group_len - mean * mean, 0.0)
    rstd = 1.0 / tl.sqrt(var + eps)
    first_channel = (group % groups) * channels_per_group
    base = y_ptr + group.to(tl.int64) * group_len
    start = chunk * chunk_len
    for off in range(0, chunk_len, BLOCK):
        offs = start + off + tl.arange(0, BLOCK)
        mask = (offs < group_len) & (off + tl.arange(0, BLOCK) < chunk_len)
        channel = first_channel + offs // channel_len
        w = tl.load(w_ptr + channel, mask=mask, other=1.0)
        b = tl.load(b_ptr + channel, mask=mask, other=0.0)
        v = tl.maximum(tl.load(base + offs, mask=mask, other=0.0), 0.0)
        tl.store(base + offs, (v - mean) * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, groups, bias=False):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, bias=bias)
        self.relu = nn.ReLU()
        self.group_norm = nn.GroupNorm(num_groups=groups, num_channels=out_channels)

    def forward(self, x):
        y = self.conv_transpose(x).contiguous()
        n, c = y.shape[:2]
        groups = self.group_norm.num_groups
        channel_len = y[0, 0].numel()
        group_len = channel_len * (c // groups)
        chunks = min(MAX_CHUNKS, triton.next_power_of_2(triton.cdiv(group_len, 8192)))
        chunk_len = triton.cdiv(group_len, chunks)
        parts = torch.empty(n * groups * chunks * 2, device=y.device, dtype=torch.float32)
        grid = (n * groups, chunks)
        relu_group_stats_kernel[grid](y, parts, group_len, chunk_len, CHUNKS=chunks)
        relu_group_norm_kernel[grid](y, parts, self.group_norm.weight, self.group_norm.bias, group_len, chunk_len,
                                     channel_len, c // groups, groups, self.group_norm.eps, CHUNKS=chunks)
        return y
