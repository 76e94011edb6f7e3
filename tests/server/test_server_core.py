"""The server's core apart from MCP: domain errors and one settings object (its import rules: tests/project)."""

import anyio
import pytest
from mcp import Client

from adaexplore.server.core.config import ServerConfig
from adaexplore.server.core.errors import NotFound
from adaexplore.server.face.app import HttpSettings, build_server


def test_settings_are_read_from_the_environment_once(monkeypatch, tmp_path):
    monkeypatch.setenv("ADAEXPLORE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ADAEXPLORE_BASELINES", "eager, compile")
    monkeypatch.setenv("ADAEXPLORE_WAIT_LIMIT_S", "7")
    cfg = ServerConfig()
    monkeypatch.setenv("ADAEXPLORE_WAIT_LIMIT_S", "9")
    assert cfg.data_dir == tmp_path / "home" and cfg.db_path == tmp_path / "home" / "adaexplore.db"
    assert cfg.baselines == ("eager", "compile") and cfg.wait_limit_s == 7
    assert ServerConfig(data_dir=tmp_path, wait_limit_s=3).wait_limit_s == 3  # arguments win
    with pytest.raises(ValueError):
        cfg.wait_limit_s = 1  # type: ignore[misc]


def test_building_an_http_server_leaves_the_given_settings_as_they_are(tmp_path):
    cfg = ServerConfig(data_dir=tmp_path)
    _, svc = build_server(cfg, http=HttpSettings())
    try:
        assert not cfg.auth_required and svc.config.auth_required
    finally:
        svc.close()


def test_the_core_raises_domain_errors_that_reach_the_agent_as_tool_errors(tmp_path):
    mcp, svc = build_server(ServerConfig(data_dir=tmp_path))
    try:
        with pytest.raises(NotFound, match="unknown node_id 'nope'"):
            svc.tasks.get_node("nope", include_code=False)

        async def ask() -> tuple[bool, str]:
            async with Client(mcp) as c:
                res = await c.call_tool("get_node", {"node_id": "nope"})
                return res.is_error, res.content[0].text

        is_error, text = anyio.run(ask)
        assert is_error and "unknown node_id 'nope'" in text and str(tmp_path) not in text
    finally:
        svc.close()
