"""Settings of one server process: one frozen object, read from the environment once, when it is made.

Runs in the server process and in CLI commands. This is the only module of the server that reads
environment variables (the README lists them); command-line flags override them (the CLI passes its
flags as arguments), and code that needs another setting makes a copy with `model_copy(update=...)`,
never changing one in use.

| variable | setting | default |
| --- | --- | --- |
| `ADAEXPLORE_HOME` | `data_dir`: the state directory (database, work files) | `~/.adaexplore` |
| `ADAEXPLORE_DEVICE` | `device`: the one device to evaluate on | every visible GPU, else the CPU |
| `ADAEXPLORE_MAX_PARALLEL` | `max_parallel`: evaluations at once per device | by device |
| `ADAEXPLORE_WAIT_LIMIT_S` | `wait_limit_s`: how long evaluate_kernel waits before answering 'pending' | 45 |
| `ADAEXPLORE_MEMORY_THRESHOLD` | `memory_threshold`: distinct tasks a rule needs before it is served | 3 |
| `ADAEXPLORE_LEASE_S` | `lease_s`: an evaluation's lease | 30 |
| `ADAEXPLORE_SHUTDOWN_GRACE_S` | `shutdown_grace_s`: time running evaluations get on SIGTERM | 10 |
| `ADAEXPLORE_BASELINES` | `baselines`: what a kernel's speed is compared with, e.g. `eager,compile` | by device |
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


def _home() -> Path:
    return Path("~/.adaexplore").expanduser()


class ServerConfig(BaseSettings):
    """Everything one server process is told; immutable once made."""

    model_config = SettingsConfigDict(env_prefix="ADAEXPLORE_", frozen=True, populate_by_name=True,
                                      extra="forbid")

    data_dir: Path = Field(default_factory=_home, validation_alias=AliasChoices("data_dir", "ADAEXPLORE_HOME"))
    task_roots: tuple[Path, ...] = Field(default=(), description="folders whose files register_task may read")
    wait_limit_s: float = Field(45.0, ge=0)
    progress_interval_s: float = Field(2.0, gt=0)
    device: str | None = None
    max_parallel: int | None = Field(None, ge=1)
    auth_required: bool = False
    default_caller: str = "local"
    seed: int | None = None
    memory_threshold: int = Field(3, ge=1, description="distinct tasks a skill-memory rule needs before it is served")
    sandbox: tuple[str, str] | None = Field(None, description="the sandbox level kernel code runs at and what it "
                                                              "means (found at `serve`)")
    lease_s: float = Field(30.0, ge=1, description="an evaluation's lease: a server that stops renewing it for "
                                                   "this long is taken for dead")
    shutdown_grace_s: float = Field(10.0, ge=0, description="on SIGTERM/SIGINT, how long running evaluations may "
                                                             "take to finish before they are marked failed")
    baselines: Annotated[tuple[str, ...] | None, NoDecode] = Field(
        None, description="what a kernel's speed is compared with; 'eager' always, 'compile' on a GPU by default")
    wait_for_compile: bool = Field(
        False, description="hold each timed verdict until the task's torch.compile time is known, so every speedup "
                           "carries it (a bench's figures); by default the first verdicts of a task may come "
                           "without it while torch.compile is measured in the background")

    @field_validator("data_dir", mode="after")
    @classmethod
    def _expand(cls, v: Path) -> Path:
        return v.expanduser()

    @field_validator("baselines", mode="before")
    @classmethod
    def _comma_list(cls, v: object) -> object:
        if isinstance(v, str):
            return tuple(b.strip() for b in v.split(",") if b.strip()) or None
        return v

    @property
    def db_path(self) -> Path:
        return self.data_dir / "adaexplore.db"

    @property
    def work_dir(self) -> Path:
        return self.data_dir / "work"
