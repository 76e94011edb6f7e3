"""Every replacement hint the static checks give is run against the installed Triton in each mode the
server can run in: the interpreter (TRITON_INTERPRET=1, no GPU) and, where there is one, compiled on a GPU.
A hint that fails where it is given fails here."""

import importlib.util
import math
import os
import sys

import pytest
import torch
from conftest import HAS_CUDA

from adaexplore.evaluator import lint
from adaexplore.evaluator.lint import names
from adaexplore.evaluator.lint.names import KNOWN_REPLACEMENTS, LIBDEVICE_IN_INTERPRETER, Replacement
from adaexplore.evaluator.results import EvalResult

INTERPRET = os.environ.get("TRITON_INTERPRET", "") not in ("", "0")
MODES = [
    pytest.param("interpreter", marks=pytest.mark.skipif(not INTERPRET, reason="this process compiles for a GPU")),
    pytest.param("gpu", marks=pytest.mark.skipif(INTERPRET or not HAS_CUDA, reason="needs a GPU, compiled")),
]

F = torch.nn.functional
REFERENCE = {  # what each replaced name means, in PyTorch; x, y in [0.1, 1.1)
    "relu": lambda x, y: torch.relu(x),
    "tanh": lambda x, y: torch.tanh(x),
    "gelu": lambda x, y: F.gelu(x),
    "pow": lambda x, y: x ** y,
    "float": lambda x, y: x.float(),
    "int": lambda x, y: x.to(torch.int32).float(),
    "bool": lambda x, y: (x != 0).float(),
    "half": lambda x, y: x.half().float(),
    "double": lambda x, y: x.double().float(),
    "mean": lambda x, y: x.mean().expand_as(x),
    "exp10": lambda x, y: 10 ** x,
    "log10": lambda x, y: torch.log10(x),
    "abs_": lambda x, y: x.abs(),
    "select": lambda x, y: torch.where(x > y, x, y),
    "masked_fill": lambda x, y: x.masked_fill(x > y, 0.0),
    "matmul": lambda a, b: a @ b,
    "transpose": lambda a, b: a.T,
    "concat": lambda x, y: torch.stack([x, y], -1),
    # libdevice functions, replaced under the interpreter
    "log1p": lambda x, y: torch.log1p(x),
    "expm1": lambda x, y: torch.expm1(x),
    "fast_expf": lambda x, y: torch.exp(x),
    "fast_logf": lambda x, y: torch.log(x),
    "isnan": lambda x, y: torch.isnan(x).float(),
    "erf": lambda x, y: torch.erf(x),
    "exp": lambda x, y: torch.exp(x),
    "sqrt": lambda x, y: torch.sqrt(x),
    "rsqrt": lambda x, y: torch.rsqrt(x),
    "floor": lambda x, y: torch.floor(x),
    "log": lambda x, y: torch.log(x),
    "sin": lambda x, y: torch.sin(x),
    "cos": lambda x, y: torch.cos(x),
    "abs": lambda x, y: x.abs(),
    "sigmoid": lambda x, y: torch.sigmoid(x),
}

KERNEL_1D = """
import triton
import triton.language as tl
from triton.language.extra import libdevice

@triton.jit
def k(x_ptr, y_ptr, o_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    r = ({expr}).to(tl.float32)
    {store}
"""
STORE_1D = "tl.store(o_ptr + offs + tl.zeros([N], tl.int32), r + tl.zeros([N], tl.float32))"
STORE_JOIN = "tl.store(o_ptr + offs[:, None] * 2 + tl.arange(0, 2)[None, :], r)"
KERNEL_2D = """
import triton
import triton.language as tl

@triton.jit
def k(a_ptr, b_ptr, o_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    idx = i[:, None] * N + i[None, :]
    a = tl.load(a_ptr + idx)
    b = tl.load(b_ptr + idx)
    r = ({expr}).to(tl.float32)
    tl.store(o_ptr + idx, r)
"""


def run_expr(tmp_path, name: str, r: Replacement, expr: str, device: str) -> None:
    n = 16
    if r.two_d:
        src = KERNEL_2D.format(expr=expr)
        x, y = torch.rand(n, n, device=device), torch.rand(n, n, device=device)
    else:
        src = KERNEL_1D.format(expr=expr, store=STORE_JOIN if name == "concat" else STORE_1D)
        x, y = torch.rand(n, device=device) + 0.1, torch.rand(n, device=device) + 0.1
    path = tmp_path / f"hint_{name}_{abs(hash(expr))}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod
    spec.loader.exec_module(mod)
    want = REFERENCE[name](x, y).float().contiguous()
    out = torch.empty_like(want)
    mod.k[(1,)](x, y, out, n)
    tol = 2e-2 if name == "matmul" else 1e-3
    assert torch.allclose(out, want, atol=tol, rtol=tol), (name, expr, out, want)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(KNOWN_REPLACEMENTS))
def test_the_hint_for_a_missing_tl_name_runs_and_computes_what_the_name_means(tmp_path, name, mode):
    r = KNOWN_REPLACEMENTS[name]
    run_expr(tmp_path, name, r, r.expr, "cpu" if mode == "interpreter" else "cuda")
    if mode == "gpu" and r.gpu_expr:
        run_expr(tmp_path, name, r, r.gpu_expr, "cuda")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(LIBDEVICE_IN_INTERPRETER))
def test_the_interpreter_replacement_for_a_libdevice_function_runs(tmp_path, name, mode):
    r = LIBDEVICE_IN_INTERPRETER[name]
    run_expr(tmp_path, name, r, r.expr, "cpu" if mode == "interpreter" else "cuda")


def test_no_hint_given_to_the_interpreter_proposes_libdevice():
    for name, r in {**KNOWN_REPLACEMENTS, **LIBDEVICE_IN_INTERPRETER}.items():
        assert "libdevice" not in r.hint(interpret=True), name


def test_on_a_gpu_the_tanh_hint_offers_libdevice_first():
    assert KNOWN_REPLACEMENTS["tanh"].hint(interpret=False).startswith("use libdevice.tanh(x)")


def feedback(src: str) -> str:
    s = lint.check_candidate(src)
    return EvalResult(status=s.status, error=s.error, lint=s.issues).feedback()


ONE_CALL = """import torch, triton
import triton.language as tl
from triton.language.extra import libdevice

@triton.jit
def k(x_ptr, N: tl.constexpr):
    o = tl.arange(0, N)
    x = tl.load(x_ptr + o)
    tl.store(x_ptr + o, {call}(x))

class ModelNew(torch.nn.Module):
    def forward(self, x):
        k[(1,)](x, x.numel())
        return x
"""


def test_tl_tanh_gets_the_idiom_that_works_here_and_no_look_alike_names(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    text = feedback(ONE_CALL.format(call="tl.tanh"))
    assert "2 * tl.sigmoid(2 * x) - 1" in text
    assert "closest names" not in text and "tl.trans" not in text and "libdevice" not in text


def test_libdevice_in_the_interpreter_is_reported_with_its_cause_before_it_runs(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    s = lint.check_candidate(ONE_CALL.format(call="libdevice.tanh"))
    assert s.status is not None and s.status.value == "compile_error"
    assert "does not run in Triton's interpreter" in s.error.message
    assert s.error.hint == "use 2 * tl.sigmoid(2 * x) - 1"


def test_libdevice_on_a_gpu_is_not_flagged(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    s = lint.check_candidate(ONE_CALL.format(call="libdevice.tanh"))
    assert s.status is None, s.error


def test_one_message_per_problem_a_lint_error_is_not_repeated_as_a_lint_line(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    text = feedback(ONE_CALL.format(call="tl.tanh"))
    assert text.count("tl.tanh does not exist") == 1, text
    assert "lint line" not in text


def test_interpreting_follows_the_environment_and_else_the_device(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert names.interpreting()
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert not names.interpreting()
    monkeypatch.delenv("TRITON_INTERPRET")
    assert names.interpreting() is (not torch.cuda.is_available())
    assert math.isfinite(1.0)


def test_a_nan_output_from_an_uninitialized_buffer_gets_a_hint_naming_torch_empty():
    from adaexplore.evaluator.lint import nan_hint

    assert "torch.zeros" in nan_hint("acc = torch.empty(n, device=x.device)\nk[grid](x, acc)")
    assert "torch.empty" not in nan_hint("acc = torch.zeros(n)") and "other" in nan_hint("acc = torch.zeros(n)")


def lint_hint(call: str) -> str:
    s = lint.check_candidate(ONE_CALL.format(call=call))
    assert s.status is not None and s.error is not None, call
    return s.error.hint or ""


@pytest.mark.parametrize("interpret", ["1", "0"])
def test_every_missing_api_the_lint_knows_gets_a_hint_that_names_its_replacement(monkeypatch, interpret):
    monkeypatch.setenv("TRITON_INTERPRET", interpret)
    on_gpu = interpret == "0"
    for name, r in KNOWN_REPLACEMENTS.items():
        if hasattr(names._tl, name):
            continue  # the installed Triton has it
        for call in (f"tl.{name}", f"tl.math.{name}"):
            assert lint_hint(call) == r.hint(interpret=not on_gpu), call
    for name in LIBDEVICE_IN_INTERPRETER:
        hint = lint_hint(f"tl.libdevice.{name}")
        assert "does not exist" not in hint, (name, hint)
        if on_gpu:
            assert hint.startswith(f"use libdevice.{name}(x) after `from triton.language.extra import libdevice`")
        else:
            assert hint.startswith(names.libdevice_hint(name)), (name, hint)


def test_tl_libdevice_rsqrt_names_tl_rsqrt_and_where_libdevice_went(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert lint_hint("tl.libdevice.rsqrt").startswith("use tl.rsqrt(x): tl.libdevice moved to "
                                                      "triton.language.extra.libdevice")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert lint_hint("tl.libdevice.rsqrt") == ("use libdevice.rsqrt(x) after `from triton.language.extra import "
                                               "libdevice` (tl.libdevice moved to triton.language.extra.libdevice); "
                                               "or tl.rsqrt(x)")


def test_an_unknown_name_without_a_replacement_gets_advice_not_the_error_again(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    s = lint.check_candidate(ONE_CALL.format(call="tl.zzqqxx"))
    assert s.error is not None and s.error.hint and "does not exist" not in s.error.hint
    assert feedback(ONE_CALL.format(call="tl.zzqqxx")).count("does not exist") == 1
