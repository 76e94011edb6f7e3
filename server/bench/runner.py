"""One `adaexplore bench` invocation: check the endpoint, run every variant's tasks, write the report.

Runs in the bench process. Each variant (method, memory on or off) gets its own server subprocess and data
directory under the run folder, so the trees and memories of compared variants never mix, and a killed run
resumes each variant where its step log stands.
"""

from __future__ import annotations

import sys
from contextlib import ExitStack
from pathlib import Path

import anyio
import orjson

from .driver import Driver, Limits
from .endpoint import ChatEndpoint, EndpointError
from .progress import Progress
from .report import write_report
from .session import ToolCallError, open_session
from .settings import BenchSettings, EndpointSettings, Method, variant_name
from .state import StepRecord, VariantState


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def _variant(settings: BenchSettings, method: Method, chat: ChatEndpoint, limits: Limits,
                   progress: Progress) -> None:
    """All tasks of one variant against its own server."""
    name = variant_name(method, settings.memory)
    state = VariantState(settings.run_dir, name)
    todo = [f for f in settings.task_files if state.done(f.stem) < settings.budget.steps]
    for f in settings.task_files:
        if f not in todo:
            progress.task(name, f.stem, settings.budget.steps, settings.budget.steps)
    if not todo or limits.spent():
        return

    def on_step(variant: str, task: str, rec: StepRecord) -> None:
        progress.step(variant, task, rec)

    async with open_session(state.server_dir, settings.device, settings.server_args) as session:
        driver = Driver(session, chat, state, method, settings.memory, limits, on_step)
        if settings.adapt_rounds and settings.memory:
            from .adapt import adapt

            progress.note(f"[{name}] Adapt: {settings.adapt_rounds} round(s) of {settings.adapt_tasks} new task(s)")
            try:
                rules = await adapt(driver, settings.adapt_rounds, settings.adapt_tasks, settings.task_files)
            except EndpointError as exc:
                limits.fail(str(exc))
                return
            progress.note(f"[{name}] Adapt recorded {rules} rule(s)")
        for f in todo:
            if limits.spent():
                return
            progress.task(name, f.stem, state.done(f.stem), settings.budget.steps)
            try:
                await driver.run_task(f.stem, f.read_text(), settings.agents)
            except ToolCallError as exc:  # e.g. a task the server rejects at registration
                progress.note(f"[{name}] {f.stem}: skipped: {exc}")


async def run_bench(settings: BenchSettings, endpoint: EndpointSettings) -> int:
    """Run the bench; 0 when done or stopped by a budget (resumable), 1 on a failure mid-run, 2 on a bad
    endpoint (found before any server starts)."""
    try:
        chat = ChatEndpoint(endpoint)
        await chat.check()
    except EndpointError as exc:
        _say(f"error: {exc}")
        return 2
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    record = settings.model_dump(mode="json")
    record["endpoint"] = endpoint.model_dump(mode="json", exclude={"api_key"})
    (settings.run_dir / "bench.json").write_bytes(orjson.dumps(record, option=orjson.OPT_INDENT_2))
    limits = Limits(settings.budget)
    total = len(settings.task_files) * len(settings.methods) * settings.budget.steps
    try:
        with Progress(total, bars=settings.progress) as progress:
            if settings.parallel_variants:
                async with anyio.create_task_group() as tg:
                    for m in settings.methods:
                        tg.start_soon(_variant, settings, m, chat, limits, progress)
            else:
                for m in settings.methods:
                    await _variant(settings, m, chat, limits, progress)
    finally:
        await chat.close()
    md, notes = write_report(settings.run_dir)
    for n in notes:
        _say(f"note: {n}")
    _say(f"report: {md}")
    if limits.stopped:
        _say(f"{'error' if limits.failed else 'stopped'}: {limits.stopped}; run the same command again to resume")
        return 1 if limits.failed else 0
    return 0


def run(settings: BenchSettings, endpoint: EndpointSettings | None, replay_dir: Path | None) -> int:
    """Run from the command line: with `replay_dir`, against a replay endpoint started here."""
    with ExitStack() as stack:
        if replay_dir is not None:
            from .replay import ReplayEndpoint

            ep = stack.enter_context(ReplayEndpoint(replay_dir))
            endpoint = EndpointSettings(base_url=ep.base_url, model="replay", api_key=ep.api_key)
        assert endpoint is not None
        return anyio.run(run_bench, settings, endpoint)
