"""Settings of one server process (built by the CLI or by tests, read by the Service)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .store import default_data_dir


@dataclass
class ServerConfig:
    data_dir: Path = field(default_factory=default_data_dir)
    task_roots: list[Path] = field(default_factory=list)
    wait_limit_s: float = 45.0
    progress_interval_s: float = 2.0
    device: str | None = None
    max_parallel: int | None = None
    auth_required: bool = False
    default_caller: str = "local"
    seed: int | None = None
    memory_threshold: int = 3
    """Distinct tasks a skill-memory rule needs before it is served."""
    sandbox: tuple[str, str] | None = None
    """The sandbox level kernel code runs at and what it means (found at `serve`)."""
    lease_s: float = 30.0
    """An evaluation's lease: a server that stops renewing it for this long is taken for dead."""
    shutdown_grace_s: float = 10.0
    """On SIGTERM/SIGINT, how long running evaluations may take to finish before they are marked failed."""

    @property
    def db_path(self) -> Path:
        return Path(self.data_dir) / "adaexplore.db"

    @property
    def work_dir(self) -> Path:
        return Path(self.data_dir) / "work"
