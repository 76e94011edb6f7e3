"""The evaluator end to end: every status, every example task and kernel, task flags."""

import pytest
from conftest import EXAMPLES, HAS_CUDA, example_task, gpu

from adaexplore.evaluator.results import Status, to_json
from adaexplore.evaluator.task import Task, TaskError, check_task_source, load_task_folder

TASKS = ["softmax", "gelu_scale", "rmsnorm", "matmul_bias_relu", "conv_bias_relu", "fused_add_mul"]


def _target(path):
    """The task a broken example targets, named in its first line."""
    head = path.read_text().splitlines()[0]
    return "gelu_scale" if "gelu" in head else "softmax"


@pytest.mark.parametrize("name", TASKS)
def test_honest_kernel_is_correct(evaluator, name):
    task = example_task(name)
    result = evaluator.evaluate(task, (EXAMPLES / "kernels" / f"{name}.py").read_text())
    assert result.status is Status.correct, result.feedback()
    assert result.trials_passed == result.trials == 5
    assert result.triton_launches >= 5
    if HAS_CUDA:
        assert result.timing is not None and result.speedup is not None and result.speedup > 0
    else:
        assert result.timing is None and result.speedup is None
        assert "interpreter" in result.timing_note


BROKEN = {
    "syntax_error": Status.syntax_error,
    "import_error": Status.import_error,
    "no_modelnew": Status.import_error,
    "compile_error": Status.compile_error,
    "runtime_error": Status.runtime_error,
    "wrong_output": Status.wrong_output,
    "nan_output": Status.nan_output,
    "shape_mismatch": Status.shape_mismatch,
    "pure_torch": Status.no_triton_kernel,
}


@pytest.mark.parametrize("name,expected", sorted(BROKEN.items()))
def test_broken_candidate_gets_its_status(evaluator, name, expected):
    path = EXAMPLES / "kernels" / "broken" / f"{name}.py"
    result = evaluator.evaluate(example_task(_target(path)), path.read_text())
    assert result.status is expected, result.feedback()
    text = result.feedback()
    assert len(text) < 1500
    if expected in (Status.syntax_error, Status.compile_error, Status.runtime_error, Status.import_error):
        assert result.error is not None and result.error.message
    if expected in (Status.syntax_error, Status.compile_error, Status.runtime_error) and name != "no_modelnew":
        # The feedback points at the candidate's own line, not a harness frame.
        assert result.error.line is not None and result.error.source_line
    if expected in (Status.wrong_output, Status.nan_output):
        m = result.mismatch
        assert m is not None and m.index and m.max_abs_error > 1e-2


def test_timeout_kills_the_candidate(evaluator):
    path = EXAMPLES / "kernels" / "broken" / "timeout.py"
    result = evaluator.evaluate(example_task("softmax", timeout_s=4), path.read_text())
    assert result.status is Status.timeout
    assert result.elapsed_s < 30


def test_identical_resubmission_is_cached(evaluator):
    task = example_task("gelu_scale")
    source = (EXAMPLES / "kernels" / "gelu_scale.py").read_text()
    first = evaluator.evaluate(task, source)
    again = evaluator.evaluate(task, source + "\n\n")
    assert again == first


def test_the_result_cache_keeps_the_most_recently_used_results(evaluator, monkeypatch):
    import adaexplore.evaluator.pipeline as pipeline

    monkeypatch.setattr(pipeline, "RESULTS_KEPT", 2)
    task = example_task("softmax")
    a, b, c = ("def broken(:\n", "class ModelNew(:\n", "x = = 1\n")  # static failures: no worker runs
    evaluator.evaluate(task, a)
    evaluator.evaluate(task, b)
    evaluator.evaluate(task, a)  # a is used again: b is now the oldest
    evaluator.evaluate(task, c)
    assert evaluator.cached(task, a) is not None and evaluator.cached(task, c) is not None
    assert evaluator.cached(task, b) is None


def test_result_serializes_to_json(evaluator):
    path = EXAMPLES / "kernels" / "broken" / "wrong_output.py"
    result = evaluator.evaluate(example_task("softmax"), path.read_text())
    blob = to_json(result)
    assert b'"status":"wrong_output"' in blob


def test_crash_of_the_warm_parent_is_infra_error_then_recovers(tmp_path):
    import os
    import signal

    from adaexplore.evaluator.evaluator import Evaluator

    ev = Evaluator(work_dir=tmp_path)
    try:
        task = example_task("gelu_scale")
        ev.validate_task(task)
        os.killpg(ev.pool._proc.pid, signal.SIGKILL)
        ev.pool._proc.wait()
        # The next evaluation restarts the warm parent (retry) instead of blaming the kernel.
        result = ev.evaluate(task, (EXAMPLES / "kernels" / "gelu_scale.py").read_text())
        assert result.status is Status.correct, result.feedback()
    finally:
        ev.close()


# --- tasks -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", TASKS)
def test_example_tasks_validate_without_flags(evaluator, name):
    v = evaluator.validate_task(example_task(name))
    assert v.ok and v.flags == [], v
    assert v.output_shapes and v.output_dtypes
    assert (v.reference_timing is not None) == HAS_CUDA


def test_degenerate_task_is_flagged(evaluator):
    v = evaluator.validate_task(example_task("degenerate_zeros"))
    assert v.ok
    assert {"all_zeros"} <= {f.code for f in v.flags} or {"equals_input"} <= {f.code for f in v.flags}


FLAGGED = {
    "random_in_forward": """
import torch, torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return x * torch.rand_like(x)
def get_inputs(): return [torch.randn(64, 64)]
def get_init_inputs(): return []
""",
    "training_dropout": """
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__(); self.drop = nn.Dropout(0.5)
    def forward(self, x):
        return self.drop(x) + 1
def get_inputs(): return [torch.randn(64, 64)]
def get_init_inputs(): return []
""",
    "equals_input": """
import torch, torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(torch.relu(x.abs()))
def get_inputs(): return [torch.rand(64, 64)]
def get_init_inputs(): return []
""",
    "constant_output": """
import torch, torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.ones_like(x) * 3
def get_inputs(): return [torch.randn(64, 64)]
def get_init_inputs(): return []
""",
    "zeros_pass": """
import torch, torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return x * 1e-4
def get_inputs(): return [torch.randn(64, 64)]
def get_init_inputs(): return []
""",
    "mutates_input": """
import torch, torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        x.mul_(2)
        return x + 1
def get_inputs(): return [torch.randn(64, 64)]
def get_init_inputs(): return []
""",
}


@pytest.mark.parametrize("code", sorted(FLAGGED))
def test_task_flags(evaluator, code):
    v = evaluator.validate_task(Task(name=code, source=FLAGGED[code]))
    assert v.ok
    assert code in {f.code for f in v.flags}, v.flags


def test_task_that_fails_to_run_is_not_ok(evaluator):
    source = FLAGGED["constant_output"].replace("torch.ones_like(x) * 3", "x @ torch.ones(3, 3)")
    v = evaluator.validate_task(Task(name="broken", source=source))
    assert not v.ok and v.error is not None and "RuntimeError" in v.error.error_class


def test_task_shape_is_checked_before_running():
    with pytest.raises(TaskError, match="get_init_inputs"):
        check_task_source("class Model: pass\ndef get_inputs(): return []\n")
    with pytest.raises(TaskError, match="does not parse"):
        check_task_source("def (:\n")


def test_task_folder_import(tmp_path):
    (tmp_path / "1_ok.py").write_text(FLAGGED["constant_output"])
    (tmp_path / "2_not_a_task.py").write_text("x = 1\n")
    tasks, skipped = load_task_folder(tmp_path)
    assert [t.name for t in tasks] == ["1_ok"]
    assert "2_not_a_task.py" in skipped
    tasks, _ = load_task_folder(EXAMPLES / "tasks")
    assert len(tasks) >= 7


@gpu
def test_gpu_timing_is_reported_with_reference(evaluator):
    task = example_task("matmul_bias_relu")
    result = evaluator.evaluate(task, (EXAMPLES / "kernels" / "matmul_bias_relu.py").read_text())
    assert result.status is Status.correct
    t = result.timing
    assert t.runs == 90 and t.min_ms <= t.median_ms and t.std_ms >= 0
    assert result.reference_timing is not None
    assert result.speedup == pytest.approx(result.reference_timing.runtime_ms / t.runtime_ms)


CANDIDATES = EXAMPLES.parent / "tests" / "candidates"


def test_error_inside_a_kernel_body_is_a_compile_error_at_the_kernel_line(evaluator):
    source = (CANDIDATES / "kernel_compile_error.py").read_text()
    result = evaluator.evaluate(example_task("gelu_scale"), source)
    assert result.status is Status.compile_error, result.feedback()
    assert "tl.exp(x, 3, 4)" in result.error.source_line


@pytest.mark.skipif(HAS_CUDA, reason="the host memory limit applies to CPU-mode workers")
def test_host_memory_exhaustion_is_oom(evaluator):
    result = evaluator.evaluate(example_task("softmax"), (CANDIDATES / "host_oom.py").read_text())
    assert result.status is Status.oom, result.feedback()


def test_gpu_compile_error_points_at_the_kernel_line():
    """Triton's CompilationError numbers lines within the kernel; feedback gives the file's line."""
    import ast

    from triton.compiler.errors import CompilationError

    from adaexplore.evaluator.worker import harness

    source = (CANDIDATES / "kernel_compile_error.py").read_text()
    kernel_src = source[source.index("def k("):source.index("class ModelNew")]
    call = next(n for n in ast.walk(ast.parse(kernel_src)) if isinstance(n, ast.Call)
                and getattr(n.func, "attr", "") == "exp")
    try:
        raise CompilationError(kernel_src, call, "TypeError('exp() takes 1 positional argument')")
    except CompilationError as exc:
        info = harness.error_info(exc, source)
        status = harness.classify(exc, "run")
    assert "tl.exp(x, 3, 4)" in info["source_line"]
    assert status is Status.compile_error


@pytest.mark.parametrize("message", ["cuDNN error: CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED",
                                     "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"])
def test_a_library_that_cannot_allocate_its_workspace_is_out_of_memory_so_the_job_runs_again_alone(message):
    from adaexplore.evaluator.worker import harness

    assert harness.classify(RuntimeError(message), "run") is Status.oom
    assert harness.classify(RuntimeError("cuDNN error: CUDNN_STATUS_BAD_PARAM"), "run") is not Status.oom
