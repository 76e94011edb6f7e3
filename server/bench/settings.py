"""The settings of one bench run and the names of the compared variants (runs in the bench process)."""

from __future__ import annotations

import enum
from pathlib import Path

from pydantic import BaseModel, Field


class Method(str, enum.Enum):
    """How each step picks the kernel it refines."""

    tree = "tree"  # AdaExplore: expand_node picks the node and the step (large or small, UCT)
    chain = "chain"  # sequential refinement of the best correct kernel so far (the last node while none is)
    sample = "sample"  # every step an independent kernel written from the reference


def variant_name(method: Method, memory: bool) -> str:
    """The folder and label of one compared variant, e.g. 'tree' or 'chain-nomem'."""
    return method.value if memory else f"{method.value}-nomem"


def parse_variant(name: str) -> tuple[Method, bool]:
    """The method and memory switch of a variant name made by `variant_name`."""
    base, _, suffix = name.partition("-")
    return Method(base), suffix != "nomem"


class Budget(BaseModel):
    """Limits of a run: steps per task, and (over the whole invocation) tokens and wall time."""

    steps: int = Field(ge=1, description="kernels asked for per task and variant (every model answer is a step)")
    max_tokens: int | None = Field(None, ge=1, description="stop after this many model tokens in this invocation")
    max_seconds: float | None = Field(None, gt=0, description="stop after this many seconds of wall time")


class EndpointSettings(BaseModel):
    """Where the chat model is: any OpenAI-compatible endpoint."""

    base_url: str
    model: str
    api_key: str = Field(repr=False)
    temperature: float = 0.7
    max_answer_tokens: int | None = None  # None: the endpoint's own limit
    timeout_s: float = 300.0


class BenchSettings(BaseModel):
    """Everything one `adaexplore bench` invocation was asked to do."""

    run_dir: Path
    task_files: list[Path]
    methods: list[Method]
    memory: bool = True
    budget: Budget
    agents: int = Field(1, ge=1, le=64, description="concurrent agents per task (they share the task's tree)")
    parallel_variants: bool = False
    adapt_rounds: int = Field(0, ge=0, description="Adapt rounds (synthesized tasks, one pass each) before the "
                                                   "search; only with the memory on")
    adapt_tasks: int = Field(3, ge=1, le=50, description="new tasks per Adapt round")
    device: str | None = None
    server_args: list[str] = Field(default_factory=list)
    progress: bool = True
