"""Elementwise: scale the input, then apply the tanh approximation of GELU."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x * self.scale, approximate="tanh")


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return [1.5]
