"""Snapshot of every tool's input and output schema and annotations: any change fails this test.

Regenerate after an intended change with:  ADAEXPLORE_UPDATE_SNAPSHOTS=1 pytest tests/server/test_server_schemas.py
"""

import json
import os
import re
from pathlib import Path

import anyio

from adaexplore.server.core.config import ServerConfig
from adaexplore.server.face.app import build_server

SNAPSHOT = Path(__file__).resolve().parents[1] / "snapshots" / "tools.json"


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
    """Schemas are part of every tools/list; keep them compact. Every field carries a description (about a
    fifth of the size); property titles, which repeat the field names, are left out."""
    assert len(json.dumps(current(tmp_path))) < 60_000


RAW_WHITESPACE = re.compile(r"\n|\s{2,}")


def undescribed(schema: dict, where: str) -> list[str]:
    """Paths of properties without a description, through $defs, arrays and anyOf."""
    out = []
    defs = schema.get("$defs", {})
    for name, d in defs.items():
        out += undescribed({"properties": d.get("properties", {})}, f"{where}.$defs.{name}")
    for name, prop in schema.get("properties", {}).items():
        if not prop.get("description"):
            out.append(f"{where}.{name}")
    return out


def test_every_field_of_every_tool_is_described(tmp_path):
    missing = []
    for name, t in current(tmp_path).items():
        missing += undescribed(t["input"], f"{name}.input")
        if t["output"]:
            missing += undescribed(t["output"], f"{name}.output")
    assert missing == [], "undescribed fields: " + ", ".join(missing)


def walk_text(obj, path=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in ("description", "title") and isinstance(v, str):
                yield f"{path}.{k}", v
            else:
                yield from walk_text(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from walk_text(v, f"{path}[{i}]")


def test_no_tool_description_carries_raw_newlines_or_whitespace_runs(tmp_path):
    bad = [p for p, text in walk_text(current(tmp_path)) if RAW_WHITESPACE.search(text)]
    assert bad == [], bad


def test_every_prompt_argument_is_described(tmp_path):
    mcp, svc = build_server(ServerConfig(data_dir=tmp_path))
    try:
        prompts = anyio.run(mcp.list_prompts)
    finally:
        svc.close()
    missing = [f"{p.name}.{a.name}" for p in prompts for a in (p.arguments or []) if not a.description]
    assert missing == []


def test_the_reward_of_every_status_is_stated_in_the_schema(tmp_path):
    from adaexplore.evaluator.results import Status

    tools = current(tmp_path)
    text = json.dumps(tools["evaluate_kernel"]["output"])
    for st in Status:
        assert st.value in text, st


def test_times_are_iso_8601_strings(tmp_path):
    out = current(tmp_path)["expand_node"]["output"]
    exp = out["properties"]["expires_at"]
    assert "ISO 8601" in exp["description"]
    assert {"type": "string"} in exp.get("anyOf", [exp])
