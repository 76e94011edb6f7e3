"""Adapt support: a brief for an agent to mutate seed tasks into a new task.

Operators come from the installed ``torch.nn``; a synthesized task is accepted only after
the evaluator loads, runs and validates it.
"""

from __future__ import annotations

import functools
import inspect
import random
import typing

import torch.nn as nn
from pydantic import BaseModel, Field

_EXCLUDED = frozenset({
    "Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "Container",
    "Identity", "Flatten", "Unflatten", "RNNBase", "RNNCellBase",
    # need more than plain tensors to run, or are deprecated / legacy / distributed-only
    "SyncBatchNorm", "CTCLoss", "AdaptiveLogSoftmaxWithLoss", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d",
    "NLLLoss2d", "CrossMapLRN2d", "EmbeddingBag", "Transformer",
})
_NONDETERMINISTIC = ("Dropout", "RReLU", "Fractional")
_SIMPLE_TYPES = (int, float, bool, str, tuple, list, type(None))


def _simple_annotation(annotation: object) -> bool:
    """True for ints, floats, bools, strings, tuples/lists of them and unions of those."""
    if annotation is inspect.Parameter.empty:
        return True
    if isinstance(annotation, str):
        return not any(w in annotation for w in ("Module", "Tensor", "Layer", "Callable"))
    if annotation in _SIMPLE_TYPES:
        return True
    origin = typing.get_origin(annotation)
    if origin is None:
        return getattr(annotation, "__name__", "") == "Size"
    if origin is typing.Literal:
        return True
    return all(_simple_annotation(a) for a in typing.get_args(annotation) if a is not Ellipsis)


def _usable(cls: type) -> bool:
    name = cls.__name__
    if name.startswith("_") or name in _EXCLUDED or "Lazy" in name or any(w in name for w in _NONDETERMINISTIC):
        return False
    if inspect.isabstract(cls) or not cls.__module__.startswith("torch.nn.modules"):
        return False
    if getattr(cls, "forward", None) is nn.Module.forward:
        return False
    try:
        # the constructor's own parameters, without self
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]  # type: ignore[misc]
    except (TypeError, ValueError):
        return False
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.default is p.empty and not _simple_annotation(p.annotation):
            return False
    return True


@functools.lru_cache(maxsize=1)
def operators() -> list[str]:
    """Names of the torch.nn modules a synthesized task may use, from the installed torch."""
    names = {name for name in dir(nn)
             if isinstance(getattr(nn, name), type) and issubclass(getattr(nn, name), nn.Module)
             and _usable(getattr(nn, name))}
    return sorted(names)


def operator_signature(name: str) -> str:
    """``nn.Name(arg: type = default, ...)`` with the constructor signature of the installed torch."""
    cls = getattr(nn, name)
    sig = inspect.signature(cls.__init__)
    params = [p for p in list(sig.parameters.values())[1:] if p.name not in ("device", "dtype")]
    return f"nn.{name}({', '.join(str(p) for p in params)})"


class OperatorInfo(BaseModel):
    name: str
    signature: str
    summary: str = ""


class SynthesisBrief(BaseModel):
    seed_tasks: list[str]
    operators: list[OperatorInfo]
    instructions: str
    format_example: str = Field(default="", description="the skeleton of a task file")


FORMAT_EXAMPLE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


batch_size, in_features, out_features = 16, 64, 32


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
'''


def _summary(name: str) -> str:
    doc = inspect.getdoc(getattr(nn, name)) or ""
    return doc.strip().split("\n")[0][:160]


def synthesis_brief(seed_task_sources: list[tuple[str, str]], rng: random.Random | int | None = None,
                    n_ops: int = 2) -> SynthesisBrief:
    """Pick ``n_ops`` operators and write the instructions for turning the seeds into a new task."""
    if not isinstance(rng, random.Random):
        rng = random.Random(rng)
    pool = operators()
    chosen = rng.sample(pool, k=max(0, min(n_ops, len(pool))))
    ops = [OperatorInfo(name=n, signature=operator_signature(n), summary=_summary(n)) for n in chosen]
    seeds = [name for name, _ in seed_task_sources]
    seed_list = ", ".join(seeds) if seeds else "(no seed tasks given: start from the skeleton below)"
    op_lines = "\n".join(f"- {o.signature}" for o in ops)
    instructions = f"""Write ONE new task in KernelBench format by mutating the seed tasks {seed_list}.

1. Start from one seed (or combine two). Keep its spirit, change its computation: insert the
   operators below where their shapes fit, replace an operator with one of them, or fuse an
   elementwise/reduction step around them.
{op_lines}
2. The file defines `class Model(nn.Module)` with `__init__` taking only plain numbers/tuples,
   `forward` returning one tensor (or a tuple of tensors), `get_inputs()` returning a list of CPU
   tensors and `get_init_inputs()` returning the constructor arguments as a list.
3. Small shapes: every tensor at most about 4M elements, batch 8 to 128, so the reference runs in
   milliseconds.
4. Deterministic: no dropout in training mode, no random numbers inside `forward`, no
   data-dependent Python control flow; inputs only from `torch.randn`/`torch.rand`/`torch.randint`.
5. Non-degenerate: the output must depend on every input and not be all zeros, constant, or equal
   to an input (check that ReLUs and clamps do not zero everything, that reductions keep a shape).
6. Give it a descriptive name of its operators, e.g. `Conv2d_GroupNorm_Tanh`.
Submit it to the server for registration; it is accepted only if it loads, runs and passes validation."""
    return SynthesisBrief(seed_tasks=seeds, operators=ops, instructions=instructions, format_example=FORMAT_EXAMPLE)
