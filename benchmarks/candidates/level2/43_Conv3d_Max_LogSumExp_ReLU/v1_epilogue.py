"""KernelBench level 2, 43_Conv3d_Max_LogSumExp_ReLU: the convolution (with its bias) in cuDNN (via
torch); the 2x2x2 / stride-2 max pooling, the logsumexp over channels and the ReLU in one fused
Triton kernel. Each program takes one image, one pooled (d, h) row and a tile of BLOCK_W pooled
w positions; it loops over the channels in blocks of BLOCK_C, takes the max of the eight inputs of
each pooling window (loads run along w), and folds each block into a running max and rescaled sum
of exponentials (online logsumexp). It then writes relu(max + log(sum)) to the (N, 1, D', H', W')
output.

A candidate for KernelBench's harness and for our evaluator alike (both load `ModelNew`).
Runs in the process that evaluates it; under TRITON_INTERPRET=1 on a CPU as well.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def maxpool_lse_relu_kernel(y_ptr, out_ptr, C, W, HW, DHW, Do, Ho, Wo,
                            BLOCK_C: tl.constexpr, BLOCK_W: tl.constexpr):
    # y: (N, C, D, H, W) contiguous, HW = H*W, DHW = D*H*W; out: (N, Do, Ho, Wo) contiguous;
    # 2x2x2 window, stride 2.
    row = tl.program_id(0)  # over N * Do * Ho
    pid_w = tl.program_id(1)
    ho = row % Ho
    do = (row // Ho) % Do
    n = (row // Ho // Do).to(tl.int64)

    offs_w = pid_w * BLOCK_W + tl.arange(0, BLOCK_W)
    w_mask = offs_w < Wo
    # offset of the window's (d0, h0, w0) corner within one (n, c) volume
    corner = (2 * do).to(tl.int64) * HW + (2 * ho).to(tl.int64) * W + (2 * offs_w).to(tl.int64)

    m = tl.full([BLOCK_W], float("-inf"), dtype=tl.float32)
    s = tl.zeros([BLOCK_W], dtype=tl.float32)
    for c0 in range(0, C, BLOCK_C):
        chans = c0 + tl.arange(0, BLOCK_C)
        c_mask = chans < C
        mask = c_mask[:, None] & w_mask[None, :]
        base = y_ptr + ((n * C + chans.to(tl.int64)) * DHW)[:, None] + corner[None, :]
        v = tl.full([BLOCK_C, BLOCK_W], float("-inf"), dtype=tl.float32)
        for kd in tl.static_range(2):
            for kh in tl.static_range(2):
                p = base + kd * HW + kh * W
                v = tl.maximum(v, tl.load(p, mask=mask, other=0.0).to(tl.float32))
                v = tl.maximum(v, tl.load(p + 1, mask=mask, other=0.0).to(tl.float32))
        v = tl.where(c_mask[:, None], v, float("-inf"))
        m_new = tl.maximum(m, tl.max(v, axis=0))  # finite: every block has a real channel
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(v - m_new[None, :]), axis=0)
        m = m_new

    res = tl.maximum(m + tl.log(s), 0.0)
    out_offs = row.to(tl.int64) * Wo + offs_w
    tl.store(out_ptr + out_offs, res.to(out_ptr.dtype.element_ty), mask=w_mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)

    def forward(self, x):
        y = self.conv(x).contiguous()
        n, c, d, h, w = y.shape
        do, ho, wo = d // 2, h // 2, w // 2  # MaxPool3d(kernel_size=2, stride=2), floor mode
        out = torch.empty((n, 1, do, ho, wo), device=y.device, dtype=y.dtype)
        if out.numel() == 0:
            return out
        block_c = min(64, triton.next_power_of_2(c))
        block_w = min(64, max(16, triton.next_power_of_2(wo)))
        grid = (n * do * ho, triton.cdiv(wo, block_w))
        maxpool_lse_relu_kernel[grid](y, out, c, w, h * w, d * h * w, do, ho, wo,
                                      BLOCK_C=block_c, BLOCK_W=block_w, num_warps=4)
        return out
