"""Elementwise with two inputs: (a + b) * a, a small fusion of three torch ops into one pass."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a + b) * a


def get_inputs():
    return [torch.randn(32, 512), torch.randn(32, 512)]


def get_init_inputs():
    return []
