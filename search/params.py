"""Knobs of the tree search (pure data, used in the server process). Defaults follow the AdaExplore
method and its public code (its KernelBench configuration: no pool top-up)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class SearchParams(BaseModel, extra="forbid"):
    """Per-task search settings.

    For harder, model-level tasks the paper lowers ``c_expand`` to 0.15 (fewer widenings,
    deeper refinement of the few lines that work).
    """

    c_explore: float = Field(0.3, ge=0.0, description="UCT exploration constant")
    c_expand: float = Field(0.3, ge=0.0, description="widening constant")
    p_large: float = Field(0.2, ge=0.0, le=1.0, description="chance of a large step when not forced")
    max_small_children: int = Field(
        2, ge=1, description="a node with this many small-step children gets a large step"
    )
    c_recent: int = Field(5, ge=1, description="small-step context: recent nodes of the segment")
    c_pool: int = Field(5, ge=1, description="large-step context: size of the kernel pool")
    reward: Literal["paper", "log_speedup"] = "paper"
    q_max_blend: float = Field(
        0.0, ge=0.0, le=1.0, description="Q = (1-b)*mean + b*max of subtree rewards"
    )
    pool_topup: bool = Field(False, description="top up the large-step pool from other branches")
    topup_temperature: float = Field(1.0, gt=0.0, description="softmax temperature over speedup")
    topup_geometric_p: float = Field(
        0.5, gt=0.0, le=1.0, description="success probability of the top-up count distribution"
    )
    expansion_ttl_s: float = Field(
        900.0, gt=0.0, description="seconds before an unanswered expansion stops counting (virtual loss)"
    )
    history_code_tokens: int = Field(
        6000, ge=0, description="small-step context: code of the branch history, newest first, within this many "
        "tokens (about 4 characters each); 0 = feedback only"
    )
    step_budget: int | None = Field(None, ge=0, description="max nodes per task; None = unlimited")
