"""KernelBench level 2, 86_Matmul_Divide_GELU: torch.mm (cuBLAS) for x @ W.T; one flat Triton kernel (BLOCK=1024, num_warps=4, in place) for bias, / divisor, exact (erf) GELU.

A candidate for KernelBench's harness and for our evaluator alike (both load `ModelNew`).
Runs in the process that evaluates it; under TRITON_INTERPRET=1 on a CPU as well.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def epilogue_kernel(y_ptr, bias_ptr, out_ptr, n_elements, n_cols, divisor, BLOCK: tl.constexpr):
    # One flat pass over the GEMM's output: bias (by column) and the whole elementwise chain.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = y + tl.load(bias_ptr + offs % n_cols, mask=mask, other=0.0)
    y = y / divisor
    y = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, input_size, output_size, divisor):
        super().__init__()
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = float(divisor)

    def forward(self, x):
        # cuBLAS GEMM without its bias; bias and epilogue run in one Triton pass in place.
        y = torch.mm(x.contiguous(), self.linear.weight.t())
        out = y
        n = y.numel()
        epilogue_kernel[(triton.cdiv(n, 1024),)](y, self.linear.bias, out, n, y.shape[1], self.divisor, BLOCK=1024, num_warps=4)
        return out
