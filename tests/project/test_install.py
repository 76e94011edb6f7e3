"""The package installs as the `adaexplore` namespace, from a wheel and editable, and its
console script works from outside the checkout."""

import importlib.util
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Where packages are laid out by PYTHONPATH (not installed), a fresh venv would see them first.
pytestmark = pytest.mark.skipif(bool(os.environ.get("PYTHONPATH")),
                                reason="needs an environment without PYTHONPATH overrides")


def _venv_with_current_deps(path: Path) -> Path:
    """A fresh venv that sees this environment's packages (torch, ...) but not adaexplore itself."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    py = path / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    # Link the current environment's packages one by one, leaving out any install of this project.
    deps = path / "deps"
    deps.mkdir()
    for lib in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        for entry in Path(lib).iterdir():
            name = entry.name.lower()
            if name.startswith(("adaexplore", "__editable__")) or name.endswith(".pth"):
                continue
            if not (deps / entry.name).exists():
                (deps / entry.name).symlink_to(entry)
    Path(site, "outer_env.pth").write_text(f"{deps}\n")
    return py


def _install_and_run(tmp_path: Path, editable: bool) -> str:
    py = _venv_with_current_deps(tmp_path / "venv")
    args = [str(py), "-m", "pip", "install", "-q", "--no-deps"]
    if importlib.util.find_spec("wheel") and importlib.util.find_spec("setuptools"):
        args.append("--no-build-isolation")  # build offline with this environment's setuptools
    args += ["-e", str(ROOT)] if editable else [str(ROOT)]
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run(args, check=True, env=env, cwd=tmp_path, capture_output=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    script = tmp_path / "venv" / "bin" / "adaexplore"
    out = subprocess.run([str(script), "--help"], check=True, capture_output=True, text=True, cwd=outside).stdout
    where = subprocess.run(
        [str(py), "-c", "import adaexplore.common, adaexplore.evaluator, adaexplore.server, adaexplore.search,"
                        " adaexplore.skills, adaexplore.examples as e;"
                        " [print(m.__file__) for m in (adaexplore.common, adaexplore.search, adaexplore.server,"
                        " adaexplore.skills)]; print(adaexplore.evaluator.__file__); print(e.__file__)"],
        check=True, capture_output=True, text=True, cwd=outside).stdout
    # Nothing generic like `server` or `search` is importable at the top level.
    top = subprocess.run([str(py), "-c", "import server"], capture_output=True, cwd=outside)
    assert top.returncode != 0
    return out + where


@pytest.mark.slow
def test_wheel_install_console_script_runs_outside_the_checkout(tmp_path):
    out = _install_and_run(tmp_path, editable=False)
    assert "serve" in out and "eval" in out and "demo" in out
    assert str(ROOT) not in out.splitlines()[-2]  # imported from the installed copy
    examples = Path(out.splitlines()[-1]).parent
    assert (examples / "tasks" / "softmax.py").exists() and (examples / "kernels" / "variants").is_dir()
    assert (Path(out.splitlines()[-3]).parent / "rule_adapter.npz").is_file()  # the memory's domain adapter


@pytest.mark.slow
def test_editable_install_maps_the_six_folders(tmp_path):
    out = _install_and_run(tmp_path, editable=True)
    assert "serve" in out
    lines = out.splitlines()
    mapped = [lines[-6], lines[-5], lines[-4], lines[-3], lines[-2], lines[-1]]
    folders = ["common", "search", "server", "skills", "evaluator", "examples"]
    assert [str(Path(f).parent) for f in mapped] == [str(ROOT / folder) for folder in folders]
