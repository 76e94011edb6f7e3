"""Reference outputs held by the judge, per task key, within a byte budget (runs in the judge).

Entries are whole references (every slot of one task under one protocol): evicting half a
reference would leave a task that compares some trials and not others. The least recently
used entry goes first; an entry larger than the whole budget is refused.
"""

from __future__ import annotations

from collections import OrderedDict

import torch


class BudgetExceeded(Exception):
    """One reference needs more memory than the judge may hold at all."""


class BudgetBusy(Exception):
    """The budget is held by references of tasks in use: the store must wait for one to end.
    `need_bytes`: what the reference had reached when turned away, so at least what it needs."""

    def __init__(self, message: str, need_bytes: int = 0) -> None:
        super().__init__(message)
        self.need_bytes = need_bytes


class OutputStore:
    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._entries: OrderedDict[str, dict[str, list[torch.Tensor]]] = OrderedDict()
        self._sizes: dict[str, int] = {}

    @property
    def used_bytes(self) -> int:
        return sum(self._sizes.values())

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def keys(self) -> list[str]:
        return list(self._entries)

    def reserve(self, key: str, nbytes: int, in_use: frozenset[str] = frozenset()) -> None:
        """Make room for `nbytes` more under `key`, evicting other keys, oldest first. References
        of keys `in_use` (tasks with work in flight) are never evicted: if the room is not there
        without them, `key` is dropped and BudgetBusy raised (the caller tries again later)."""
        total = self._sizes.get(key, 0) + nbytes
        if total > self.budget_bytes:
            raise BudgetExceeded(f"the reference outputs need {_gb(total)}, more than the judge's budget of "
                                 f"{_gb(self.budget_bytes)}")
        idle = sum(self._sizes.get(k, 0) for k in self._entries if k != key and k not in in_use)
        if self.used_bytes - idle + nbytes > self.budget_bytes:
            self.drop(key)  # what it stored so far goes too, so that the tasks in use can go on
            raise BudgetBusy(f"the judge's budget of {_gb(self.budget_bytes)} is held by the references of "
                             f"tasks in use", need_bytes=total)
        while self.used_bytes + nbytes > self.budget_bytes:
            self.drop(next(k for k in self._entries if k != key and k not in in_use))

    def put(self, key: str, slot: str, tensors: list[torch.Tensor]) -> None:
        entry = self._entries.setdefault(key, {})
        old = entry.get(slot)
        entry[slot] = tensors
        self._sizes[key] = self._sizes.get(key, 0) + _nbytes(tensors) - (_nbytes(old) if old else 0)
        self._entries.move_to_end(key)

    def get(self, key: str, slot: str) -> list[torch.Tensor] | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry.get(slot)

    def slots(self, key: str) -> dict[str, list[torch.Tensor]]:
        return dict(self._entries.get(key, {}))

    def room_beside(self, in_use: frozenset[str]) -> int:
        """Bytes a new reference could have, were every reference not `in_use` evicted."""
        return self.budget_bytes - sum(self._sizes.get(k, 0) for k in in_use)

    def drop(self, key: str) -> None:
        self._entries.pop(key, None)
        self._sizes.pop(key, None)


def _nbytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB"
