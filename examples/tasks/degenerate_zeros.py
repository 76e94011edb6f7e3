"""Intentionally degenerate: the output is always zeros, so any kernel that writes zeros passes; task validation must flag it."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # relu(-|x|) is 0 everywhere: the computation looks real but carries no information.
        return torch.relu(-torch.abs(x))


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
