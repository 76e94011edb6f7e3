"""Which task files a bench runs: a KernelBench-style problems folder, a level and a task range (bench process).

`--problems DIR --level 2` reads DIR/level2 when it exists, else DIR itself. Task files named like KernelBench's
(`12_Gemm_Multiply_LeakyReLU.py`) are picked by their number; other files (the project's examples) by their
1-based position in name order.
"""

from __future__ import annotations

import re
from pathlib import Path

_NUMBERED = re.compile(r"^(\d+)_")


def parse_range(spec: str | None) -> list[int] | None:
    """'1-20', '3,5,9-11' -> the numbers; None or '' -> None (all tasks)."""
    if not spec:
        return None
    out: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise ValueError(f"bad task range {spec!r}: use e.g. 1-20 or 3,5,9-11") from None
        if b < a:
            raise ValueError(f"bad task range {part!r}: the end comes before the start")
        out.extend(range(a, b + 1))
    return out


def task_number(path: Path, position: int) -> int:
    m = _NUMBERED.match(path.name)
    return int(m.group(1)) if m else position


def find_tasks(problems: Path, level: int | None, spec: str | None) -> list[Path]:
    """The task files to run, in the order given by `spec` (else by task number)."""
    folder = problems / f"level{level}" if level is not None and (problems / f"level{level}").is_dir() else problems
    if not folder.is_dir():
        raise FileNotFoundError(f"no problems folder at {folder}")
    files = sorted((p for p in folder.glob("*.py") if not p.name.startswith("_")), key=lambda p: p.name)
    numbered = {task_number(p, i): p for i, p in enumerate(files, 1)}
    wanted = parse_range(spec)
    if wanted is None:
        return [numbered[k] for k in sorted(numbered)]
    missing = [k for k in wanted if k not in numbered]
    if missing:
        raise FileNotFoundError(f"no task numbered {', '.join(map(str, missing))} in {folder}")
    return [numbered[k] for k in dict.fromkeys(wanted)]
