"""profile_kernel: the evaluator's profile of a correct node, and the Triton share in best_candidates."""

import pytest
from conftest import HAS_CUDA
from server_support import EXAMPLES, SOFTMAX, compile_error_kernel, variant

from adaexplore.server.core.config import ServerConfig
from adaexplore.server.core.errors import InvalidRequest, NotFound
from adaexplore.server.face.app import build_server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    _, svc = build_server(ServerConfig(data_dir=tmp_path_factory.mktemp("data"), wait_limit_s=120, seed=0))
    reg = svc.tasks.register_task(source=SOFTMAX, path=None, name="softmax", search=None, protocol=None, caller="t")
    ids = {}
    for key, src in (("good", variant("04")), ("bad", compile_error_kernel("p"))):
        node_id, job, _ = svc.search.submit(task_id=reg.task_id, source=src, edits=None, parent_node_id=None,
                                     expansion_id=None, caller="t")
        job.result(timeout=300)
        ids[key] = node_id
    yield svc, reg.task_id, ids
    svc.close()


@pytest.mark.skipif(HAS_CUDA, reason="what a CPU server reports")
def test_without_a_gpu_the_profile_gives_the_floor_and_says_why_the_rest_is_missing(server):
    svc, _, ids = server
    p = svc.search.profile(ids["good"])
    assert p.device == "cpu" and not p.profiled
    assert p.floor_bytes and p.floor_bytes > 0
    assert "needs a CUDA device" in p.summary
    assert p.kernels == [] and p.triton_share is None


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
def test_on_a_gpu_the_per_kernel_times_add_up_and_the_share_is_kept(server):
    svc, tid, ids = server
    p = svc.search.profile(ids["good"])
    assert p.profiled and p.kernels and p.triton_share is not None and p.triton_share > 0.5
    assert sum(k.ms_per_run for k in p.kernels) == pytest.approx(p.device_ms_per_run, rel=0.05)
    best = svc.tasks.best_candidates(tid, 5, False).candidates
    assert next(c for c in best if c.node_id == ids["good"]).triton_share == p.triton_share


def test_only_a_correct_node_can_be_profiled_and_the_error_says_what_to_do(server):
    svc, _, ids = server
    with pytest.raises(InvalidRequest, match="only a correct kernel can be profiled; pick one from best_candidates"):
        svc.search.profile(ids["bad"])
    with pytest.raises(NotFound, match="unknown node_id"):
        svc.search.profile("nope-1")


@pytest.mark.skipif(HAS_CUDA, reason="a GPU server profiles correct kernels, so the share is known at once")
def test_a_cpu_server_shows_no_triton_share(server):
    svc, tid, _ = server
    assert all(c.triton_share is None for c in svc.tasks.best_candidates(tid, 5, False).candidates)


def test_best_candidates_show_the_triton_share_once_known(server):
    svc, tid, ids = server
    svc.store.save_profile(ids["good"], "cuda:0", 0.93, {"note": "as a GPU profile would leave it"})
    shares = {c.node_id: c.triton_share for c in svc.tasks.best_candidates(tid, 5, False).candidates}
    assert shares[ids["good"]] == 0.93


class GpuLike:
    """The real (CPU) evaluator, presented as a GPU one whose profile reports a breakdown."""

    def __init__(self, inner):
        self.inner = inner
        self.device = "cuda:0"
        self.is_gpu = True
        self.profiled = []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def profile(self, task, source, protocol=None, device=None):
        from adaexplore.evaluator.profile.report import KernelTime, ProfileReport

        self.profiled.append(source)
        return ProfileReport(device="cuda:0", profiled=True, profiled_runs=10, candidate_ms=1.0,
                             device_ms_per_run=1.0, triton_share=0.9,
                             kernels=[KernelTime(name="softmax_kernel", calls=10, total_ms=9.0, ms_per_run=0.9,
                                                 share=0.9, triton=True)],
                             summary="0.9 ms of 1 ms per forward in Triton kernels (90%)\nmore")


def test_on_a_gpu_every_correct_kernel_is_profiled_and_small_steps_see_the_parents_profile(tmp_path):
    from adaexplore.evaluator.evaluator import Evaluator
    from adaexplore.server.core.tool_models import SearchOverrides

    inner = Evaluator(work_dir=str(tmp_path / "ev"))
    fake = GpuLike(inner)
    _, svc = build_server(ServerConfig(data_dir=tmp_path / "data", wait_limit_s=120, seed=0), evaluator=fake)
    try:
        reg = svc.tasks.register_task(source=SOFTMAX, path=None, name="softmax", protocol=None, caller="t",
                                search=SearchOverrides(p_large=0.0, c_expand=0.0))
        node_id, job, _ = svc.search.submit(task_id=reg.task_id, source=variant("04"), edits=None, parent_node_id=None,
                                     expansion_id=None, caller="t")
        job.result(timeout=300)
        node = svc.tasks.get_node(node_id, include_code=False)
        assert node.status == "correct" and fake.profiled == [variant("04")]
        assert "profile: 0.9 ms of 1 ms per forward in Triton kernels (90%)" in node.feedback
        assert svc.tasks.best_candidates(reg.task_id, 1, False).candidates[0].triton_share == 0.9
        exp = svc.search.expand(reg.task_id, "t")
        assert exp.action == "small" and exp.parent.node_id == node_id
        assert exp.parent_profile and exp.parent_profile.startswith("0.9 ms of 1 ms")
    finally:
        svc.close()
        inner.close()


def test_a_nan_output_gets_a_hint_about_its_usual_causes(server):
    svc, tid, _ = server
    nan = (EXAMPLES / "kernels" / "broken" / "nan_output.py").read_text()
    node_id, job, _ = svc.search.submit(task_id=tid, source=nan, edits=None, parent_node_id=None, expansion_id=None,
                                 caller="t")
    job.result(timeout=300)
    node = svc.tasks.get_node(node_id, include_code=False)
    assert node.status == "nan_output"
    assert "hint: NaN usually comes from" in node.feedback and "masked lanes" in node.feedback
