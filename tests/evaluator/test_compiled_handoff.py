"""A candidate's timing jobs load the kernels its correctness job compiled instead of compiling
them again: the job's own Triton cache travels from one to the other, and only there."""

import io
import os
import tarfile
import textwrap

import pytest
from conftest import EXAMPLES, example_task

from adaexplore.evaluator.evaluator import Evaluator
from adaexplore.evaluator.messages import COMPILED_MAX_BYTES
from adaexplore.evaluator.results import Status
from adaexplore.evaluator.sandbox import confine
from adaexplore.evaluator.worker import harness


@pytest.fixture
def job_cache(tmp_path, monkeypatch):
    """A job's scratch folder with its own Triton cache inside, as the full sandbox makes it."""
    scratch = tmp_path / "job"
    cache = scratch / ".triton"
    cache.mkdir(parents=True)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))
    return scratch, cache


def test_a_jobs_own_cache_packs_and_unpacks_into_another_jobs_own_cache(job_cache, tmp_path, monkeypatch):
    scratch, cache = job_cache
    (cache / "ab12").mkdir()
    (cache / "ab12" / "kernel.cubin").write_bytes(b"\x7fELF" + bytes(5000))
    (cache / "ab12" / "__grp__kernel.json").write_text('{"child_paths": {}}')
    os.symlink("/etc/hostname", cache / "ab12" / "link")  # links are not taken
    blob = harness.pack_compiled(str(scratch))
    assert blob is not None
    other = tmp_path / "other"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(other / ".triton"))
    assert harness.unpack_compiled(blob, str(other))
    got = sorted(p.relative_to(other / ".triton").as_posix() for p in (other / ".triton").rglob("*"))
    assert got == ["ab12", "ab12/__grp__kernel.json", "ab12/kernel.cubin"]
    assert (other / ".triton" / "ab12" / "kernel.cubin").read_bytes()[:4] == b"\x7fELF"


def test_a_shared_cache_an_empty_one_or_one_over_the_limit_is_not_handed_on(job_cache, tmp_path, monkeypatch):
    scratch, cache = job_cache
    assert harness.pack_compiled(str(scratch)) is None  # empty
    (cache / "big").write_bytes(bytes(4096))
    assert harness.pack_compiled(str(scratch), limit=1000) is None
    assert harness.pack_compiled(str(scratch)) is not None
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "shared-cache"))  # not the job's own
    (tmp_path / "shared-cache").mkdir()
    (tmp_path / "shared-cache" / "k").write_text("x")
    assert harness.pack_compiled(str(scratch)) is None
    assert not harness.unpack_compiled(b"anything", str(scratch))


def evil_tar() -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name in ("../escaped", "/tmp/absolute-escape", "ok/../../up"):
            info = tarfile.TarInfo(name)
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
        link = tarfile.TarInfo("ok/link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
        tar.addfile(link)
    return out.getvalue()


def test_a_forged_tar_writes_nothing_outside_the_jobs_cache(job_cache, tmp_path):
    # Candidate code runs in the job that packs: it could hand on any bytes at all.
    scratch, cache = job_cache
    harness.unpack_compiled(evil_tar(), str(scratch))
    assert not (scratch / "escaped").exists() and not (tmp_path / "escaped").exists()
    assert not os.path.exists("/tmp/absolute-escape") and not (scratch / "up").exists()
    assert not (cache / "ok" / "link").exists()
    assert not harness.unpack_compiled(bytes(COMPILED_MAX_BYTES + 1), str(scratch))


# Counts its forward calls. Found whole in its timing job, the file it left in its own Triton cache
# in its correctness job lets it run on; without it, any call past the correctness trials fails.
# What it leaves is 12 MB with its digest beside it, so the hand-off must carry a large cache intact.
HANDED_ON = textwrap.dedent('''
    import hashlib, os
    _cache = os.environ["TRITON_CACHE_DIR"]
    _marker = os.path.join(_cache, "handed-on", "marker")
    FOUND = os.path.exists(_marker) and hashlib.sha256(open(_marker, "rb").read()).hexdigest() == \\
        open(_marker + ".sha256").read()
    if not os.path.exists(_marker):
        os.makedirs(os.path.dirname(_marker), exist_ok=True)
        _data = os.urandom(12 << 20)
        open(_marker, "wb").write(_data)
        open(_marker + ".sha256", "w").write(hashlib.sha256(_data).hexdigest())
    CALLS = 0
''')


def test_the_timing_job_finds_what_the_correctness_job_of_the_same_candidate_compiled(tmp_path):
    task = example_task("softmax", warmup_runs=1, timed_runs=3)
    kernel = (EXAMPLES / "kernels" / "softmax.py").read_text()
    trials = task.protocol.correctness_trials
    source = HANDED_ON + kernel.replace("    def forward(self, x: torch.Tensor) -> torch.Tensor:", f"""    def forward(self, x: torch.Tensor) -> torch.Tensor:
        global CALLS
        CALLS += 1
        if CALLS > {trials} and not FOUND:
            raise RuntimeError("timed without the kernels its correctness job compiled")""", 1)
    assert source.count("CALLS += 1") == 1
    # Another candidate never sees them: with every layer of the sandbox each job's cache is its own.
    other = textwrap.dedent('''
        import os
        if os.path.exists(os.path.join(os.environ["TRITON_CACHE_DIR"], "handed-on", "marker")):
            raise RuntimeError("saw another candidate's kernels")
    ''') + kernel
    # A timing job of its own (as a confirmation is), not the correctness job's process timing it.
    with Evaluator(device="cpu", work_dir=tmp_path, cpu_timing=True, baselines=("eager",), one_process=False) as ev:
        result = ev.evaluate(task, source)
        others = ev.evaluate(task, other)
        isolated = ev.sandbox_level() == confine.LEVEL_FULL
    assert result.status is Status.correct and result.timing is not None, result.feedback(400)
    if isolated:
        assert others.status is Status.correct and others.timing is not None, others.feedback(400)
