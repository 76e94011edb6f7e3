"""The evaluators of a server process (one pool per GPU), created on first use (importing torch takes seconds).

Runs in the server process. Evaluation threads run at a lower CPU priority, and so do the
processes they start, so that tool calls stay fast while kernels are checked. Whether kernels will
run on a GPU or in Triton's interpreter is known before the evaluators start (`interpreted`).
"""

from __future__ import annotations

import gc
import os
import sys
import threading

from ...evaluator import EvaluatorFleet, EvaluatorLike
from . import texts
from .config import ServerConfig

EVALUATION_NICENESS = 5


def lower_priority() -> None:
    """Lower the calling thread's CPU priority (Linux: per thread; inherited by processes it starts)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), EVALUATION_NICENESS)
    except (AttributeError, OSError):
        pass


def gpu_visible() -> bool:
    """A GPU the evaluator would find, judged without importing torch (that takes seconds)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            return bool(torch.cuda.is_available())
        except Exception:
            return False
    return os.path.exists("/dev/nvidia0") or os.path.exists("/dev/kfd")


class EvaluatorHolder:
    def __init__(self, config: ServerConfig, evaluator: EvaluatorLike | None = None):
        self.config = config
        self._evaluator = evaluator
        self._owned = evaluator is None
        self._lock = threading.Lock()
        self._hardware: str | None = None

    @property
    def started(self) -> bool:
        return self._evaluator is not None

    def get(self) -> EvaluatorLike:
        if self._evaluator is None:
            with self._lock:
                if self._evaluator is None:
                    # One evaluation pool per visible GPU (or the one named by --device); a CPU-only
                    # machine gets a single pool that runs kernels through Triton's interpreter.
                    self.config.work_dir.mkdir(parents=True, exist_ok=True)
                    devices = [self.config.device] if self.config.device else None
                    made: list[EvaluatorLike | BaseException] = []

                    def make() -> None:  # on a low-priority thread: the processes it starts inherit that
                        lower_priority()
                        try:
                            made.append(EvaluatorFleet(devices=devices, work_dir=self.config.work_dir,
                                                       max_parallel=self.config.max_parallel,
                                                       hidden_paths=[self.config.data_dir],
                                                       baselines=self.config.baselines,
                                                       wait_for_compile=self.config.wait_for_compile))
                        except BaseException as exc:
                            made.append(exc)

                    t = threading.Thread(target=make, name="adx-evaluator-start")
                    t.start()
                    t.join()
                    if isinstance(made[0], BaseException):
                        raise made[0]
                    self._evaluator = made[0]
                    # torch's many objects stay out of later collections (full ones took 100+ ms). The
                    # thresholds stay Python's: young collections of a few hundred objects take well under
                    # 1 ms, where raising them to tens of thousands made each one a 20-70 ms pause.
                    gc.freeze()
        return self._evaluator

    @property
    def device(self) -> str:
        return str(self.get().device)

    def interpreted(self) -> bool:
        """Whether kernels run in Triton's interpreter (no GPU), known without starting the evaluator."""
        device = (self._evaluator.device if self._evaluator is not None else None) or self.config.device
        return not str(device).startswith("cuda") if device else not gpu_visible()

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
