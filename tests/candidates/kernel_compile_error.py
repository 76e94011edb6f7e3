# For tasks/gelu_scale.py: passes the lint, fails inside the kernel body (wrong tl.exp arity).
import torch, torch.nn as nn, triton, triton.language as tl
@triton.jit
def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = tl.exp(x, 3, 4)
    tl.store(out_ptr + offs, y, mask=offs < n)
class ModelNew(nn.Module):
    def __init__(self, *a):
        super().__init__()
    def forward(self, x):
        out = torch.empty_like(x)
        k[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
