"""Baseline timings (PyTorch eager, torch.compile) kept on disk between runs.

A baseline depends on the task, the device it was measured on, the software that ran it
and the protocol; the key names all of them. Entries are small JSON files written
atomically, so several server processes can share one directory.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from .results import TimingStats

BASELINES = ("eager", "compile")


@dataclass(frozen=True)
class BaselineKey:
    task_id: str
    device_name: str
    gpu: str  # the physical device within the machine ("0", a UUID, or "cpu")
    torch_version: str
    triton_version: str
    protocol_key: str

    def digest(self) -> str:
        raw = orjson.dumps(self.__dict__, option=orjson.OPT_SORT_KEYS)
        return hashlib.sha256(raw).hexdigest()[:24]


@dataclass
class Baselines:
    eager: TimingStats | None = None
    compile: TimingStats | None = None
    compile_note: str | None = None
    measured: tuple[str, ...] = ()  # which baselines were attempted (a failed compile counts)

    def has(self, names) -> bool:
        return all(n in self.measured for n in names)


class BaselineStore:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def path(self, key: BaselineKey) -> Path:
        return self.root / key.task_id / f"{key.digest()}.json"

    def load(self, key: BaselineKey) -> Baselines | None:
        try:
            data = orjson.loads(self.path(key).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        if not isinstance(data, dict) or data.get("key") != key.__dict__:
            return None
        try:
            return Baselines(
                eager=TimingStats.model_validate(data["eager"]) if data.get("eager") else None,
                compile=TimingStats.model_validate(data["compile"]) if data.get("compile") else None,
                compile_note=data.get("compile_note"),
                measured=tuple(n for n in data.get("measured", []) if n in BASELINES))
        except (ValueError, TypeError, KeyError):
            return None

    def save(self, key: BaselineKey, value: Baselines) -> None:
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        blob = orjson.dumps({
            "key": key.__dict__,
            "eager": value.eager.model_dump() if value.eager else None,
            "compile": value.compile.model_dump() if value.compile else None,
            "compile_note": value.compile_note,
            "measured": list(value.measured),
            "measured_at": time.time(),
        }, option=orjson.OPT_INDENT_2)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(blob)
            os.replace(tmp, path)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
