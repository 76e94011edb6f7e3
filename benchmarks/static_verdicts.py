"""How long a candidate the static checks settle waits for its verdict on a loaded server.

Starts `adaexplore serve` over stdio (a real MCP client, as an agent), registers level-2 tasks, submits honest
kernels to every one of them at once so that the evaluator is busy (they answer `pending`), then, while those
run, submits candidates that need no run: a syntax error, and the task's own reference renamed `ModelNew`
(plain PyTorch, the most common first attempt of a model). Prints one Markdown table: the verdict, the seconds
from the call to its answer, and how many evaluations were in flight at the time.

    python benchmarks/static_verdicts.py [--problems .kb] [--tasks 12,63,86] [--copies 4] [--data-dir DIR]
        [--candidates benchmarks/candidates/level2]

On a CPU (kernels through Triton's interpreter): --problems examples/tasks --tasks softmax
--candidates tests/bench/replay --copies 2.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
CANDIDATES = ROOT / "benchmarks" / "candidates" / "level2"
SYNTAX_ERROR = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x)\n        return x\n"


def task_file(problems: Path, number: str) -> Path:
    folder = problems / "level2" if (problems / "level2").is_dir() else problems
    return next(p for p in [*folder.glob(f"{number}_*.py"), *folder.glob(f"{number}.py")])


def plain_torch(task_source: str) -> str:
    """The task's reference as a candidate: correct, and no Triton at all."""
    return task_source.replace("class Model(", "class ModelNew(").replace("super(Model,", "super(ModelNew,")


async def run(args: argparse.Namespace) -> list[tuple[str, str, str, float, int]]:
    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="adx-static-"))
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "adaexplore.server.face.cli", "serve", "--data-dir", str(data_dir), "--wait-limit", "1",
        "--shutdown-grace", "0"], env=dict(os.environ))
    rows: list[tuple[str, str, str, float, int]] = []
    async with Client(params, read_timeout_seconds=900) as c:
        tasks = {}
        for n in args.tasks.split(","):
            f = task_file(Path(args.problems), n)
            source = f.read_text()
            reg = (await c.call_tool("register_task", {"source": source, "name": f.stem})).structured_content
            tasks[f.stem] = (reg["task_id"], source)
            print(f"registered {f.stem}", file=sys.stderr)
        in_flight = 0

        async def submit(tid: str, source: str) -> None:
            nonlocal in_flight
            got = (await c.call_tool("evaluate_kernel", {"task_id": tid, "source": source})).structured_content
            in_flight += got["status"] == "pending"

        async with anyio.create_task_group() as tg:  # the load: every honest kernel, `copies` times
            for name, (tid, _) in tasks.items():
                for k in range(args.copies):
                    for cand in sorted((Path(args.candidates) / name).glob("*.py")):
                        tg.start_soon(submit, tid, cand.read_text() + f"\n# copy {k}\n")
        print(f"{in_flight} evaluations pending", file=sys.stderr)
        for name, (tid, source) in tasks.items():
            for kind, cand in (("syntax error", SYNTAX_ERROR), ("plain PyTorch", plain_torch(source))):
                t0 = time.monotonic()
                got = (await c.call_tool("evaluate_kernel", {"task_id": tid, "source": cand})).structured_content
                rows.append((name, kind, got["status"], time.monotonic() - t0, in_flight))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", default=".kb")
    ap.add_argument("--tasks", default="12,63,86")
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("--candidates", default=str(CANDIDATES), help="one folder of kernels per task, named as it")
    ap.add_argument("--data-dir")
    rows = anyio.run(run, ap.parse_args())
    print("| task | candidate | verdict | seconds to the answer | evaluations pending when sent |")
    print("| --- | --- | --- | --- | --- |")
    for name, kind, status, s, pending in rows:
        print(f"| {name} | {kind} | `{status}` | {s:.3f} | {pending} |")


if __name__ == "__main__":
    main()
