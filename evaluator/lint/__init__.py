"""Static checks of a candidate source: milliseconds, no execution, no GPU, no subprocess.

``check_candidate(source)`` parses the candidate with :mod:`ast` and reports problems that
are certain to fail before the candidate ever reaches a GPU:

* a syntax error (``Status.syntax_error``);
* no top-level ``ModelNew`` (``Status.import_error``);
* unknown names on ``triton`` / ``triton.language`` modules, checked against the *installed*
  Triton (``tl.relu``, ``tl.float``, ``tl.math.tanh``), with the closest existing names;
* dtypes called as functions (``tl.float32(x)``): a ``triton.language.dtype`` is not callable;
* Python constructs inside ``@triton.jit`` functions that Triton's code generator has no
  lowering for (``break``, ``lambda``, ``try``, nested ``def``, ...);
* ``tl.arange`` with bounds that are not ``tl.constexpr`` or whose range is not a power of two;
* non-constexpr module globals read inside a kernel;
* kernel launches ``kernel[grid](...)`` that miss a required argument.

Severity rule: a finding is an *error* only when the installed Triton compiler (or Python
itself) is sure to reject the code; anything that merely *might* fail is a *warning*.
A false positive blocks a correct kernel, so doubtful rules are warnings. Each rule below
says which it is and why. Errors make the report fatal; warnings never do.

Every issue carries its ``severity`` (``Severity.error`` or ``Severity.warning``); ``construct`` is a short
canonical text of the offending construct (``"tl.float32("``, ``"break"``), with the
``triton.language`` alias always written as ``tl``.

This module is the public entry (``check_candidate``, ``StaticReport``, ``is_error``) and
decides which finding is fatal. The rules live beside it in this package: ``names`` (names against the
installed Triton), ``jit`` (kernel discovery), ``kernel`` (kernel bodies), ``launch`` (imports,
``ModelNew``, launches), walked by ``checker``; shared pieces are in ``core``. All of it runs in
the trusted evaluator process, before any worker is started.
"""

from __future__ import annotations

from pydantic import Field

from ...common import pysource
from ...common.vocab import Severity
from ..results import ErrorInfo, EvalResult, LintIssue, Model, Status
from .checker import _Checker
from .core import _Finding
from .hints import nan_hint, runtime_hint  # noqa: F401  (re-exported: feedback hints after a run)
from .torch_only import surely_no_triton

__all__ = ["StaticReport", "check_candidate", "is_error", "static_verdict", "verdict_of"]


def is_error(issue: LintIssue) -> bool:
    """True when an issue is an error (the build will fail), False for a warning."""
    return issue.severity == Severity.error


class StaticReport(Model):
    """Outcome of the static checks. ``status`` is None when nothing fatal was found."""

    status: Status | None = None
    error: ErrorInfo | None = None
    issues: list[LintIssue] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status is None

    @property
    def errors(self) -> list[LintIssue]:
        return [i for i in self.issues if is_error(i)]

    @property
    def warnings(self) -> list[LintIssue]:
        return [i for i in self.issues if not is_error(i)]


# --------------------------------------------------------------------------------------------
# Public entry point.
# --------------------------------------------------------------------------------------------


def _source_line(lines: list[str], line: int | None) -> str | None:
    if line is None or line < 1 or line > len(lines):
        return None
    return lines[line - 1]


def check_candidate(source: str) -> StaticReport:
    """Static checks of an untrusted candidate source. Never executes it."""
    lines = source.splitlines()
    try:
        tree = pysource.parse(source, filename="candidate.py")
        # compile() catches what the parser lets through (e.g. 'return' outside function,
        # nonlocal at module level); it only builds a code object and runs nothing.
        pysource.compile_tree(tree, "candidate.py")
    except SyntaxError as exc:
        line = exc.lineno
        msg = exc.msg or str(exc)
        issue = LintIssue(line=line or 0, message=msg, construct=type(exc).__name__)
        return StaticReport(status=Status.syntax_error,
                            error=ErrorInfo(error_class=type(exc).__name__, message=msg, line=line,
                                            source_line=_source_line(lines, line) if line else exc.text,
                                            hint="fix the syntax; the file must be valid Python"),
                            issues=[issue])
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        return StaticReport(status=Status.syntax_error,
                            error=ErrorInfo(error_class=type(exc).__name__, message=str(exc)[:300]),
                            issues=[LintIssue(line=0, message=str(exc)[:300],
                                              construct=type(exc).__name__)])

    checker = _Checker(source, tree)
    findings: list[_Finding] = []
    try:
        checker.run()
        findings = checker.findings
    except RecursionError:  # pathological nesting: skip the lint rather than fail the evaluation
        findings = checker.findings
    plain = surely_no_triton(tree)
    if plain is not None:
        findings.append(plain)
    if not checker.has_model_new():
        first_line = 1
        findings.append(_Finding(first_line, "candidate defines no class ModelNew", "ModelNew", Severity.error,
                                 Status.import_error,
                                 "define `class ModelNew(nn.Module)` at module level with the same __init__ "
                                 "arguments and forward signature as Model", error_class="ImportError",
                                 whole_module=True))

    # Deduplicate (the same node can be reached twice through nested expressions).
    seen: set[tuple[int, str, str]] = set()
    unique: list[_Finding] = []
    for f in findings:
        key = (f.line, f.construct, f.message)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    unique.sort(key=lambda f: (f.line, f.severity != Severity.error))

    fatal: _Finding | None = None
    for f in unique:
        if f.severity == Severity.error and f.status is Status.import_error and f.construct == "ModelNew":
            fatal = f
            break
    if fatal is None:
        errors = [f for f in unique if f.severity == Severity.error]
        fatal = errors[0] if errors else None

    report = StaticReport(issues=[f.issue() for f in unique])
    if fatal is not None:
        report.status = fatal.status or Status.compile_error
        error_class = fatal.error_class
        if error_class == "LintError":
            error_class = {Status.compile_error: "CompilationError", Status.import_error: "ImportError",
                           Status.runtime_error: "TypeError"}.get(report.status, "LintError")
        whole = fatal.whole_module
        report.error = ErrorInfo(error_class=error_class, message=fatal.error_message or fatal.message,
                                 line=None if whole else fatal.line,
                                 source_line=None if whole else _source_line(lines, fatal.line), hint=fatal.hint)
    return report


def static_verdict(source: str) -> EvalResult | None:
    """The verdict the static checks alone give a candidate (a syntax error, no ModelNew, a lint error, no
    Triton at all), or None when it must run to be judged. Milliseconds, no torch, nothing executed."""
    return verdict_of(check_candidate(source))


def verdict_of(static: StaticReport) -> EvalResult | None:
    """The result a fatal static report stands for (None when nothing was fatal)."""
    if static.status is None:
        return None
    return EvalResult(status=static.status, error=static.error, lint=static.issues)
