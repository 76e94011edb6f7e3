"""The server's core apart from MCP: domain errors, one settings object, and the package's import rules."""

import ast
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

import adaexplore.common
import adaexplore.evaluator
import adaexplore.search
import adaexplore.server
import adaexplore.skills
from adaexplore.server.core.config import ServerConfig
from adaexplore.server.core.errors import NotFound
from adaexplore.server.face.app import HttpSettings, build_server


def imported_modules(folder: Path) -> dict[str, set[str]]:
    """Every module's imports (absolute names, and relative ones as '.name' with their dots)."""
    out: dict[str, set[str]] = {}
    for path in folder.rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                names.add("." * node.level + (node.module or ""))
        out[str(path.relative_to(folder))] = names
    return out


def package_folder(module) -> Path:
    return Path(module.__file__).parent


def speaks_mcp(imports: set[str]) -> bool:
    return any(i in ("mcp", "mcp_types") or i.startswith(("mcp.", "mcp_types.")) for i in imports)


def test_the_application_core_never_imports_mcp():
    core = imported_modules(package_folder(adaexplore.server) / "core")
    assert core and [name for name, imports in core.items() if speaks_mcp(imports)] == []


def test_only_the_servers_face_imports_mcp():
    rooms = set()
    for part in (adaexplore.common, adaexplore.evaluator, adaexplore.search, adaexplore.server, adaexplore.skills):
        for name, imports in imported_modules(package_folder(part)).items():
            if speaks_mcp(imports):
                rooms.add(part.__name__ + "." + name.partition("/")[0] if "/" in name else part.__name__)
    assert rooms == {"adaexplore.server.face"}


def parts_imported_by(module) -> set[str]:
    """The other parts of adaexplore (evaluator, search, ...) that a part's modules import."""
    found = set()
    for path, imports in imported_modules(package_folder(module)).items():
        out_of_part = "." * (path.count("/") + 2)  # the dots of a relative import that leave the part
        for i in imports:
            if i.startswith("adaexplore."):
                found.add(i.split(".")[1])
            elif i.startswith(out_of_part) and not i.startswith(out_of_part + "."):
                found.add(i[len(out_of_part):].split(".")[0])
    return found - {module.__name__.split(".")[1]}


def test_evaluator_search_and_skills_never_import_each_other_and_common_imports_none_of_them():
    assert parts_imported_by(adaexplore.evaluator) <= {"common"}
    assert parts_imported_by(adaexplore.search) <= {"common"}
    assert parts_imported_by(adaexplore.skills) <= {"common"}
    assert parts_imported_by(adaexplore.common) == set()
    assert parts_imported_by(adaexplore.server) == {"common", "evaluator", "search", "skills"}


def test_the_vocabulary_and_the_search_load_without_torch_or_a_database():
    code = ("import sys, adaexplore.common.vocab, adaexplore.search; "
            "print(sorted(m for m in ('torch', 'sqlite3', 'mcp') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


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
