"""KernelBench level 2, 9_Matmul_Subtract_Multiply_ReLU: torch.mm (cuBLAS) for x @ W.T; one autotuned flat Triton kernel (8 configs) for bias, - subtract_value, * multiply_value, ReLU.

A candidate for KernelBench's harness and for our evaluator alike (both load `ModelNew`).
Runs in the process that evaluates it; under TRITON_INTERPRET=1 on a CPU as well.
"""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b in (1024, 2048, 4096, 8192) for w in (4, 8)]
if os.environ.get("TRITON_INTERPRET") == "1":
    CONFIGS = CONFIGS[:1]  # the interpreter cannot benchmark configurations


# Autotuning runs the kernel several times, so it writes a separate output, never in place.
@triton.autotune(configs=CONFIGS, key=["n_elements", "n_cols"])
@triton.jit
def epilogue_kernel(y_ptr, bias_ptr, out_ptr, n_elements, n_cols, subtract_value, multiply_value, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = y + tl.load(bias_ptr + offs % n_cols, mask=mask, other=0.0)
    y = tl.maximum((y - subtract_value) * multiply_value, 0.0)
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, subtract_value, multiply_value):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.subtract_value = float(subtract_value)
        self.multiply_value = float(multiply_value)

    def forward(self, x):
        # cuBLAS GEMM without its bias; bias and epilogue in one autotuned Triton pass.
        y = torch.mm(x.contiguous(), self.linear.weight.t())
        out = torch.empty_like(y)
        n = y.numel()
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
        epilogue_kernel[grid](y, self.linear.bias, out, n, y.shape[1], self.subtract_value, self.multiply_value)
        return out
