"""Snapshot of every tool's input and output schema and annotations: any change fails this test.

Regenerate after an intended change with:  ADAEXPLORE_UPDATE_SNAPSHOTS=1 pytest tests/test_server_schemas.py
"""

import json
import os
from pathlib import Path

import anyio

from adaexplore.server.app import build_server
from adaexplore.server.config import ServerConfig

SNAPSHOT = Path(__file__).parent / "snapshots" / "tools.json"


def current(tmp_path) -> dict:
    mcp, svc = build_server(ServerConfig(data_dir=tmp_path))
    try:
        tools = anyio.run(mcp.list_tools)
    finally:
        svc.close()
    return {t.name: {"description": t.description, "annotations": t.annotations.model_dump(exclude_none=True),
                     "input": t.input_schema, "output": t.output_schema} for t in sorted(tools, key=lambda t: t.name)}


def test_tool_schemas_match_snapshot(tmp_path):
    now = current(tmp_path)
    if os.environ.get("ADAEXPLORE_UPDATE_SNAPSHOTS") or not SNAPSHOT.exists():
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    saved = json.loads(SNAPSHOT.read_text())
    assert sorted(saved) == sorted(now), "tool set changed; regenerate with ADAEXPLORE_UPDATE_SNAPSHOTS=1"
    for name in now:
        assert saved[name] == json.loads(json.dumps(now[name])), (
            f"schema of {name} changed; if intended, regenerate with ADAEXPLORE_UPDATE_SNAPSHOTS=1")


def test_outputs_stay_small(tmp_path):
    """Schemas are part of every tools/list; keep them compact."""
    assert len(json.dumps(current(tmp_path))) < 40_000
