"""The timing protocol's measuring half: CUDA events, an L2 flush before every run.

Runs inside a forked worker process; `time_on_gpu` runs while the job holds the GPU lock.
The statistics over its samples (`summarize`, `contended`) run on the trusted side: `..stats`.

The functions it relies on are bound when this module is imported, which happens in the
warm parent before any candidate code exists, so a candidate that replaces
`torch.cuda.Event.elapsed_time`, `torch.cuda.synchronize` or `Tensor.zero_` (the flush) does not
change what is used here.
"""

from __future__ import annotations

import math
import time
from typing import Callable, NamedTuple

import torch

_perf_counter = time.perf_counter
_Event = torch.cuda.Event
_event_record = torch.cuda.Event.record
_elapsed_time = torch.cuda.Event.elapsed_time
_synchronize = torch.cuda.synchronize
_zero = torch.Tensor.zero_
_spin = torch.cuda._sleep  # keeps the GPU busy for a number of its clock cycles

L2_FLUSH_BYTES = 256 * 1024 * 1024  # larger than any current GPU's L2 (H200: 60 MB)
# Before each timed run the GPU spins this many cycles (about 0.5 ms on an H200) while the host
# queues the run: the events then bracket the kernels alone, however slow the host is to launch
# them (a 10 us kernel otherwise reads as 10 to 30 us when other processes share the CPU).
LEAD_CYCLES = 1_000_000


def drain_device() -> None:
    """Wait for this process's queued GPU work, if it has started CUDA at all."""
    if torch.cuda.is_initialized():
        _synchronize()


class Measured(NamedTuple):
    """What a timing loop saw: per-run event times, how long the device still worked after a
    call returned (a few runs), per-run L2-flush times, and the last output."""

    event_ms: list[float]
    drain_ms: list[float]
    flush_ms: list[float]
    out: object


def runs_within(budget_ms: float, per_run_ms: float, least: int, most: int) -> int:
    """How many timed runs fit in `budget_ms` at `per_run_ms` each, kept within [least, most]
    (all `most` when there is no budget)."""
    if budget_ms <= 0 or per_run_ms <= 0:
        return most
    return max(min(least, most), min(most, math.ceil(budget_ms / per_run_ms)))


def time_on_gpu(run: Callable[[int], object], prepare: Callable[[int], None], *, warmup: int, runs: int,
                flush_l2: bool, device: torch.device, budget_ms: float = 0.0, least: int = 1) -> Measured:
    """Time `run(i)` with CUDA events around each call, flushing L2 before each, the GPU
    kept busy ahead of each (`LEAD_CYCLES`) so that no run waits for the host to launch it.

    `prepare(i)` is called before the flush, outside the timed region (it refreshes inputs).
    The flush is timed too (see `contended`). The warm-up runs, timed as a whole on the host,
    say how long a run takes, and so how many of the `runs` fit in `budget_ms` (at least
    `least`). A few more runs measure, with the host clock and a device-wide synchronize, how
    long the device keeps working after `run` returned: work that escapes the current stream
    shows there and not in the events.
    """
    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device=device) if flush_l2 else None
    out = None
    _synchronize(device)
    started = _perf_counter()
    for i in range(max(1, warmup)):
        prepare(i)
        if flush is not None:
            _zero(flush)
        out = run(i)
    _synchronize(device)
    runs = runs_within(budget_ms, (_perf_counter() - started) * 1e3 / max(1, warmup), least, runs)
    flushes, starts, ends = ([_Event(enable_timing=True) for _ in range(runs)] for _ in range(3))
    for i in range(runs):
        _spin(LEAD_CYCLES)
        prepare(i)
        if flush is not None:
            _event_record(flushes[i])
            _zero(flush)
        _event_record(starts[i])
        out = run(i)
        _event_record(ends[i])
    _synchronize(device)
    event_ms = [_elapsed_time(s, e) for s, e in zip(starts, ends)]
    flush_ms = [_elapsed_time(f, s) for f, s in zip(flushes, starts)] if flush is not None else []

    drain_ms = []
    for i in range(min(10, runs)):
        prepare(i)
        if flush is not None:
            _zero(flush)
        _synchronize(device)
        out = run(i)
        t0 = _perf_counter()
        _synchronize(device)
        drain_ms.append((_perf_counter() - t0) * 1e3)
    return Measured(event_ms, drain_ms, flush_ms, out)


def time_on_host(run: Callable[[int], object], prepare: Callable[[int], None], *, warmup: int, runs: int,
                 flush_l2: bool, device: torch.device, budget_ms: float = 0.0, least: int = 1) -> Measured:
    """The same loop on the CPU with host clocks (no events, no flush, nothing can escape).

    Only for exercising the timing path without a GPU (dry runs, tests); the evaluator
    reports no CPU timings by default.
    """
    out = None
    started = _perf_counter()
    for i in range(max(1, warmup)):
        prepare(i)
        out = run(i)
    runs = runs_within(budget_ms, (_perf_counter() - started) * 1e3 / max(1, warmup), least, runs)
    samples = []
    for i in range(runs):
        prepare(i)
        t0 = _perf_counter()
        out = run(i)
        samples.append((_perf_counter() - t0) * 1e3)
    return Measured(samples, [], [], out)


def time_model(run: Callable[[int], object], prepare: Callable[[int], None], *, warmup: int, runs: int,
               flush_l2: bool, device: torch.device, budget_ms: float = 0.0, least: int = 1) -> Measured:
    """CUDA events on a GPU, host clocks elsewhere."""
    timer = time_on_gpu if device.type == "cuda" else time_on_host
    return timer(run, prepare, warmup=warmup, runs=runs, flush_l2=flush_l2, device=device, budget_ms=budget_ms,
                 least=least)
