"""Triton's C helpers are built once by the trusted side and copied, sealed, into every job's own
cache: a job that changes its copy changes nothing another job loads."""

import io
import os
import tarfile
import textwrap
from pathlib import Path

import pytest
from conftest import EXAMPLES, HAS_CUDA, example_task, gpu

from adaexplore.evaluator.evaluator import Evaluator
from adaexplore.evaluator.results import Status
from adaexplore.evaluator.sandbox import confine
from adaexplore.evaluator.sandbox.sealed_cache import Sealed, SealedCache, pack_tree
from adaexplore.evaluator.worker import harness

HELPER = "0f1e2d3c/cuda_utils.cpython-311-x86_64-linux-gnu.so"
HELPER_BYTES = b"\x7fELF sealed helper " + bytes(range(256)) * 64


def sealed_helper(tmp_path: Path) -> Sealed:
    """What a build that left HELPER would have sealed, packed as the pool packs a build."""
    build = tmp_path / "build"
    (build / HELPER).parent.mkdir(parents=True)
    (build / HELPER).write_bytes(HELPER_BYTES)
    blob = pack_tree(str(build), 1 << 20)
    assert blob is not None
    return Sealed.of(blob)


def test_a_sealed_build_unpacks_into_a_jobs_own_cache_only_when_its_digest_holds(tmp_path, monkeypatch):
    scratch = tmp_path / "job"
    (scratch / ".triton").mkdir(parents=True)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(scratch / ".triton"))
    sealed = sealed_helper(tmp_path)
    assert not harness.seed_sealed(sealed.blob, "0" * 64, str(scratch))  # not the tar that was sealed
    assert not (scratch / ".triton" / HELPER).exists()
    assert harness.seed_sealed(sealed.blob, sealed.digest, str(scratch))
    assert (scratch / ".triton" / HELPER).read_bytes() == HELPER_BYTES


def test_packing_a_build_takes_its_regular_files_and_no_links(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "cuda_utils.so").write_bytes(b"so")
    os.symlink("/etc/hostname", tmp_path / "a" / "link")
    blob = pack_tree(str(tmp_path), 1 << 20)
    assert blob is not None
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        assert tar.getnames() == ["a/cuda_utils.so"]
    assert pack_tree(str(tmp_path), 10) is None  # over the limit
    assert pack_tree(str(tmp_path / "missing"), 1 << 20) is None


@pytest.mark.skipif(HAS_CUDA, reason="on a GPU the build succeeds (the GPU test below)")
def test_without_a_gpu_nothing_is_built_every_job_builds_its_own_and_no_folder_is_left(tmp_path):
    cache = SealedCache()
    cache.start(str(tmp_path), {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert cache.get(120) is None
    assert cache.note.startswith("not built")
    assert list(tmp_path.iterdir()) == []


# Changes every file of its own Triton cache, then tries the folders around it, and computes the
# right answer: nothing in its verdict says what it did.
POISONER = textwrap.dedent('''
    import os
    _cache = os.environ["TRITON_CACHE_DIR"]
    for _folder, _dirs, _files in os.walk(_cache):
        for _name in _files:
            with open(os.path.join(_folder, _name), "wb") as _fh:
                _fh.write(b"poisoned by another job")
    _mine = os.path.join(_cache, "0f1e2d3c", "cuda_utils.cpython-311-x86_64-linux-gnu.so")
    if os.path.exists(_mine) and open(_mine, "rb").read() != b"poisoned by another job":
        raise RuntimeError("could not change its own copy")  # the attack must land where it can
    for _up in (os.path.dirname(_cache), os.path.dirname(os.path.dirname(_cache)), "/tmp"):
        try:
            _target = os.path.join(_up, ".triton", "0f1e2d3c")
            os.makedirs(_target, exist_ok=True)
            with open(os.path.join(_target, "cuda_utils.cpython-311-x86_64-linux-gnu.so"), "wb") as _fh:
                _fh.write(b"poisoned by another job")
        except OSError:
            pass
''')

# Fails unless the helper it finds in its own cache is the one the trusted side sealed.
PROBE = textwrap.dedent(f'''
    import os
    _path = os.path.join(os.environ["TRITON_CACHE_DIR"], {HELPER!r})
    _want = {HELPER_BYTES!r}
    if not os.path.exists(_path) or open(_path, "rb").read() != _want:
        raise RuntimeError("the sealed helper in this job's cache was changed or is missing")
''')


def test_a_job_that_poisons_its_cache_changes_nothing_the_next_job_loads(tmp_path):
    kernel = (EXAMPLES / "kernels" / "softmax.py").read_text()
    task = example_task("softmax")
    with Evaluator(device="cpu", work_dir=tmp_path, baselines=("eager",)) as ev:
        if ev.sandbox_level() != confine.LEVEL_FULL:
            pytest.skip("without every layer of the sandbox, jobs share one Triton cache and take no sealed build")
        sealed = sealed_helper(tmp_path)
        ev.runner.pool.sealed.set(sealed)
        poisoner = ev.evaluate(task, POISONER + kernel)
        probes = [ev.evaluate(task, PROBE + kernel + f"\n# probe {k}\n") for k in range(2)]
    assert poisoner.status is Status.correct, poisoner.feedback(400)
    for probe in probes:
        assert probe.status is Status.correct, probe.feedback(400)
    assert ev.runner.pool.sealed.get() == sealed  # what later jobs get is still the tar that was sealed


# On a GPU: the helper Triton built once is found by a job's Triton, which builds no second one.
BUILT_ONCE = textwrap.dedent('''
    import glob, os
    def _helpers():
        return sorted(glob.glob(os.path.join(os.environ["TRITON_CACHE_DIR"], "*", "cuda_utils*")))
    SEEDED = _helpers()
    if not SEEDED:
        raise RuntimeError("no sealed helper in this job's cache")
''')


@gpu
def test_on_a_gpu_jobs_load_the_helper_built_once_and_never_build_their_own(tmp_path):
    assert HAS_CUDA
    kernel = (EXAMPLES / "kernels" / "softmax.py").read_text()
    check = '''        out = self._forward_checked(x)
        if _helpers() != SEEDED:
            raise RuntimeError("this job built Triton's helper again: " + repr(_helpers()))
        return out

    def _forward_checked(self, x: torch.Tensor) -> torch.Tensor:
'''
    marker = "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
    assert marker in kernel
    source = BUILT_ONCE + kernel.replace(marker, marker + check, 1)
    task = example_task("softmax")
    with Evaluator(device="cuda", work_dir=tmp_path, baselines=("eager",)) as ev:
        if ev.sandbox_level() != confine.LEVEL_FULL:
            pytest.skip("without every layer of the sandbox, jobs share one Triton cache")
        assert ev.runner.pool.sealed.get(120) is not None, ev.runner.pool.sealed.note
        poisoner = ev.evaluate(task, POISONER + kernel)
        result = ev.evaluate(task, source)
    assert result.status is Status.correct, result.feedback(600)
    assert poisoner.status in (Status.correct, Status.runtime_error), poisoner.feedback(400)


def test_without_the_seal_jobs_sharing_one_cache_load_what_a_poisoner_left(tmp_path, monkeypatch):
    # The control: the same jobs without the seal, sharing one Triton cache as jobs without
    # namespaces do, with the helper put there once. The poisoner's change reaches the probe.
    kernel = (EXAMPLES / "kernels" / "softmax.py").read_text()
    task = example_task("softmax")
    with Evaluator(device="cpu", work_dir=tmp_path, baselines=("eager",)) as ev:
        shared = Path(ev.runner.pool.triton_cache_dir)
        (shared / HELPER).parent.mkdir(parents=True, exist_ok=True)
        (shared / HELPER).write_bytes(HELPER_BYTES)
        made = ev.runner.job

        def unsealed(*args, **kwargs):
            spec = made(*args, **kwargs)
            spec.sandbox.level = confine.LEVEL_WEAK
            return spec

        monkeypatch.setattr(ev.runner, "job", unsealed)
        poisoner = ev.evaluate(task, POISONER + kernel)
        probe = ev.evaluate(task, PROBE + kernel)
    assert poisoner.status is Status.correct, poisoner.feedback(400)
    assert probe.status is not Status.correct
    assert "changed or is missing" in probe.feedback(2000)
