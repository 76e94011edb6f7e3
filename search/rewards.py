"""Node rewards: a named, swappable map from an evaluation outcome to [0, max].

Runs wherever the search runs (the server process); pure functions, no I/O.

Statuses are the evaluator's fixed set (``adaexplore.common.vocab.Status``); plain
strings and the str-enum both work. As in the AdaExplore method, every candidate that
imports but is not correct scores 0.05: a wrong result (``wrong_output``,
``shape_mismatch``, ``nan_output``) and an error after the module loaded
(``compile_error`` of a Triton kernel at launch, ``runtime_error``, ``cuda_error``,
``timeout``, ``oom``). A module that does not load (``syntax_error``, ``import_error``),
one that is not a Triton kernel (``no_triton_kernel``) or games the check
(``cheat_detected``), and ``None`` (not evaluated yet) score 0. ``infra_error`` also
scores 0, but the tree never counts such nodes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable

from ..common.vocab import FAILED_AFTER_LOADING, WRONG_RESULTS, Status

if TYPE_CHECKING:
    from .params import SearchParams

#: Statuses of a module that imported but is not correct: the method's 0.05.
RUNS_BUT_WRONG: frozenset[str] = WRONG_RESULTS | FAILED_AFTER_LOADING

#: The reward of every status, in words (for schemas and docs).
REWARD_TABLE = (
    "correct: 0.4 + 1.2*(s-0.1)/9.9 with speedup s clipped to [0.1, 10] (0.4..1.6; 0.509 at 1x, "
    "which is also what a correct kernel scores without timing, e.g. on a CPU server); "
    "imports but fails or is wrong (wrong_output, shape_mismatch, nan_output, compile_error, "
    "runtime_error, cuda_error, timeout, oom): 0.05; does not load or is not accepted "
    "(syntax_error, import_error, no_triton_kernel, cheat_detected): 0; infra_error: not counted"
)
CORRECT = Status.correct
WRONG_REWARD = 0.05
SPEEDUP_MIN, SPEEDUP_MAX = 0.1, 10.0


# The evaluator's Status is a str-enum: it compares and hashes like its value, so plain
# membership tests below work for both. Bodies are inlined: the tree calls these per node.


def paper_reward(status: str | None, speedup: float | None) -> float:
    """AdaExplore's reward: 0 (does not load), 0.05 (runs, wrong),
    0.4 + 1.2 (s - 0.1) / 9.9 for a correct kernel, s clipped to [0.1, 10]: range [0, 1.6].
    A correct kernel without timing (CPU interpreter) or with a NaN speedup scores as 1x."""
    if status == CORRECT:
        if speedup is None or speedup != speedup:
            s = 1.0
        else:
            s = SPEEDUP_MIN if speedup < SPEEDUP_MIN else SPEEDUP_MAX if speedup > SPEEDUP_MAX else speedup
        return 0.4 + 1.2 * (s - SPEEDUP_MIN) / (SPEEDUP_MAX - SPEEDUP_MIN)
    return WRONG_REWARD if status in RUNS_BUT_WRONG else 0.0


def log_speedup_reward(status: str | None, speedup: float | None) -> float:
    """Log-scale reward in [0, 1]: 0 (does not load), 0.05 (runs, wrong), and for a correct
    kernel 0.1 + 0.45 * (log10(s) + 1) with s clipped to [0.1, 10], i.e. 0.1 at 0.1x,
    0.41 at 0.5x, 0.55 at 1x, 1.0 at 10x (no timing or NaN: 1x).

    Equal speed ratios get equal reward gaps, so 0.5x -> 1x (0.135) weighs as much as
    5x -> 10x; the paper's linear scale gives 0.5x -> 1x only 0.06 of its 1.6 range.
    """
    if status == CORRECT:
        if speedup is None or speedup != speedup:
            s = 1.0
        else:
            s = SPEEDUP_MIN if speedup < SPEEDUP_MIN else SPEEDUP_MAX if speedup > SPEEDUP_MAX else speedup
        return 0.1 + 0.45 * (math.log10(s) + 1.0)
    return WRONG_REWARD if status in RUNS_BUT_WRONG else 0.0


RewardFn = Callable[[str | None, float | None], float]

REWARDS: dict[str, RewardFn] = {"paper": paper_reward, "log_speedup": log_speedup_reward}

#: Largest value each reward can take (a correct kernel at >= 10x).
REWARD_MAX: dict[str, float] = {"paper": 1.6, "log_speedup": 1.0}


def reward_for(params: SearchParams, status: str | None, speedup: float | None) -> float:
    """The reward of one outcome under the reward function that ``params`` names."""
    return REWARDS[params.reward](status, speedup)
