"""Matmul with epilogue: a linear layer (x @ W.T + b) followed by ReLU."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(128, 256)]


def get_init_inputs():
    return [256, 128]
