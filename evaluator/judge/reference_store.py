"""Reference outputs held by the judge, per task key, within byte budgets (runs in the judge).

Entries are whole references (every slot of one task under one protocol): evicting half a
reference would leave a task that compares some trials and not others. The least recently
used entry goes first; an entry larger than the budgets together, or with a slot larger than
every budget, is refused.

There are two places a slot may live: the judge's device (`budget_bytes`), where comparisons
are fastest, and, on a GPU, host memory (`host_budget_bytes`). A reference's slots go to the
device while they fit there beside the references of tasks in use, and those that do not to
host memory (a reference's later slots never go back to a place it has left). So the largest
tasks, whose five trials fill the device's share, keep their trials there and the rest beside
them. Comparing against a slot in host memory moves one piece of it at a time to the device,
which costs a fraction of the time its bytes take to arrive; so two large tasks need not wait
for each other while one holds the device's share.
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
        self._kept: dict[str, dict[str, tuple[Place, int]]] = {}  # key -> slot -> where, and its bytes
        self._last: dict[str, Place] = {}  # key -> the furthest place reserved for it (its next slot goes there)

    @property
    def budget_bytes(self) -> int:
        """The device's share: what jobs beside the judge may not use."""
        return self.places[0].budget_bytes

    @property
    def host_budget_bytes(self) -> int:
        return sum(p.budget_bytes for p in self.places[1:])

    def used_on(self, name: str) -> int:
        """Bytes held at the place called `name` ("device" or "host"; none at a place not kept)."""
        return sum(self._held(p, self._kept) for p in self.places if p.name == name)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def keys(self) -> list[str]:
        return list(self._entries)

    def place_of(self, key: str) -> str | None:
        """The furthest place that slots of `key` went to (None if it has none)."""
        place = self._last.get(key)
        return place.name if place else None

    def reserve(self, key: str, nbytes: int, in_use: frozenset[str] = frozenset()) -> torch.device:
        """Make room for a slot of `nbytes` more under `key`, evicting other keys, oldest first,
        and say on which torch device to keep it. References of keys `in_use` (tasks with work in
        flight) are never evicted: if no place has room without them, `key` is dropped and
        BudgetBusy raised (the caller tries again later)."""
        total = self._held_by(key) + nbytes
        if total > sum(p.budget_bytes for p in self.places) or all(nbytes > p.budget_bytes for p in self.places):
            raise BudgetExceeded(f"the reference outputs need {_gb(total)}, more than the judge's budget of "
                                 f"{self._budgets()}")
        further = self.places[self.places.index(self._last.get(key, self.places[0])):]  # where it went last, or on
        for place in further:
            mine = self._held_by(key, place) + nbytes
            if mine <= self._room(place, in_use - {key}):
                self._evict_for(place, mine, key, in_use)
                self._last[key] = place
                return place.device
        never = all(self._held_by(key, p) + nbytes > p.budget_bytes for p in further)
        self.drop(key)  # what it stored so far goes too, so that the tasks in use can go on
        if never:
            raise BudgetExceeded(f"the reference outputs need {_gb(total)}, which the judge's budget of "
                                 f"{self._budgets()} cannot hold in the pieces they come in")
        raise BudgetBusy(f"the judge's budget of {self._budgets()} is held by the references of tasks in use",
                         need_bytes=total)

    def put(self, key: str, slot: str, tensors: list[torch.Tensor]) -> None:
        """Keep `tensors` as `slot` of `key`, where `reserve` placed them (an empty list frees the slot)."""
        self._entries.setdefault(key, {})[slot] = tensors
        place = self._last.setdefault(key, self.places[0])
        self._kept.setdefault(key, {})[slot] = (place, _nbytes(tensors))
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
        self._kept.pop(key, None)
        self._last.pop(key, None)

    def _held_by(self, key: str, place: Place | None = None) -> int:
        """Bytes of the slots of `key` (at `place` only, if given)."""
        return sum(n for p, n in self._kept.get(key, {}).values() if place is None or p is place)

    def _held(self, place: Place, keys) -> int:
        return sum(self._held_by(k, place) for k in keys)

    def _room(self, place: Place, in_use: frozenset[str]) -> int:
        return place.budget_bytes - self._held(place, in_use)

    def _evict_for(self, place: Place, mine: int, key: str, in_use: frozenset[str]) -> None:
        """Evict idle references with slots at `place`, oldest first, until `key` has `mine` bytes there."""
        while self._held(place, [k for k in self._kept if k != key]) + mine > place.budget_bytes:
            self.drop(next(k for k in self._entries if k != key and k not in in_use and self._held_by(k, place)))

    def _budgets(self) -> str:
        return " and ".join(f"{_gb(p.budget_bytes)}" + ("" if p.name == "device" else " in host memory")
                            for p in self.places)


def _nbytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB"
