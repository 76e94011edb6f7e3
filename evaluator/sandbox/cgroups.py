"""A job's cgroups: its process count, its host memory and its share of the CPU.

Made and read by the warm parent (runs in that process), joined by each forked job before it is
confined (`confine.py`). Works with cgroup v1 (a hierarchy per controller) and v2 (one tree).
"""

from __future__ import annotations

import os
from pathlib import Path


class JobCgroups:
    """A pids, a memory and a cpu cgroup per job, made by the warm parent (cgroup v1 hierarchies of
    their own, or v2 with those controllers). Memory a job's processes touch is charged to its
    cgroup whatever holds it: anonymous memory, memfds, shared memory, its tmpfs /tmp. Jobs share
    the CPU as groups of equal weight, however many processes (or sessions) each one starts."""

    CONTROLLERS = ("pids", "memory", "cpu")

    def __init__(self, max_processes: int) -> None:
        self.max_processes = max_processes
        self.roots: dict[str, Path] = {}  # controller -> the warm parent's folder under its hierarchy
        name = f"adaexplore-{os.getpid()}"
        base = Path("/sys/fs/cgroup")
        for controller in self.CONTROLLERS:
            root = self._find_root(base, controller, name)
            if root is None:
                continue
            try:
                root.mkdir(exist_ok=True)
                if (root / "cgroup.subtree_control").exists():  # cgroup v2: jobs below this one
                    (root / "cgroup.subtree_control").write_text(f"+{controller}")
            except OSError:
                continue
            self.roots[controller] = root

    @staticmethod
    def _find_root(base: Path, controller: str, name: str) -> Path | None:
        for cand in (base / controller, base / "unified", base):
            try:
                if not (cand / "cgroup.procs").exists() or not os.access(cand, os.W_OK):
                    continue
                if cand.name == controller:  # cgroup v1: a hierarchy of its own
                    return cand / name
                if controller in (cand / "cgroup.controllers").read_text().split():
                    (cand / "cgroup.subtree_control").write_text(f"+{controller}")
                    return cand / name
            except OSError:
                continue
        return None

    @property
    def available(self) -> bool:
        return "pids" in self.roots

    @property
    def memory_available(self) -> bool:
        return "memory" in self.roots

    def create(self, job_id: str, memory_bytes: int | None = None) -> list[str]:
        """The job's cgroup folders, each with its limit set (none where a controller is missing)."""
        made: list[str] = []
        limits = {"pids": [("pids.max", str(self.max_processes))],
                  "cpu": [("cpu.weight", "100"), ("cpu.shares", "1024")]}  # v2, v1: every job alike
        if memory_bytes:
            # v2 names first, then v1's; swap is charged too where the kernel counts it
            limits["memory"] = [("memory.max", str(memory_bytes)), ("memory.swap.max", "0"),
                                ("memory.limit_in_bytes", str(memory_bytes)),
                                ("memory.memsw.limit_in_bytes", str(memory_bytes))]
        for controller, root in self.roots.items():
            if controller not in limits:
                continue
            path = root / job_id
            try:
                path.mkdir(exist_ok=True)
                written = 0
                for name, value in limits[controller]:
                    if (path / name).exists():
                        try:
                            (path / name).write_text(value)
                            written += 1
                        except OSError:
                            if name.startswith("memory.swap") or name.startswith("memory.memsw"):
                                continue  # no swap accounting on this kernel: memory alone
                            raise
                if not written:
                    raise OSError(f"no {controller} limit could be set")
                made.append(str(path))
            except OSError:
                self.remove([str(path)])
        return made

    @staticmethod
    def remove(paths: list[str] | str | None) -> None:
        for path in [paths] if isinstance(paths, str) else (paths or []):
            try:
                os.rmdir(path)
            except OSError:
                pass

    @staticmethod
    def join(paths: list[str] | None) -> None:
        """Put the calling process (and so everything it starts) under the job's limits."""
        for path in paths or []:
            Path(path, "cgroup.procs").write_text(str(os.getpid()))

    @staticmethod
    def _events(path: str, name: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        try:
            for line in Path(path, name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if value.strip().isdigit():
                    counts[key] = int(value)
        except OSError:
            pass
        return counts

    @classmethod
    def process_limit_hit(cls, paths: list[str] | None) -> bool:
        """Whether the job's processes reached the limit (a fork was refused)."""
        return any(cls._events(p, "pids.events").get("max", 0) > 0 for p in paths or [])

    @staticmethod
    def processes(paths: list[str] | None) -> list[int]:
        """The pids of every process of the job, as its cgroups list them."""
        pids: set[int] = set()
        for path in paths or []:
            try:
                pids.update(int(p) for p in Path(path, "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                continue
        return sorted(pids)

    @classmethod
    def memory_limit_hit(cls, paths: list[str] | None) -> bool:
        """Whether the job's memory reached its limit and the kernel killed for it."""
        for path in paths or []:
            if os.path.exists(os.path.join(path, "memory.events")):  # v2
                if cls._events(path, "memory.events").get("oom_kill", 0) > 0:
                    return True
            elif os.path.exists(os.path.join(path, "memory.oom_control")):  # v1
                if cls._events(path, "memory.oom_control").get("oom_kill", 0) > 0:
                    return True
        return False

    def close(self) -> None:
        for root in self.roots.values():
            try:
                os.rmdir(root)
            except OSError:
                pass
