"""Host paths kept out of what an agent reads; runs in the trusted processes (server, evaluator).

The interpreter's prefixes, its site-packages, this project's folder and the home folder, plus
whatever a caller adds (the data directory, task roots, the evaluator's scratch folder), become
short names (`<python>`, `<site-packages>`, `<adaexplore>`, `~`, ...), and a traceback's file
keeps only its base name. The server applies it to every reply, the worker pool to every job's
report, so a message names no folder of the host whichever way it travels.
"""

from __future__ import annotations

import os
import re
import site
import sys
from functools import lru_cache
from pathlib import Path

_TRACE_FILE = re.compile(r'File "(/[^"]*/)([^"/]+)"')


@lru_cache(maxsize=1)
def _python_prefixes() -> tuple[tuple[str, str], ...]:
    pairs = [(d, "<site-packages>") for d in site.getsitepackages()]
    try:
        pairs.append((site.getusersitepackages(), "<site-packages>"))
    except AttributeError:
        pass
    pairs.append((str(Path(__file__).resolve().parent.parent), "<adaexplore>"))
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        pairs.append((prefix, "<python>"))
        pairs.append((os.path.realpath(prefix), "<python>"))
    return tuple(pairs)


def scrub(text: str, extra: tuple[tuple[str, str], ...] = ()) -> str:
    """`text` without the host's paths: known prefixes become <names>, traceback files their base names."""
    if not text:
        return text
    pairs = list(extra) + list(_python_prefixes())
    home = os.path.expanduser("~")
    if home not in ("/", "~"):
        pairs.append((home, "~"))
    for prefix, name in sorted(pairs, key=lambda kv: -len(kv[0])):
        if prefix and len(prefix) > 1 and prefix in text:
            text = text.replace(prefix, name)
    return _TRACE_FILE.sub(lambda m: f'File "{m.group(2)}"', text)
