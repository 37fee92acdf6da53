"""`trace-tui hw [--json] [--recipe NAME]`: GPUs, Docker, images, disk, and every recipe step's verdict."""

from __future__ import annotations

import argparse
from dataclasses import asdict

from trace_tui import hardware, paths
from trace_tui.commands.arguments import add_recipe_selection
from trace_tui.common.runtimes import RUNTIME_NAMES
from trace_tui.errors import ExitCode, TraceTuiError
from trace_tui.recipe import catalog as recipes
from trace_tui.service.runtimes import detect_runtimes, runtime_lines


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="the same content as JSON")
    p.add_argument("--recipe", metavar="NAME", help="check only this recipe (exit 3 when a step fails)")
    p.add_argument("--runtime", choices=RUNTIME_NAMES, default="docker", metavar="NAME",
                   help=f"where the steps would run: {', '.join(RUNTIME_NAMES)} (local: no image checks)")
    add_recipe_selection(p)


def run(args: argparse.Namespace) -> int:
    import json

    home = paths.home(args.home)
    report = hardware.hardware_report(home)
    names = [args.recipe] if args.recipe else recipes.known_recipes()
    checks: dict[str, list[hardware.StepCheck]] = {}
    resolved_all = []
    errors: dict[str, str] = {}
    for name in names:
        try:
            if args.recipe:
                resolved = recipes.resolve_recipe(recipes.load_recipe(name), models=args.models, seeds=args.seeds,
                                                  benchmarks=args.benchmarks)
            else:
                resolved = recipes.resolve_recipe(name)
        except TraceTuiError as exc:
            if args.recipe:
                raise
            errors[name] = exc.line()
            continue
        checks[resolved.recipe.name] = hardware.check_recipe(resolved, report, runtime=args.runtime)
        resolved_all.append(resolved)
    found = detect_runtimes(report, resolved_all)
    if args.json:
        print(json.dumps({"hardware": report.model_dump(mode="json"),
                          "runtimes": [asdict(rt) for rt in found],
                          "recipes": {n: [c.model_dump(mode="json") for c in cs] for n, cs in checks.items()},
                          "errors": errors}, indent=2))
    else:
        print("\n".join(render(report, checks, errors) + runtime_lines(found)))
    if args.recipe and any(c.verdict == "fail" for cs in checks.values() for c in cs):
        return ExitCode.REQUIREMENTS
    return ExitCode.OK


def render(report, checks, errors) -> list[str]:  # noqa: ANN001 - HardwareReport, dict[str, list[StepCheck]]
    gib = 1024**3
    g = report.gpu
    out = [f"GPUs      {g.status}: {g.message}"]
    if g.driver_version or g.cuda_driver_version:
        out.append(f"          driver {g.driver_version or '-'}, CUDA driver {g.cuda_driver_version or '-'}")
    for d in g.gpus:
        ecc = "n/a" if d.ecc_volatile_uncorrected is None else str(d.ecc_volatile_uncorrected)
        out.append(f"  [{d.index}] {d.name}  {d.memory_total_bytes / gib:.1f} GiB ({d.memory_free_bytes / gib:.1f} free)"
                   f"  cc {d.compute_capability or '-'}  MIG {d.mig_mode}  ECC uncorrected {ecc}"
                   f"  NVLink up {d.nvlink_links_up}  {d.uuid}")
    dk = report.docker
    out.append(f"Docker    {dk.status}: {dk.message}" + (
        f"; GPU runtime {dk.gpu_runtime or 'none (install nvidia-container-toolkit)'}" if dk.status == "ok" else ""))
    out.append(f"Images    {dk.lock_message}" + (f" (flavor {dk.lock_flavor})" if dk.lock_flavor else ""))
    for i in dk.images:
        out.append(f"  {i.name:<6} {i.status.replace('_', ' ')}: {i.message}")
    out.append(f"Disk      {report.disk.free_bytes / gib:.1f} GiB free of {report.disk.total_bytes / gib:.1f} GiB "
               f"at {report.disk.path} (store and campaigns)")
    for name, cs in checks.items():
        worst = max((c.verdict for c in cs), key=("pass", "warn", "fail").index, default="pass")
        out.append(f"Recipe    {name}: {worst}")
        for c in cs:
            out.append(f"  {c.step:<14} {c.verdict:<4}  {c.reason}")
            if c.verdict != "pass":
                out += [f"  {'':<14}       {n}" for n in c.notes[1:] if not n.startswith("pass")]
    for name, line in errors.items():
        out.append(f"Recipe    {name}: invalid: {line}")
    return out
