import random

import torch.nn as nn

from adaexplore.skills.synthesis import SynthesisBrief, operator_signature, operators, synthesis_brief

SEED = """import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)

    def forward(self, x):
        return torch.relu(self.lin(x))

def get_inputs():
    return [torch.randn(8, 16)]

def get_init_inputs():
    return [16]
"""


def test_operators_come_from_torch_nn():
    ops = operators()
    assert len(ops) > 40 and ops == sorted(ops)
    for name in ops:
        cls = getattr(nn, name)
        assert issubclass(cls, nn.Module)
    for expected in ("Conv2d", "Linear", "Softmax", "LayerNorm", "GELU"):
        assert expected in ops
    for excluded in ("Module", "Sequential", "ModuleList", "Dropout", "LazyLinear", "TransformerEncoder", "Identity"):
        assert excluded not in ops
    assert operator_signature("Conv2d").startswith("nn.Conv2d(in_channels: int")


def test_brief_well_formed_and_deterministic():
    brief = synthesis_brief([("relu_linear", SEED), ("other", SEED)], random.Random(3), n_ops=2)
    assert isinstance(brief, SynthesisBrief)
    assert brief.seed_tasks == ["relu_linear", "other"]
    assert len(brief.operators) == 2 and all(o.name in operators() for o in brief.operators)
    assert all(o.signature.startswith(f"nn.{o.name}(") for o in brief.operators)
    for word in ("class Model", "get_inputs", "get_init_inputs", "Deterministic", "Non-degenerate", "relu_linear"):
        assert word in brief.instructions
    assert "def get_init_inputs" in brief.format_example
    again = synthesis_brief([("relu_linear", SEED), ("other", SEED)], random.Random(3), n_ops=2)
    assert again == brief
    ns: dict = {}
    exec(brief.format_example, ns)  # the skeleton itself is a valid task
    model = ns["Model"](*ns["get_init_inputs"]())
    assert model(*ns["get_inputs"]()).shape == (16, 32)
