"""The bench is a client of the server: what it may import, and what a missing extra tells the user."""

import ast
import builtins
from pathlib import Path

import pytest

import adaexplore.server.bench as bench

BENCH = Path(bench.__file__).resolve().parent
FORBIDDEN = ("adaexplore.evaluator", "adaexplore.search", "adaexplore.skills", "adaexplore.server")


def imported_modules(path: Path) -> list[str]:
    """Every module a file imports, relative imports resolved against adaexplore.server.bench."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                names.append(node.module or "")
            else:
                base = "adaexplore.server.bench".split(".")[: 3 - (node.level - 1)]
                names.append(".".join(base + ([node.module] if node.module else [])))
    return names


def test_the_bench_imports_only_itself_common_and_the_mcp_client_of_the_project():
    files = sorted(BENCH.glob("*.py"))
    assert len(files) >= 8
    offenders = [f"{f.name}: {m}" for f in files for m in imported_modules(f)
                 if m.startswith(FORBIDDEN) and not m.startswith("adaexplore.server.bench")]
    assert offenders == []
    server_side = [f"{f.name}: {m}" for f in files for m in imported_modules(f) if m.startswith("mcp.server")]
    assert server_side == []


def block(monkeypatch, *names):
    real = builtins.__import__

    def fake(name, *args, **kwargs):
        if name.split(".")[0] in names:
            raise ImportError(f"No module named {name!r}")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake)


def test_without_the_openai_package_the_bench_says_which_extra_to_install(monkeypatch):
    from adaexplore.server.bench.endpoint import ChatEndpoint, EndpointError
    from adaexplore.server.bench.settings import EndpointSettings

    block(monkeypatch, "openai")
    with pytest.raises(EndpointError, match=r"pip install 'adaexplore\[bench\]'"):
        ChatEndpoint(EndpointSettings(base_url="http://127.0.0.1:9/v1", model="m", api_key="k"))


def test_without_matplotlib_the_report_is_written_and_says_why_it_has_no_plots(monkeypatch, tmp_path):
    from adaexplore.server.bench.report import write_report
    from adaexplore.server.bench.state import StepRecord, VariantState

    VariantState(tmp_path, "tree").add_step(StepRecord(task="t", step=1, status="correct"))
    block(monkeypatch, "matplotlib")
    md, notes = write_report(tmp_path)
    assert any("adaexplore[bench]" in n for n in notes)
    assert "| tree | 1 | 1 | 100% |" in md.read_text() and not (tmp_path / "plots").exists()


def test_without_rich_progress_falls_back_to_lines(monkeypatch, capsys):
    from adaexplore.server.bench.progress import Progress
    from adaexplore.server.bench.state import StepRecord

    block(monkeypatch, "rich")
    with Progress(total=2) as p:
        p.task("tree", "softmax", 0, 2)
        p.step("tree", "softmax", StepRecord(task="softmax", step=1, status="compile_error"))
    assert "softmax step 1: compile_error" in capsys.readouterr().err


def test_answers_give_their_module_in_a_fenced_block_and_rules_in_one_line():
    from adaexplore.server.bench.extract import one_rule, python_block

    answer = "Try this:\n```python\nx = 1\n```\nand whole:\n```python\nclass ModelNew:\n    pass\n```\nDone."
    assert python_block(answer) == "class ModelNew:\n    pass\n"
    assert python_block("no code here") is None
    assert python_block("```\nimport torch\n```") == "import torch\n"
    assert one_rule("Rule: Use x.to(tl.float32), not tl.float32(x).") == "Use x.to(tl.float32), not tl.float32(x)."
    assert one_rule("```python\ncode\n```") is None


def test_task_ranges_pick_kernelbench_numbers_or_positions(tmp_path):
    from adaexplore.server.bench.tasks import find_tasks, parse_range

    assert parse_range("1-3,7") == [1, 2, 3, 7] and parse_range(None) is None
    with pytest.raises(ValueError):
        parse_range("5-2")
    level = tmp_path / "level2"
    level.mkdir()
    for name in ("12_Gemm.py", "9_Matmul.py", "63_Relu.py"):
        (level / name).write_text("")
    assert [p.name for p in find_tasks(tmp_path, 2, None)] == ["9_Matmul.py", "12_Gemm.py", "63_Relu.py"]
    assert [p.name for p in find_tasks(tmp_path, 2, "63,9")] == ["63_Relu.py", "9_Matmul.py"]
    with pytest.raises(FileNotFoundError, match="numbered 5"):
        find_tasks(tmp_path, 2, "5")
    examples = Path(__file__).resolve().parents[2] / "examples" / "tasks"
    assert find_tasks(examples, 2, "7")[0].name == "softmax.py"  # no level2/ there: positions in name order


def test_speedup_against_torch_compile_is_read_from_the_feedback():
    from adaexplore.server.bench.driver import speedup_vs_compile

    fb = "runtime 0.5000 ms\nspeedup 2.000x vs reference\nspeedup 1.500x vs the faster of eager and torch.compile " \
         "(0.7500 ms compiled)"
    assert speedup_vs_compile(fb, 0.5) == pytest.approx(1.5)
    assert speedup_vs_compile("status: correct", 0.5) is None and speedup_vs_compile(fb, None) is None


def test_bench_servers_hold_verdicts_until_torch_compile_is_timed_unless_the_user_says_otherwise(monkeypatch,
                                                                                              tmp_path):
    from adaexplore.server.bench.session import server_params

    monkeypatch.delenv("ADAEXPLORE_WAIT_FOR_COMPILE", raising=False)
    assert server_params(tmp_path).env["ADAEXPLORE_WAIT_FOR_COMPILE"] == "1"
    monkeypatch.setenv("ADAEXPLORE_WAIT_FOR_COMPILE", "0")
    assert server_params(tmp_path).env["ADAEXPLORE_WAIT_FOR_COMPILE"] == "0"
