"""Which runtimes this host has, their versions, and which recipes each can run here (`hw`, the TUI's
hardware screen): the same verdicts a run checks, per runtime."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from trace_tui.engine.planner import needs_gpus
from trace_tui.hardware import check_recipe
from trace_tui.runtime import make_runtime
from trace_tui.runtime.apptainer import GAPS as APPTAINER_GAPS
from trace_tui.runtime.charliecloud import GAPS as CHARLIECLOUD_GAPS
from trace_tui.runtime.charliecloud import charliecloud_env
from trace_tui.runtime.docker import docker_available
from trace_tui.runtime.podman import podman_version

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.hardware.report import HardwareReport
    from trace_tui.recipe.schema import ResolvedRecipe

@dataclass
class RuntimeFound:
    name: str
    version: str
    runs_steps: bool  # trace-tui can run stage workers in it
    recipes: list[str] = field(default_factory=list)  # the recipes whose every step passes with it here
    note: str = ""


def _version(cmd: list[str]) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=20, env=charliecloud_env())
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (done.stdout or done.stderr).strip().splitlines()
    return text[0].rsplit(" ", 1)[-1].lstrip("v") if done.returncode == 0 and text else None


def detect_runtimes(report: HardwareReport, recipes: list[ResolvedRecipe]) -> list[RuntimeFound]:
    """Each runtime found on this host with its version, and the recipes it can run here."""
    found: list[RuntimeFound] = []
    if docker_available():
        found.append(RuntimeFound("docker", _docker_version(), True))
    version = podman_version()
    if version:
        found.append(RuntimeFound("podman", version, True))
    version = _version(["ch-run", "--version"])
    if version:
        found.append(RuntimeFound("charliecloud", version, True, note=_gaps_note(CHARLIECLOUD_GAPS)))
    for exe in ("apptainer", "singularity"):  # SingularityCE's exec takes the flags the Apptainer runtime uses
        version = _version([exe, "--version"])
        if version:
            found.append(RuntimeFound("apptainer", f"{exe} {version}", True, note=_gaps_note(APPTAINER_GAPS)))
            break
    found.append(RuntimeFound("local", "this host's Python", True,
                              note="the same workers as processes: not the pinned images"))
    for rt in found:
        if rt.runs_steps:
            rt.recipes = [r.recipe.name for r in recipes if _runs(r, report, rt.name)]
    return found


def _gaps_note(gaps: tuple[str, ...]) -> str:
    return "less isolation than Docker: " + "; ".join(gaps)


def _docker_version() -> str:
    from trace_tui.clients import docker_client

    try:
        return str(docker_client(timeout=5).version().get("Version", "?"))
    except Exception:  # noqa: BLE001 - it answered a moment ago; a version is not worth a failure
        return "?"


def _runs(resolved: ResolvedRecipe, report: HardwareReport, runtime: str) -> bool:
    if any(c.verdict == "fail" for c in check_recipe(resolved, report, runtime=runtime)):
        return False
    if runtime in ("docker", "local"):
        return True  # the verdicts above checked Docker's images (or none are used)
    steps = resolved.recipe.steps
    problems = make_runtime(runtime, flavour=resolved.recipe.image_flavor).check(
        {s.image for s in steps if s.image}, gpus=any(needs_gpus(s) for s in steps))
    return not problems


def runtime_lines(found: list[RuntimeFound]) -> list[str]:
    """One line per runtime found: its version, the recipes it runs here, what it gives less of (`hw`, the TUI)."""
    out = []
    for rt in found:
        what = (f"runs {', '.join(rt.recipes)}" if rt.recipes else "runs no recipe here") if rt.runs_steps else rt.note
        out.append(f"Runtime   {rt.name} {rt.version}: {what}" + (f" ({rt.note})" if rt.runs_steps and rt.note else ""))
    return out
