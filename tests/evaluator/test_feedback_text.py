"""The words of a result's feedback: excerpts cut at line boundaries, and the hints added after a run for
failures Triton reports without a fix (a block that is not a power of two, a moved libdevice, a bfloat16
tl.dot under the interpreter)."""

import importlib.util
import os
import sys

import pytest
import torch

from adaexplore.evaluator.lint import runtime_hint
from adaexplore.evaluator.lint.hints import INTERPRETER_BF16_DOT
from adaexplore.evaluator.results import ErrorInfo, EvalResult, Status, first_lines, last_lines

INTERPRET = os.environ.get("TRITON_INTERPRET", "") not in ("", "0")
WARNING = ("/opt/lib/python3.11/site-packages/triton/runtime/interpreter.py:725: RuntimeWarning: overflow "
           "encountered in cast\n  return TensorHandle(np.matmul(a_data, b_data, dtype=d.data.dtype) + d.data)\n")


def test_an_output_excerpt_starts_at_a_line_and_keeps_the_last_lines_that_fit():
    text = WARNING * 5 + "last words\n"
    excerpt = last_lines(text, 300)
    assert excerpt.endswith("last words")
    assert all(line in WARNING.splitlines() + ["last words"] for line in excerpt.splitlines())


def test_a_last_line_too_long_on_its_own_keeps_its_beginning():
    assert last_lines("x" * 500, 40) == "x" * 37 + "..."


def test_a_long_feedback_is_cut_between_lines():
    result = EvalResult(status=Status.runtime_error, error=ErrorInfo(error_class="RuntimeError", message="boom"),
                        stdout_tail="\n".join(f"line {k} of what the kernel printed" for k in range(40)))
    text = result.feedback(max_chars=120)
    assert len(text) <= 120 and text.endswith("\n...")
    assert all(ln == "..." or ln.startswith(("status:", "RuntimeError:", "output: line", "line "))
               for ln in text.splitlines())
    assert first_lines("short", 120) == "short"


def failure(status: Status, message: str) -> EvalResult:
    return EvalResult(status=status, error=ErrorInfo(error_class="InterpreterError", message=message))


def test_a_block_that_is_not_a_power_of_two_gets_the_power_of_two_that_fits_it():
    msg = "ValueError(\"arange's range must be a power of 2\") (here tl.arange(0, 48): a range of 48)"
    hint = runtime_hint(failure(Status.compile_error, msg), "", "", interpreted=True)
    assert hint is not None and "64 for a range of 48" in hint and "mask" in hint
    bare = runtime_hint(failure(Status.compile_error, "arange's range must be a power of 2"), "", "", True)
    assert bare is not None and "triton.next_power_of_2" in bare


DOT = "acc += tl.dot(a.to(tl.{dtype}), b.to(tl.{dtype}))"


def test_a_wrong_output_with_a_bfloat16_dot_under_the_interpreter_blames_the_interpreter():
    wrong = failure(Status.wrong_output, "output 0 differs from the reference")
    assert runtime_hint(wrong, DOT.format(dtype="bfloat16"), "", interpreted=True) == INTERPRETER_BF16_DOT
    # bfloat16 inputs of the task count too
    assert runtime_hint(wrong, "acc += tl.dot(a, b)", "torch.randn(16, 16, dtype=torch.bfloat16)", True)


def test_the_interpreter_note_is_given_only_for_bfloat16_dots_that_went_wrong_under_the_interpreter():
    wrong = failure(Status.wrong_output, "output 0 differs from the reference")
    assert runtime_hint(wrong, DOT.format(dtype="bfloat16"), "", interpreted=False) is None  # a GPU
    assert runtime_hint(wrong, DOT.format(dtype="float16"), "", interpreted=True) is None
    crashed = failure(Status.runtime_error, "boom")
    assert runtime_hint(crashed, DOT.format(dtype="bfloat16"), "", interpreted=True) is None


DOT_KERNEL = """
import triton
import triton.language as tl

@triton.jit
def k(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    idx = i[:, None] * N + i[None, :]
    tl.store(c_ptr + idx, tl.dot(tl.load(a_ptr + idx), tl.load(b_ptr + idx)))
"""


@pytest.mark.skipif(not INTERPRET, reason="a fact of Triton's interpreter")
def test_the_interpreter_multiplies_bfloat16_dot_operands_wrongly_as_the_note_says(tmp_path):
    """If a Triton release fixes this, the note (and INTERPRETER in server/core/texts.py) must go."""
    path = tmp_path / "bf16_dot.py"
    path.write_text(DOT_KERNEL)
    spec = importlib.util.spec_from_file_location("bf16_dot", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bf16_dot"] = mod
    spec.loader.exec_module(mod)
    torch.manual_seed(0)
    errors = {}
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        a, b = torch.randn(16, 16, dtype=dtype), torch.randn(16, 16, dtype=dtype)
        c = torch.empty(16, 16)
        mod.k[(1,)](a, b, c, 16)
        errors[dtype] = (c - a.float() @ b.float()).abs().max().item()
    assert errors[torch.bfloat16] > 1e6
    assert errors[torch.float16] < 1e-2 and errors[torch.float32] < 1e-3
