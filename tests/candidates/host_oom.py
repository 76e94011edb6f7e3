# For tasks/softmax.py: asks for 40 GiB of host memory in forward (expected: oom).
import torch, torch.nn as nn, triton, triton.language as tl
@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    pass
class ModelNew(nn.Module):
    def forward(self, x):
        big = torch.empty(40 * 1024**3 // 4, dtype=torch.float32)
        big.fill_(1.0)
        return torch.softmax(x, -1)
