"""A bench against an endpoint it cannot use stops at once, with a clear error, before any server starts."""

import socket
from pathlib import Path

from adaexplore.server.bench.replay import ReplayEndpoint
from adaexplore.server.face.cli import main

REPLAY = Path(__file__).resolve().parent / "replay"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"


def bench(run_dir, *extra):
    return main(["bench", "--problems", str(EXAMPLES), "--tasks", "7", "--steps", "2", "--run-dir", str(run_dir),
                 "--no-progress", *extra])


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket is closed


def test_an_unreachable_endpoint_is_an_error_before_any_gpu_work(tmp_path, capsys):
    rc = bench(tmp_path / "run", "--base-url", f"http://127.0.0.1:{closed_port()}/v1", "--model", "m",
               "--api-key", "k")
    assert rc == 2
    assert "cannot reach the endpoint" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # no server was started, nothing was written


def test_a_refused_key_is_an_error_that_names_the_key(tmp_path, capsys):
    with ReplayEndpoint(REPLAY, api_key="the-right-key") as ep:
        rc = bench(tmp_path / "run", "--base-url", ep.base_url, "--model", "replay", "--api-key", "a-wrong-key")
        assert ep.requests == 0  # refused at the door
    assert rc == 2
    assert "refused the API key" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_missing_model_or_key_is_an_error_that_says_which_flag_to_pass(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    monkeypatch.delenv("ADAEXPLORE_BENCH_MODEL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert bench(tmp_path / "run", "--api-key", "k") == 2
    assert "--model" in capsys.readouterr().err
    assert bench(tmp_path / "run", "--model", "m") == 2
    assert "--api-key" in capsys.readouterr().err
