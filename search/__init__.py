"""AdaExplore tree search: rewards, selection, actions and context, as pure functions over
plain rows (no database, no GPU, no I/O). The server builds a :class:`TreeIndex` from its
rows on every call and asks these functions what to do next."""

from .context import large_step_context, small_step_context
from .params import SearchParams
from .rewards import REWARD_MAX, REWARD_TABLE, REWARDS, log_speedup_reward, paper_reward, reward_for
from .selection import Selection, choose_action, select, uct_score, widen_score
from .tree import NodeView, PendingView, TreeIndex
from .tree_stats import best_nodes, budget_left

__all__ = [
    "NodeView",
    "PendingView",
    "REWARDS",
    "REWARD_MAX",
    "REWARD_TABLE",
    "SearchParams",
    "Selection",
    "TreeIndex",
    "best_nodes",
    "budget_left",
    "choose_action",
    "large_step_context",
    "log_speedup_reward",
    "paper_reward",
    "reward_for",
    "select",
    "small_step_context",
    "uct_score",
    "widen_score",
]
