"""Softmax over the rows of a 4096 x 8192 fp32 matrix (memory-bound, 128 MB in and out)."""

import torch
import torch.nn as nn

ROWS, COLS = 4096, 8192  # cpu-check: 16, 320


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
