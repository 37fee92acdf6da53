"""`trace-tui recipes [--json]`: every recipe, one line of purpose, and its status on this host."""

from __future__ import annotations

import argparse

from trace_tui import hardware, paths
from trace_tui.common.runtimes import RUNTIME_NAMES
from trace_tui.errors import TraceTuiError
from trace_tui.recipe import catalog as recipes


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="the same content as JSON")
    p.add_argument("--runtime", choices=RUNTIME_NAMES, default="docker", metavar="NAME",
                   help=f"where the steps would run: {', '.join(RUNTIME_NAMES)} (local: no image checks)")


def status_line(checks) -> tuple[str, str]:  # noqa: ANN001 - list[StepCheck]
    """(status, reason): ready / ready with warnings / blocked, with the first finding that decides it."""
    fails = [c for c in checks if c.verdict == "fail"]
    warns = [c for c in checks if c.verdict == "warn"]
    if fails:
        return "blocked", f"{fails[0].step}: {fails[0].reason}"
    if warns:
        return "ready with warnings", f"{warns[0].step}: {warns[0].reason}"
    return "ready", ""


def run(args: argparse.Namespace) -> int:
    import json

    report = hardware.hardware_report(paths.home(args.home))
    rows = []
    for name in recipes.known_recipes():
        try:
            resolved = recipes.resolve_recipe(name)
        except TraceTuiError as exc:
            rows.append({"name": name, "title": "", "purpose": "", "canonical": False, "status": "invalid",
                         "reason": exc.line(), "steps": []})
            continue
        checks = hardware.check_recipe(resolved, report, runtime=args.runtime)
        status, reason = status_line(checks)
        r = resolved.recipe
        rows.append({"name": r.name, "title": r.title, "purpose": r.purpose, "canonical": r.canonical,
                     "status": status, "reason": reason, "steps": [c.model_dump(mode="json") for c in checks]})
    if args.json:
        print(json.dumps({"recipes": rows}, indent=2))
        return 0
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        print(f"{r['name']:<{width}}  {r['purpose']}")
        print(f"{'':<{width}}  -> {r['status']}" + (f": {r['reason']}" if r["reason"] else ""))
    return 0
