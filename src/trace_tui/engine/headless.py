"""Headless runs: `trace-tui --recipe NAME --yes` (or without a terminal). Asks nothing."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any

from trace_tui import logs, paths
from trace_tui.engine.campaign_folder import campaign_folder
from trace_tui.engine.recovery import check_campaign_dir
from trace_tui.errors import ExitCode, RequirementsError
from trace_tui.runtime import make_runtime


def probe_hardware(home: Path, campaign: Path | None = None) -> Any:
    try:
        from trace_tui.hardware import hardware_report
    except ImportError:  # pragma: no cover - a build without the hardware module
        return None
    return hardware_report(home, campaign=campaign)  # disk needs: where the campaign's outputs go


def requirement_problems(resolved: Any, runtime: Any, home: Path, report: Any) -> list[str]:
    """What this machine or the store lacks for the recipe, each with the command that provides it.

    The runtime's own check is authoritative for Docker and images (it honours image overrides);
    the hardware check adds GPUs and disk; the store check adds missing entries that no step of
    the recipe produces itself.
    """
    from trace_tui.engine.planner import needs_gpus

    problems = list(runtime.check({s.image for s in resolved.recipe.steps if s.image},
                                  gpus=any(needs_gpus(s) for s in resolved.recipe.steps)))
    if report is not None:
        from trace_tui.hardware import check_recipe

        for chk in check_recipe(resolved, report, runtime=runtime.name):
            for note in chk.notes:
                verdict, _, text = note.partition(": ")
                # images and Docker: the runtime said it above (with its image overrides)
                if verdict == "fail" and not text.startswith(("image ", "Docker has no GPU runtime")):
                    problems.append(f"{chk.step}: {text}")
    try:
        from trace_tui.store.store import missing_entries
    except ImportError:  # pragma: no cover
        missing_entries = None
    if missing_entries is not None and hasattr(resolved, "all_store_entries"):
        produced = {o for s in resolved.recipe.steps for o in s.outputs}
        wanted = [e for e in resolved.all_store_entries() if e not in produced]
        if wanted:
            for name, fix in missing_entries(home, wanted):
                problems.append(f"the store lacks {name} (run `{fix}`)")
    return problems


def run_gpu_plan(resolved: Any, report: Any) -> Any:
    """The run's one GPU plan (trace_tui.plan.run_plan), for headless runs and the TUI alike; None
    when there is no hardware report (the runner then falls back to each step's own GPU count)."""
    if report is None:
        return None
    from trace_tui.plan import run_plan

    return run_plan(resolved, report)


def run_headless(args: argparse.Namespace, resolved: Any) -> int:
    from trace_tui.campaign_files.state import recorded_runtime
    from trace_tui.engine.campaign import Campaign
    from trace_tui.engine.printer import HeadlessPrinter
    from trace_tui.engine.runner import Runner

    home = paths.home(getattr(args, "home", None))
    flavour = resolved.recipe.image_flavor
    path = campaign_folder(getattr(args, "campaign", None), resolved.recipe.name, resolved.run_tag,
                           getattr(args, "home", None))
    # without --runtime, a campaign resumes where it ran
    runtime = make_runtime(getattr(args, "runtime", None) or recorded_runtime(path), flavour=flavour)
    report = probe_hardware(home, path)
    problems = requirement_problems(resolved, runtime, home, report)
    if problems:
        raise RequirementsError(f"recipe {resolved.recipe.name} cannot run here: " + "; ".join(problems))
    from trace_tui.engine.cluster import check_not_sharded

    check_not_sharded(path)
    check_campaign_dir(path)  # before anything (the log file) is written into it
    fmt = getattr(args, "log_format", "console") or "console"
    logs.configure(fmt, log_file=Path(args.log_file) if getattr(args, "log_file", None) else path / "runner.log")
    log = logs.get_logger("trace-tui.run")
    printer = HeadlessPrinter(sys.stdout, fmt=fmt)
    with Campaign(path) as campaign:
        runner = Runner(resolved, campaign, runtime, store=paths.store_dir(home),
                        offline=bool(getattr(args, "offline", False)), plan=run_gpu_plan(resolved, report),
                        redo=bool(getattr(args, "redo", False)))
        log.info("run starting", recipe=resolved.recipe.name, campaign=str(path), runtime=runtime.name,
                 run_tag=resolved.run_tag)

        def on_sigint(signum: int, frame: Any) -> None:
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
    out = sys.stdout if fmt == "console" else sys.stderr
    out.write(printer.summary(result) + "\n")
    if result.exit_code == ExitCode.OK:
        out.write(f"status: trace-tui status --campaign {path}\nverify: trace-tui verify --campaign {path}\n")
    elif result.exit_code in (ExitCode.FAILED, ExitCode.INTERRUPTED):
        out.write(f"resume: run the same command again (campaign {path})\n")
    out.flush()
    return result.exit_code
