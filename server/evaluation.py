"""The evaluators of a server process (one pool per GPU), created on first use (importing torch takes seconds)."""

from __future__ import annotations

import threading
from typing import Any

from . import texts
from .config import ServerConfig


class EvaluatorHolder:
    def __init__(self, config: ServerConfig, evaluator: Any = None):
        self.config = config
        self._evaluator = evaluator
        self._owned = evaluator is None
        self._lock = threading.Lock()
        self._hardware: str | None = None

    def get(self) -> Any:
        if self._evaluator is None:
            with self._lock:
                if self._evaluator is None:
                    from ..evaluator.fleet import EvaluatorFleet

                    # One evaluation pool per visible GPU (or the one named by --device); a CPU-only
                    # machine gets a single pool that runs kernels through Triton's interpreter.
                    self.config.work_dir.mkdir(parents=True, exist_ok=True)
                    devices = [self.config.device] if self.config.device else None
                    self._evaluator = EvaluatorFleet(devices=devices, work_dir=self.config.work_dir,
                                                     max_parallel=self.config.max_parallel,
                                                     hidden_paths=[self.config.data_dir])
        return self._evaluator

    @property
    def device(self) -> str:
        return str(self.get().device)

    def hardware(self) -> str:
        if self._hardware is None:
            self._hardware = texts.hardware_facts(self.device)
        return self._hardware

    def close(self) -> None:
        if self._evaluator is not None and self._owned:
            try:
                self._evaluator.close()
            except Exception:
                pass
            self._evaluator = None
