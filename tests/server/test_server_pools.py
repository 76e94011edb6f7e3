"""The server evaluates through one pool per visible GPU (one CPU pool without a GPU)."""

from conftest import HAS_CUDA

from adaexplore.evaluator.fleet import EvaluatorFleet
from adaexplore.server.core.config import ServerConfig
from adaexplore.server.core.evaluation import EvaluatorHolder


def test_server_uses_a_pool_per_device(tmp_path):
    holder = EvaluatorHolder(ServerConfig(data_dir=tmp_path))
    try:
        fleet = holder.get()
        assert isinstance(fleet, EvaluatorFleet)
        if HAS_CUDA:
            import torch

            assert fleet.devices == [f"cuda:{i}" for i in range(torch.cuda.device_count())]
        else:
            assert fleet.devices == ["cpu"] and holder.device == "cpu"
    finally:
        holder.close()


def test_device_flag_names_the_one_pool(tmp_path):
    holder = EvaluatorHolder(ServerConfig(data_dir=tmp_path, device="cpu"))
    try:
        assert holder.get().devices == ["cpu"]
    finally:
        holder.close()


def test_verdicts_wait_for_torch_compile_only_when_the_server_is_told_to(tmp_path, monkeypatch):
    holder = EvaluatorHolder(ServerConfig(data_dir=tmp_path / "default", device="cpu"))
    try:
        assert [m.runner.wait_for_compile for m in holder.get().members] == [False]
    finally:
        holder.close()
    monkeypatch.setenv("ADAEXPLORE_WAIT_FOR_COMPILE", "1")  # how `adaexplore bench` starts its servers
    holder = EvaluatorHolder(ServerConfig(data_dir=tmp_path / "bench", device="cpu"))
    try:
        assert [m.runner.wait_for_compile for m in holder.get().members] == [True]
    finally:
        holder.close()
