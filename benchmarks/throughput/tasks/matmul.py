"""fp16 matrix product, 4096 x 4096 x 4096 (compute-bound, about 0.25 ms on an H200)."""

import torch
import torch.nn as nn

M, N, K = 4096, 4096, 4096  # cpu-check: 64, 96, 80


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


def get_inputs():
    # Scaled so outputs are O(1): fp16 rounding differences stay far inside the tolerance.
    return [torch.randn(M, K, dtype=torch.float16) / 8, torch.randn(K, N, dtype=torch.float16) / 8]


def get_init_inputs():
    return []
