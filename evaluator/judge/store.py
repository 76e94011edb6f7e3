"""Reference outputs held by the judge, per task key, within byte budgets (runs in the judge).

Entries are whole references (every slot of one task under one protocol): evicting half a
reference would leave a task that compares some trials and not others. The least recently
used entry goes first; an entry larger than every budget is refused.

There are two places an entry may live: the judge's device (`budget_bytes`), where comparisons
are fastest, and, on a GPU, host memory (`host_budget_bytes`). A reference goes to the device
while it fits there beside the references of tasks in use, else to host memory (moved there
whole if it outgrows the device while it is stored). Comparing against a reference in host
memory moves one piece of it at a time to the device, which costs a fraction of the time its
bytes take to arrive; so two large tasks need not wait for each other while one holds the
device's share.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch


class BudgetExceeded(Exception):
    """One reference needs more memory than the judge may hold at all."""


class BudgetBusy(Exception):
    """The budgets are held by references of tasks in use: the store must wait for one to end.
    `need_bytes`: what the reference had reached when turned away, so at least what it needs."""

    def __init__(self, message: str, need_bytes: int = 0) -> None:
        super().__init__(message)
        self.need_bytes = need_bytes


@dataclass(frozen=True)
class Place:
    """Where entries may be kept: a torch device and the bytes the judge may hold there."""

    name: str  # "device" or "host"
    device: torch.device
    budget_bytes: int


class OutputStore:
    def __init__(self, budget_bytes: int, device: torch.device | str = "cpu", host_budget_bytes: int = 0) -> None:
        self.places = [Place("device", torch.device(device), budget_bytes)]
        if host_budget_bytes > 0:  # (a CPU judge has none by default: its device share is host memory)
            self.places.append(Place("host", torch.device("cpu"), host_budget_bytes))
        self._entries: OrderedDict[str, dict[str, list[torch.Tensor]]] = OrderedDict()
        self._sizes: dict[str, int] = {}
        self._place: dict[str, Place] = {}

    @property
    def budget_bytes(self) -> int:
        """The device's share: what jobs beside the judge may not use."""
        return self.places[0].budget_bytes

    @property
    def host_budget_bytes(self) -> int:
        return sum(p.budget_bytes for p in self.places[1:])

    def used_on(self, name: str) -> int:
        """Bytes held at the place called `name` ("device" or "host"; none at a place not kept)."""
        return sum(self._held(p, self._sizes) for p in self.places if p.name == name)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def keys(self) -> list[str]:
        return list(self._entries)

    def place_of(self, key: str) -> str | None:
        place = self._place.get(key)
        return place.name if place else None

    def reserve(self, key: str, nbytes: int, in_use: frozenset[str] = frozenset()) -> torch.device:
        """Make room for `nbytes` more under `key`, evicting other keys, oldest first, and say on
        which torch device to keep them. References of keys `in_use` (tasks with work in flight)
        are never evicted: if neither place has room without them, `key` is dropped and
        BudgetBusy raised (the caller tries again later)."""
        total = self._sizes.get(key, 0) + nbytes
        if all(total > p.budget_bytes for p in self.places):
            raise BudgetExceeded(f"the reference outputs need {_gb(total)}, more than the judge's budget of "
                                 f"{self._budgets()}")
        current = self._place.get(key)
        # Where it is, or further down the list: a reference moves to host memory, never back.
        for place in self.places[self.places.index(current):] if current else self.places:
            if total <= self._room(place, in_use - {key}):
                self._evict_for(place, total, key, in_use)
                if current is not None and current is not place:
                    self._move(key, place)
                self._place[key] = place
                return place.device
        self.drop(key)  # what it stored so far goes too, so that the tasks in use can go on
        raise BudgetBusy(f"the judge's budget of {self._budgets()} is held by the references of tasks in use",
                         need_bytes=total)

    def put(self, key: str, slot: str, tensors: list[torch.Tensor]) -> None:
        entry = self._entries.setdefault(key, {})
        self._place.setdefault(key, self.places[0])
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
        """Bytes a new reference could have in one place, were every reference not `in_use` evicted."""
        return max(self._room(p, in_use) for p in self.places)

    def drop(self, key: str) -> None:
        self._entries.pop(key, None)
        self._sizes.pop(key, None)
        self._place.pop(key, None)

    def _held(self, place: Place, keys) -> int:
        return sum(self._sizes[k] for k in keys if k in self._sizes and self._place[k] is place)

    def _room(self, place: Place, in_use: frozenset[str]) -> int:
        return place.budget_bytes - self._held(place, in_use)

    def _evict_for(self, place: Place, total: int, key: str, in_use: frozenset[str]) -> None:
        """Evict idle references kept at `place`, oldest first, until `key` fits there with `total` bytes."""
        while self._held(place, [k for k in self._sizes if k != key]) + total > place.budget_bytes:
            self.drop(next(k for k in self._entries if k != key and k not in in_use and self._place[k] is place))

    def _move(self, key: str, place: Place) -> None:
        entry = self._entries.get(key, {})
        for slot, tensors in entry.items():
            entry[slot] = [t.to(place.device) for t in tensors]

    def _budgets(self) -> str:
        return " and ".join(f"{_gb(p.budget_bytes)}" + ("" if p.name == "device" else " in host memory")
                            for p in self.places)


def _nbytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB"
