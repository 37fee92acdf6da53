"""A run of a recipe on this machine, asking nothing: `trace-tui --recipe NAME --yes` (or without a terminal)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from trace_tui import logs, paths
from trace_tui.campaign_files.state import recorded_runtime
from trace_tui.engine.campaign import Campaign
from trace_tui.engine.campaign_folder import campaign_folder
from trace_tui.engine.cluster import check_not_sharded
from trace_tui.engine.recovery import check_campaign_dir
from trace_tui.engine.runner import Runner
from trace_tui.errors import RequirementsError
from trace_tui.local_models import import_local_models
from trace_tui.recipe.catalog import load_recipe, resolve_recipe
from trace_tui.runtime import make_runtime
from trace_tui.service.requests import RunOutcome, RunRequest
from trace_tui.service.requirements import probe_hardware, requirement_problems, run_gpu_plan, run_preflight
from trace_tui.signing.checkpoints import checkpoint_signer

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.engine.runner import EventSink
    from trace_tui.hardware.report import HardwareReport
    from trace_tui.recipe.schema import ResolvedRecipe
    from trace_tui.runtime.base import Runtime
    from trace_tui.service.preflight import Preflight


def resolve_request(request: RunRequest) -> ResolvedRecipe:
    """The request's recipe (a name or a file) with its narrowing and the user's own checkpoints, resolved."""
    if request.recipe is None:
        raise ValueError("a run request without a recipe")
    recipe = load_recipe(request.recipe)
    own = None
    if request.options.local_models:
        own = import_local_models(list(request.options.local_models),
                                  paths.store_dir(paths.home(request.options.home)))
    sel = request.selection
    return resolve_recipe(recipe, models=_listed(sel.models), seeds=_listed(sel.seeds),
                          benchmarks=_listed(sel.benchmarks), local_models=own)


def _listed(values: tuple[str, ...] | tuple[int, ...] | None) -> list | None:
    return list(values) if values else None


def _this_machine(request: RunRequest, resolved: ResolvedRecipe) -> tuple[Path, Path, Runtime, HardwareReport]:
    """(home, campaign folder, runtime, hardware report) of a run on this machine; reads only."""
    opts = request.options
    home = paths.home(opts.home)
    path = campaign_folder(opts.campaign, resolved.recipe.name, resolved.run_tag, opts.home)
    # without --runtime, a campaign resumes where it ran
    runtime = make_runtime(opts.runtime or recorded_runtime(path), flavour=resolved.recipe.image_flavor)
    return home, path, runtime, probe_hardware(home, path)


def preflight_on_this_machine(request: RunRequest, resolved: ResolvedRecipe) -> Preflight:
    """What a run of RESOLVED here would check before it starts, item by item (`--check`); starts and writes
    nothing."""
    home, _path, runtime, report = _this_machine(request, resolved)
    return run_preflight(resolved, runtime, home, report, offline=request.options.offline)


def run_on_this_machine(request: RunRequest, resolved: ResolvedRecipe, printer: EventSink) -> RunOutcome:
    """Check the requirements (exit 3 with what is missing), then run every step into the campaign; Ctrl-C (or
    SIGTERM) stops the containers and leaves a campaign that resumes, a second Ctrl-C stops waiting."""
    opts = request.options
    home, path, runtime, report = _this_machine(request, resolved)
    problems = requirement_problems(resolved, runtime, home, report, offline=opts.offline)
    if problems:
        raise RequirementsError(f"recipe {resolved.recipe.name} cannot run here: " + "; ".join(problems))
    check_not_sharded(path)
    check_campaign_dir(path)  # before anything (the log file) is written into it
    logs.configure(opts.log_format, log_file=Path(opts.log_file) if opts.log_file else path / "runner.log")
    log = logs.get_logger("trace-tui.run")
    with Campaign(path) as campaign:
        runner = Runner(resolved, campaign, runtime, store=paths.store_dir(home), offline=opts.offline,
                        plan=run_gpu_plan(resolved, report), redo=opts.redo,
                        checkpoint_signer=checkpoint_signer(home))
        log.info("run starting", recipe=resolved.recipe.name, campaign=str(path), runtime=runtime.name,
                 run_tag=resolved.run_tag)

        def on_sigint(signum: int, frame: FrameType | None) -> None:
            if runner.cancelled:  # a second Ctrl-C: stop waiting
                raise KeyboardInterrupt
            sys.stderr.write("trace-tui: interrupting: stopping the containers and saving state...\n")
            runner.cancel()

        previous = signal.signal(signal.SIGINT, on_sigint)
        term_previous = signal.signal(signal.SIGTERM, on_sigint)
        try:
            result = runner.run(printer)
        finally:
            signal.signal(signal.SIGINT, previous)
            signal.signal(signal.SIGTERM, term_previous)
        log.info("run finished", exit_code=result.exit_code, message=result.message)
    return RunOutcome(result=result, campaign=path)
