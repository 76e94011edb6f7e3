"""Tests of the static candidate checks (evaluator.lint). CPU only, no kernel is ever run."""

from __future__ import annotations

import glob
import os
import textwrap

import pytest

from adaexplore.evaluator.lint import StaticReport, check_candidate, is_error
from adaexplore.evaluator.results import Status

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository

HEADER = """\
import torch
import torch.nn as nn
import triton
import triton.language as tl
"""

MODEL_NEW = """

class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        kernel[(1,)](x, out, x.numel(), BLOCK=1024)
        return out
"""

ELEMENTWISE = HEADER + '''

@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    y = tl.load(y_ptr + offsets, mask=mask, other=0.0)
    z = tl.maximum(x + y, 0.0).to(tl.float32)
    tl.store(out_ptr + offsets, z, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        out = torch.empty_like(x)
        n = out.numel()
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
        add_relu_kernel[grid](x, y, out, n, BLOCK_SIZE=1024)
        return out
'''

SOFTMAX = '''
import math
import torch
import torch.nn as nn
import triton
from triton import language as language


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK: language.constexpr):
    row = language.program_id(0)
    cols = language.arange(0, BLOCK)
    mask = cols < n_cols
    x = language.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - language.max(x, axis=0)
    num = language.exp(x)
    den = language.sum(num, axis=0)
    scale = math.log2(BLOCK) * 0 + 1.0
    language.store(out_ptr + row * out_row_stride + cols, num / den * scale, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        block = triton.next_power_of_2(n_cols)
        softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK=block,
                                  num_warps=4)
        return out
'''

MATMUL = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def _act(x, ACT: tl.constexpr):
    if ACT == "tanh":
        x = libdevice.tanh(x)
    return x


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32}, num_stages=3, num_warps=8),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, num_stages=4, num_warps=4),
    ],
    key=["M", "N", "K"],
)
@triton.jit
def matmul_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  ACT: tl.constexpr = "none"):
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_rem = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_rem), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_rem) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)
    acc = acc + bias[None, :]
    acc = tl.where(acc > 0, acc, 0.0)
    acc = _act(acc, ACT)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(tl.float16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_features, out_features))
        self.bias = nn.Parameter(torch.randn(out_features))

    def forward(self, a):
        M, K = a.shape
        N = self.weight.shape[1]
        c = torch.empty((M, N), device=a.device, dtype=torch.float16)
        grid = lambda META: (triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"]),)
        matmul_kernel[grid](a, self.weight, self.bias, c, M, N, K,
                            a.stride(0), a.stride(1), self.weight.stride(0), self.weight.stride(1),
                            c.stride(0), c.stride(1))
        return c
'''

LAYERNORM = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton import jit

EPS = tl.constexpr(1e-5)


@jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, stride, N, BLOCK: tl.constexpr, HAS_BIAS: tl.constexpr):
    row = tl.program_id(0)
    mean = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        a = tl.load(x_ptr + row * stride + cols, mask=cols < N, other=0.0).to(tl.float32)
        mean += a
    mean = tl.sum(mean, axis=0) / N
    var = tl.zeros([BLOCK], dtype=tl.float32)
    for off in tl.static_range(0, 4 * BLOCK, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        a = tl.load(x_ptr + row * stride + cols, mask=cols < N, other=0.0).to(tl.float32)
        a = tl.where(cols < N, a - mean, 0.0)
        var += a * a
    rstd = 1 / tl.sqrt(tl.sum(var, axis=0) / N + EPS)
    cols = tl.arange(0, BLOCK)
    w = tl.load(w_ptr + cols, mask=cols < N)
    y = tl.load(x_ptr + row * stride + cols, mask=cols < N) * rstd * w
    if HAS_BIAS:
        y += tl.load(b_ptr + cols, mask=cols < N)
    tl.store(y_ptr + row * stride + cols, y, mask=cols < N)


class ModelNew(nn.Module):
    def forward(self, x, w, b):
        y = torch.empty_like(x)
        layernorm_kernel[(x.shape[0],)](x, w, b, y, x.stride(0), x.shape[1], BLOCK=1024, HAS_BIAS=True)
        return y
'''

HONEST = {"elementwise": ELEMENTWISE, "softmax": SOFTMAX, "matmul": MATMUL, "layernorm": LAYERNORM}


def errors(report: StaticReport):
    return [i for i in report.issues if is_error(i)]


def kernel_src(body: str, params: str = "x_ptr, out_ptr, n, BLOCK: tl.constexpr", extra: str = "") -> str:
    """A candidate whose single kernel has the given body (indented by the helper)."""
    return (HEADER + extra + "\n\n@triton.jit\ndef kernel(" + params + "):\n"
            + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n" + MODEL_NEW)


def line_of(source: str, needle: str) -> int:
    for i, line in enumerate(source.splitlines(), start=1):
        if needle in line:
            return i
    raise AssertionError(f"{needle!r} not in source")


def find(report: StaticReport, construct: str):
    hits = [i for i in report.issues if i.construct == construct]
    assert hits, f"no issue with construct {construct!r}; got {report.issues}"
    return hits[0]


# ---------------------------------------------------------------------------- honest kernels


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_kernels_have_no_errors(name):
    report = check_candidate(HONEST[name])
    assert report.status is None, report
    assert report.error is None
    assert errors(report) == [], report.issues
    assert report.ok


EXAMPLE_KERNELS = sorted(glob.glob(os.path.join(ROOT, "examples", "kernels", "*.py")))


@pytest.mark.parametrize("path", EXAMPLE_KERNELS, ids=[os.path.basename(p) for p in EXAMPLE_KERNELS])
def test_example_kernels_have_no_errors(path):
    with open(path) as fh:
        report = check_candidate(fh.read())
    assert report.status is None, (path, report)
    assert errors(report) == [], report.issues


def test_broken_examples_do_not_crash(capsys):
    paths = sorted(glob.glob(os.path.join(ROOT, "examples", "kernels", "broken", "*.py")))
    for path in paths:
        with open(path) as fh:
            report = check_candidate(fh.read())
        assert isinstance(report, StaticReport)
        with capsys.disabled():
            status = report.status.value if report.status else "ok"
            print(f"\n{os.path.basename(path)}: {status}"
                  + (f" - {report.error.message} (line {report.error.line})" if report.error else ""))


# ---------------------------------------------------------------------------- syntax and ModelNew


def test_syntax_error_reports_line_and_source():
    src = HEADER + "\n@triton.jit\ndef k(x_ptr)\n    pass\n"
    report = check_candidate(src)
    assert report.status is Status.syntax_error
    assert report.error.line == line_of(src, "def k(x_ptr)")
    assert "def k(x_ptr)" in report.error.source_line
    assert report.error.error_class == "SyntaxError"


def test_compile_time_syntax_error_is_caught():
    report = check_candidate("return 1\nclass ModelNew: pass\n")
    assert report.status is Status.syntax_error
    assert report.error.line == 1


def test_syntax_beats_everything():
    report = check_candidate("x = tl.float32(1)\ndef (:\n")
    assert report.status is Status.syntax_error


def test_missing_model_new():
    src = HEADER + "\nclass Model(nn.Module):\n    pass\n"
    report = check_candidate(src)
    assert report.status is Status.import_error
    assert report.error.message == "candidate defines no class ModelNew"
    assert report.error.hint
    assert find(report, "ModelNew")


def test_missing_model_new_beats_lint_errors():
    src = kernel_src("x = tl.float32(1.0)").replace("class ModelNew", "class Other")
    report = check_candidate(src)
    assert report.status is Status.import_error
    assert find(report, "tl.float32(")  # the lint finding is still listed


@pytest.mark.parametrize("definition", [
    "ModelNew = Model",
    "from somewhere_else import *",
    "try:\n    class ModelNew(nn.Module):\n        pass\nexcept Exception:\n    pass",
    "if True:\n    ModelNew: type = Model",
])
def test_model_new_defined_other_ways(definition):
    src = "import torch.nn as nn\nclass Model(nn.Module):\n    pass\n" + definition + "\n"
    report = check_candidate(src)
    assert report.status is not Status.import_error or "ModelNew" not in (report.error.message or "")


def test_model_new_inside_function_does_not_count():
    src = "import torch.nn as nn\ndef make():\n    class ModelNew(nn.Module):\n        pass\n"
    assert check_candidate(src).status is Status.import_error


def test_missing_module_is_import_error():
    src = HEADER + "import surely_not_a_real_module_xyz\n" + MODEL_NEW.replace("kernel[(1,)](x, out, x.numel(), BLOCK=1024)", "pass")
    report = check_candidate(src)
    assert report.status is Status.import_error
    assert report.error.line == line_of(src, "surely_not_a_real_module_xyz")


def test_missing_module_in_try_is_fine():
    src = "try:\n    import surely_not_a_real_module_xyz\nexcept ImportError:\n    pass\nclass ModelNew: pass\n"
    assert check_candidate(src).status is None


# ---------------------------------------------------------------------------- tl.* names


def test_unknown_tl_name_with_hint():
    src = kernel_src("""
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        tl.store(out_ptr + offs, tl.relu(x))
    """)
    report = check_candidate(src)
    assert report.status is Status.compile_error
    issue = find(report, "tl.relu")
    assert issue.line == line_of(src, "tl.relu")
    assert "tl.maximum" in issue.message
    assert report.error.line == issue.line
    assert "tl.relu" in report.error.source_line
    assert report.error.hint


def test_tl_float_suggests_close_names():
    src = kernel_src("y = tl.zeros((BLOCK,), dtype=tl.float)")
    report = check_candidate(src)
    issue = find(report, "tl.float")
    assert "tl.float32" in issue.message
    assert report.status is Status.compile_error


def test_tanh_matches_installed_triton():
    import triton.language as tl

    src = kernel_src("y = tl.tanh(tl.load(x_ptr))")
    report = check_candidate(src)
    if hasattr(tl, "tanh"):
        assert report.status is None
    else:
        assert report.status is Status.compile_error
        # the idiom that runs in every mode; libdevice is offered only when compiling for a GPU
        assert "2 * tl.sigmoid(2 * x) - 1" in find(report, "tl.tanh").message


def test_submodule_chains_are_resolved():
    import triton.language as tl

    src = kernel_src("y = tl.math.tanh(tl.load(x_ptr))\nz = tl.math.exp(y)")
    report = check_candidate(src)
    if hasattr(tl.math, "tanh"):
        assert errors(report) == []
    else:
        assert find(report, "tl.math.tanh").line == line_of(src, "tl.math.tanh")
        assert all(i.construct != "tl.math.exp" for i in report.issues)


def test_libdevice_alias_checked():
    src = kernel_src("y = libdevice.tanhh(tl.load(x_ptr))",
                     extra="from triton.language.extra import libdevice\n")
    report = check_candidate(src)
    assert report.status is Status.compile_error
    assert "tanh" in report.error.hint


@pytest.mark.parametrize("imp, alias", [
    ("import triton.language as tl", "tl"),
    ("import triton.language as language", "language"),
    ("from triton import language as tl", "tl"),
    ("from triton import language as T", "T"),
    ("import triton.language", "triton.language"),
])
def test_aliases(imp, alias):
    src = (f"import torch\nimport torch.nn as nn\nimport triton\n{imp}\n\n@triton.jit\n"
           f"def kernel(x_ptr, BLOCK: {alias}.constexpr):\n"
           f"    x = {alias}.load(x_ptr + {alias}.arange(0, BLOCK))\n"
           f"    y = {alias}.relu(x)\n" + MODEL_NEW)
    report = check_candidate(src)
    assert report.status is Status.compile_error
    issue = find(report, "tl.relu")  # canonical text, whatever the alias
    assert issue.line == line_of(src, ".relu(")


def test_methods_on_tensors_are_not_checked():
    src = kernel_src("x = tl.load(x_ptr)\ny = x.relu()\nz = x.to(tl.float16)")
    assert all(i.construct != "tl.relu" for i in check_candidate(src).issues)


def test_unknown_triton_top_level_name():
    src = HEADER + "\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return triton.cdvi(4, 2)\n"
    report = check_candidate(src)
    # inside an ordinary method: fails only if it runs, so a warning
    issue = find(report, "triton.cdvi")
    assert not is_error(issue)
    assert "triton.cdiv" in issue.message
    assert report.status is None


def test_unknown_name_at_module_level_is_import_error():
    src = HEADER + "ACT = tl.gelu\n" + MODEL_NEW
    report = check_candidate(src)
    assert report.status is Status.import_error
    assert report.error.line == line_of(src, "tl.gelu")


def test_hasattr_probe_and_try_are_not_flagged():
    src = HEADER + "try:\n    TANH = tl.tanh\nexcept AttributeError:\n    TANH = None\n" + kernel_src(
        "if hasattr(tl, 'tanh'):\n    y = tl.tanh(tl.load(x_ptr))").replace(HEADER, "")
    assert errors(check_candidate(src)) == []


def test_from_import_of_missing_name():
    src = "import torch.nn as nn\nfrom triton.language import relu\nclass ModelNew(nn.Module): pass\n"
    report = check_candidate(src)
    assert report.status is Status.import_error
    assert report.error.line == 2


# ---------------------------------------------------------------------------- dtypes as functions


@pytest.mark.parametrize("dtype", ["float32", "int32", "float16", "bfloat16"])
def test_dtype_called_as_function(dtype):
    src = kernel_src(f"x = tl.load(x_ptr)\ny = tl.{dtype}(x)")
    report = check_candidate(src)
    assert report.status is Status.compile_error
    issue = find(report, f"tl.{dtype}(")
    assert issue.line == line_of(src, f"tl.{dtype}(x)")
    assert f"x.to(tl.{dtype})" in issue.message
    assert report.error.hint == f"use x.to(tl.{dtype})"


def test_dtype_as_argument_is_fine():
    src = kernel_src("x = tl.load(x_ptr).to(tl.float32)\nacc = tl.zeros((BLOCK,), dtype=tl.int32)")
    assert errors(check_candidate(src)) == []


# ---------------------------------------------------------------------------- constructs in kernels


@pytest.mark.parametrize("body, construct, needle", [
    ("for i in range(n):\n    if i > 3:\n        break", "break", "break"),
    ("for i in range(n):\n    if i > 3:\n        continue", "continue", "continue"),
    ("f = lambda v: v + 1", "lambda", "lambda"),
    ("try:\n    x = tl.load(x_ptr)\nexcept Exception:\n    x = 0", "try", "try:"),
    ("def helper(v):\n    return v\nx = helper(1)", "nested def", "def helper"),
    ("raise ValueError('no')", "raise", "raise"),
    ("d = {'a': 1}", "dict", "d = {"),
    ("y = torch.exp(tl.load(x_ptr))", "torch.exp(", "torch.exp"),
    ("y = math.exp(tl.load(x_ptr))", "math.exp(", "math.exp"),
    ("x = tl.load(x_ptr)\nprint(x)", "print(", "print(x)"),
    ("xs = [i for i in range(4)]", "list comprehension", "xs ="),
    ("with torch.no_grad():\n    x = tl.load(x_ptr)", "with", "with torch"),
])
def test_unsupported_constructs_in_kernel(body, construct, needle):
    src = kernel_src(body, extra="import math\n")
    report = check_candidate(src)
    issue = find(report, construct)
    assert issue.line == line_of(src, needle)
    assert is_error(issue), issue
    assert report.status is Status.compile_error
    assert report.error.line == issue.line


def test_same_constructs_outside_kernels_are_fine():
    src = HEADER + "import math\n" + '''
def helper(xs):
    out = []
    for x in xs:
        if x is None:
            continue
        try:
            out.append(math.exp(x))
        except OverflowError:
            break
    print(out)
    return [o for o in out], {k: 1 for k in out}, (lambda v: v)(1)
''' + MODEL_NEW.replace("kernel[(1,)](x, out, x.numel(), BLOCK=1024)", "helper([1.0])")
    report = check_candidate(src)
    assert report.status is None
    assert errors(report) == []


def test_print_with_prefix_is_only_a_warning():
    src = kernel_src('x = tl.load(x_ptr)\nprint("x", x)')
    report = check_candidate(src)
    issue = find(report, "print(")
    assert not is_error(issue)
    assert report.status is None


def test_math_on_constants_is_fine():
    src = kernel_src("c = math.sqrt(2.0) * math.log2(BLOCK)\nx = tl.load(x_ptr) * c\ny = math.pi",
                     extra="import math\n")
    assert errors(check_candidate(src)) == []


def test_tuple_comprehension_is_fine():
    src = kernel_src("t = (1, 2)\nys = [v * 2 for v in t]")
    assert errors(check_candidate(src)) == []


def test_dead_constexpr_branch_is_only_a_warning():
    src = kernel_src("if BLOCK > 4096:\n    raise ValueError('too big')\ntl.store(out_ptr, tl.load(x_ptr))")
    report = check_candidate(src)
    assert not is_error(find(report, "raise"))
    assert report.status is None


def test_code_after_return_is_ignored():
    src = kernel_src("x = tl.load(x_ptr)\nreturn\nf = lambda v: v")
    assert errors(check_candidate(src)) == []


def test_helper_jit_function_checked_and_not_reported_unlaunched():
    src = HEADER + "\n@triton.jit\ndef helper(x):\n    return tl.float16(x)\n" + kernel_src(
        "tl.store(out_ptr, helper(tl.load(x_ptr)))").replace(HEADER, "")
    report = check_candidate(src)
    assert find(report, "tl.float16(").line == line_of(src, "tl.float16(x)")
    assert all(i.construct != "unlaunched kernel" for i in report.issues)


@pytest.mark.parametrize("decorator", ["@triton.jit()", "@triton.jit(do_not_specialize=['n'])"])
def test_jit_call_form(decorator):
    src = kernel_src("f = lambda v: v").replace("@triton.jit\n", decorator + "\n")
    assert check_candidate(src).status is Status.compile_error


def test_torch_jit_is_not_a_triton_kernel():
    src = HEADER + "\n@torch.jit.script\ndef f(x):\n    for i in range(3):\n        break\n    return x\n" \
        + "\nclass ModelNew(nn.Module):\n    pass\n"
    assert errors(check_candidate(src)) == []


# ---------------------------------------------------------------------------- constexpr rules


def test_arange_with_non_constexpr_parameter():
    src = kernel_src("offs = tl.arange(0, N)\ntl.store(out_ptr + offs, tl.load(x_ptr + offs))",
                     params="x_ptr, out_ptr, N")
    src = src.replace("x.numel(), BLOCK=1024", "x.numel()")
    report = check_candidate(src)
    assert report.status is Status.compile_error
    issue = find(report, "tl.arange(non-constexpr)")
    assert issue.line == line_of(src, "tl.arange(0, N)")
    assert "tl.constexpr" in issue.message


def test_arange_with_local_constexpr_is_fine():
    src = kernel_src("M: tl.constexpr = 2 * BLOCK\noffs = tl.arange(0, M)\nK = 64\nk = tl.arange(0, K)")
    assert errors(check_candidate(src)) == []


@pytest.mark.parametrize("bounds, ok", [("0, 100", False), ("0, 128", True), ("3, 7", True), ("3, 9", False), ("4, 8", True),
                                        ("8, 8", False)])
def test_arange_literal_power_of_two(bounds, ok):
    src = kernel_src(f"offs = tl.arange({bounds})")
    report = check_candidate(src)
    if ok:
        assert report.status is None
    else:
        assert report.status is Status.compile_error
        assert report.error.line == line_of(src, "tl.arange(")
        assert report.issues[0].construct.startswith("tl.arange(")


def test_non_constexpr_global_in_kernel():
    src = HEADER + "BLOCK_SIZE = 256\nSCALE = tl.constexpr(2.0)\n" + kernel_src(
        "offs = tl.arange(0, BLOCK_SIZE)\ny = tl.load(x_ptr + offs) * SCALE").replace(HEADER, "")
    report = check_candidate(src)
    issue = find(report, "non-constexpr global")
    assert issue.line == line_of(src, "tl.arange(0, BLOCK_SIZE)")
    assert "BLOCK_SIZE" in issue.message and "SCALE" not in issue.message
    assert report.status is Status.compile_error


def test_missing_constexpr_launch_argument():
    src = kernel_src("offs = tl.arange(0, BLOCK)").replace("BLOCK=1024)", ")")
    report = check_candidate(src)
    issue = find(report, "missing constexpr launch argument")
    assert "BLOCK" in issue.message
    assert issue.line == line_of(src, "kernel[(1,)]")
    assert report.status is Status.runtime_error


def test_launch_arguments_by_position_and_default():
    src = kernel_src("offs = tl.arange(0, BLOCK)", params="x_ptr, out_ptr, n, BLOCK: tl.constexpr = 128")
    src = src.replace("BLOCK=1024)", ")")
    assert errors(check_candidate(src)) == []


def test_autotuned_kernel_launch_not_checked():
    assert errors(check_candidate(MATMUL)) == []  # BLOCK_* come from the configs


# ---------------------------------------------------------------------------- warnings and ordering


def test_unlaunched_kernel_warning():
    src = kernel_src("offs = tl.arange(0, BLOCK)").replace("kernel[(1,)](x, out, x.numel(), BLOCK=1024)",
                                                         "out.copy_(x)")
    report = check_candidate(src)
    issue = find(report, "unlaunched kernel")
    assert not is_error(issue)
    assert "kernel" in issue.message
    assert report.status is None


def test_first_error_by_line_is_fatal():
    src = kernel_src("x = tl.load(x_ptr)\ny = tl.float32(x)\nz = tl.relu(y)")
    report = check_candidate(src)
    assert report.error.line == line_of(src, "tl.float32(x)")
    lines = [i.line for i in report.issues]
    assert lines == sorted(lines)
    assert len(errors(report)) == 2


def test_warnings_never_fatal():
    src = kernel_src('print("x", tl.load(x_ptr))').replace("kernel[(1,)](x, out, x.numel(), BLOCK=1024)", "pass")
    report = check_candidate(src)
    assert report.issues and not errors(report)
    assert report.status is None and report.error is None


def test_report_serializes():
    report = check_candidate(kernel_src("y = tl.float32(1)"))
    data = report.model_dump(mode="json")
    assert data["status"] == "compile_error"
    assert data["issues"][0]["construct"] == "tl.float32("


def test_large_file_works():
    parts = [HEADER]
    for i in range(60):
        parts.append(f'''
@triton.jit
def k{i}(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.exp(x) * {i}, mask=mask)
''')
    parts.append("\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        out = torch.empty_like(x)\n")
    for i in range(60):
        parts.append(f"        k{i}[(1,)](x, out, x.numel(), BLOCK=1024)\n")
    parts.append("        return out\n")
    src = "".join(parts)
    assert len(src.splitlines()) > 500
    report = check_candidate(src)
    assert report.status is None and report.issues == []
    bad = src.replace("tl.exp(x) * 59", "tl.expp(x) * 59")
    assert check_candidate(bad).status is Status.compile_error


def test_garbage_input_does_not_crash():
    for src in ["", "\x00", "(" * 500, "class ModelNew:\n" + "  " * 10 + "pass\n"]:
        assert isinstance(check_candidate(src), StaticReport)
