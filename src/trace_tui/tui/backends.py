"""The app's backends, received through its constructor (as Harlequin receives its adapter).

Tests pass real backends or narrow fakes (a fake NVML, a small recipe); the
command line builds :func:`default_backends` from its arguments. Every field
is a plain callable so that no screen imports Docker, NVML or the engine.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from trace_tui import paths
from trace_tui.campaign_files.state import recorded_runtime
from trace_tui.clients import load_nvml
from trace_tui.runtime import make_runtime
from trace_tui.runtime.docker import docker_available
from trace_tui.service import load_session
from trace_tui.service.campaigns import (
    OpenedCampaign,
    OwnedRunner,
    read_campaign,
    session_campaign_folder,
    without_steps,
)
from trace_tui.service.requests import RunRequest
from trace_tui.service.requirements import probe_hardware, requirement_problems, run_gpu_plan
from trace_tui.tui.cluster_backend import cluster_backend
from trace_tui.verify.release import verify_release as verify

if TYPE_CHECKING:  # what the backends return; a screen gets them through Backends and imports none of them
    from trace_tui.engine.campaign_list import CampaignSummary
    from trace_tui.engine.events import Event
    from trace_tui.engine.runner import RunResult
    from trace_tui.hardware import HardwareReport, StepCheck
    from trace_tui.preview import Preview
    from trace_tui.recipe.schema import Recipe, ResolvedRecipe
    from trace_tui.tui.choices import RunChoices
    from trace_tui.tui.cluster_backend import ClusterBackend
    from trace_tui.verify.attestation_check import AttestationReport
    from trace_tui.verify.campaign import CampaignVerification
    from trace_tui.verify.checklist import ReleaseVerification


@dataclass(frozen=True)
class GpuSample:
    index: int
    utilization: int | None  # percent; None where NVML does not report it
    memory_used_gib: float
    memory_total_gib: float


class RunHandle(Protocol):
    """A run the run screen drives: ``run`` in a worker thread, ``cancel`` from the UI thread."""

    def run(self, on_event: Callable[[Event], None]) -> RunResult: ...

    def cancel(self) -> None: ...

    @property
    def cancelled(self) -> bool: ...


class ResolveRecipe(Protocol):
    """A recipe resolved, narrowed to the models and seeds the UI chose (None: all of the recipe's)."""

    def __call__(self, recipe: Recipe, models: list[str] | None = None,
                 seeds: list[int] | None = None) -> ResolvedRecipe: ...


class RunnerFactory(Protocol):
    """A run of ``resolved`` into ``campaign_dir``, less the steps the user chose to skip."""

    def __call__(self, resolved: ResolvedRecipe, campaign_dir: Path,
                 skip: frozenset[str] = frozenset()) -> RunHandle: ...


@dataclass
class Backends:
    hardware_probe: Callable[[], HardwareReport]
    # called every second or two on the run screen
    gpu_sampler: Callable[[], list[GpuSample]]
    known_recipes: Callable[[], list[str]]
    load_recipe: Callable[[str], Recipe]
    resolve_recipe: ResolveRecipe
    check_recipe: Callable[[ResolvedRecipe, HardwareReport], list[StepCheck]]
    # (resolved, hardware report or None) -> the configuration-only preview
    preview: Callable[[ResolvedRecipe, HardwareReport | None], Preview]
    runner_factory: RunnerFactory
    campaign_dir_for: Callable[[ResolvedRecipe], Path]
    # an existing campaign, read without writing
    open_campaign: Callable[[Path], OpenedCampaign]
    verify_release: Callable[[Path], ReleaseVerification]
    verify_campaign: Callable[[Path], CampaignVerification]
    # a verification summary or a step's provenance (a file), checked against the keys this site trusts;
    # None: the verify screen takes directories only
    verify_attestation: Callable[[Path], AttestationReport] | None = None
    release_dir: Path | None = None
    home: Path | None = None
    # the run screen's clock (rates, ETAs); tests inject a fixed one for deterministic snapshots
    clock: Callable[[], float] = time.monotonic
    # (resolved, hardware report or None) -> why this machine cannot run it, in full (headless's exit-3 check);
    # None: the hardware check's fail verdicts
    run_problems: Callable[[ResolvedRecipe, HardwareReport | None], list[str]] | None = None
    # -> "docker" | "local": where steps run (said on the run screen and in the quit prompt)
    runtime_name: Callable[[], str] = field(default_factory=lambda: _docker)
    # campaign -> where a run into it goes (the choice, else where it last ran); None: runtime_name
    runtime_for: Callable[[Path], str] | None = None
    # Slurm: submit, follow, cancel and reopen a sharded campaign (the command line's own code);
    # None: this TUI runs campaigns on this machine only
    cluster: ClusterBackend | None = None
    # where campaigns are listed from (the Campaigns screen); None: HOME/campaigns
    campaigns_root: Path | None = None
    # the runtime and offline choice for later checks and runs
    set_choices: Callable[[RunChoices], None] | None = None
    # hardware report -> one line per container runtime this host has: its version and the recipes it runs
    # here (what `trace-tui hw` prints); None: the hardware screen names Docker only
    runtimes: Callable[[HardwareReport], list[str]] | None = None

    def choose(self, choices: RunChoices) -> None:
        """Runtime and offline as the UI chose them (models and seeds narrow the recipe when it is resolved)."""
        if self.set_choices is not None:
            self.set_choices(choices)

    @property
    def campaigns_dir(self) -> Path | None:
        if self.campaigns_root is not None:
            return self.campaigns_root
        if self.home is None:
            return None

        return paths.campaigns_dir(self.home)

    def campaigns(self) -> list[CampaignSummary]:
        """Every campaign under campaigns_dir, from the same status `trace-tui status` prints."""
        root = self.campaigns_dir
        return load_session().list_campaigns(root) if root is not None else []

    def problems(self, resolved: ResolvedRecipe, report: HardwareReport | None) -> list[str]:
        """Why a run of `resolved` would be refused here; empty when it can start."""
        if self.run_problems is not None:
            return list(self.run_problems(resolved, report))
        report = report if report is not None else self.hardware_probe()
        out = []
        for check in self.check_recipe(resolved, report):
            if check.verdict != "fail":
                continue
            notes = [n.partition(": ")[2] for n in check.notes if n.startswith("fail: ")]
            out += [f"{check.step}: {text}" for text in notes or [check.reason]]
        return out

    def runtime_label(self, campaign: Path | None = None) -> str:
        """Where a run goes: into CAMPAIGN when one is given (a campaign resumes where it ran), else any run."""
        try:
            if campaign is not None and self.runtime_for is not None:
                return self.runtime_for(Path(campaign))
            return self.runtime_name()
        except Exception:  # noqa: BLE001 - a label only
            return "docker"


def _docker() -> str:
    return "docker"


def nvml_sampler(nvml: Any = None) -> Callable[[], list[GpuSample]]:
    """GPU utilisation and memory per GPU; an empty list when NVML has no driver (said once, then quiet)."""
    state: dict[str, Any] = {"nvml": nvml, "init": False, "broken": False}

    def sample() -> list[GpuSample]:
        if state["broken"]:
            return []
        try:
            mod = state["nvml"] = state["nvml"] or load_nvml()
            if not state["init"]:
                mod.nvmlInit()
                state["init"] = True
            out = []
            for i in range(mod.nvmlDeviceGetCount()):
                h = mod.nvmlDeviceGetHandleByIndex(i)
                mem = mod.nvmlDeviceGetMemoryInfo(h)
                try:
                    util: int | None = int(mod.nvmlDeviceGetUtilizationRates(h).gpu)
                except Exception:  # noqa: BLE001 - NotSupported (e.g. MIG) or a driver without it
                    util = None
                out.append(GpuSample(i, util, mem.used / 2**30, mem.total / 2**30))
            return out
        except Exception:  # noqa: BLE001 - no driver / no GPU: the panel says so, never a traceback
            state["broken"] = True
            return []

    return sample


def default_backends(request: RunRequest | None = None) -> Backends:
    """The real backends over the service: NVML, Docker, the recipes, the engine, verify, Slurm. REQUEST: what the
    command line asked for (its home, campaign, runtime and narrowing), the UI's starting choices."""
    request = request or RunRequest()
    opts = request.options
    home = paths.home(opts.home)
    release = os.environ.get("TRACE_RELEASE_DIR")
    given = Path(opts.campaign).expanduser().resolve() if opts.campaign else None
    # what the flags chose, until the UI chooses again (Backends.choose)
    chosen: dict[str, Any] = {"runtime": opts.runtime, "offline": opts.offline}
    runtime_kind: dict[str, str] = {}

    def set_choices(choices: RunChoices) -> None:
        # the choices of the recipe or campaign on screen (the app gives each its own)
        chosen.update(runtime=choices.runtime, offline=bool(choices.offline))

    def open_campaign(path: Path) -> OpenedCampaign:
        return read_campaign(path)

    def runtime_for(campaign: Path | None) -> str:
        """Where a run into CAMPAIGN goes, as headless decides it: the runtime chosen (--runtime, or Options
        for this recipe), else the one the campaign last ran on, else Docker where its engine answers."""
        if chosen["runtime"]:
            return chosen["runtime"]
        if campaign is not None:
            recorded = recorded_runtime(campaign)
            if recorded:
                return recorded
        return runtime_name()

    def runtime_name() -> str:
        if chosen["runtime"]:
            return chosen["runtime"]
        if "kind" not in runtime_kind:
            runtime_kind["kind"] = "docker" if docker_available() else "local"
        return runtime_kind["kind"]

    def hardware_probe() -> HardwareReport:
        # disk needs: where that campaign's outputs go
        return probe_hardware(home, Path(opts.campaign).expanduser() if opts.campaign else None)

    def known() -> list[str]:
        return load_session().known_recipes()

    def load(name: str) -> Recipe:
        return load_session().load_recipe(name)

    def resolve(recipe: Recipe, models: list[str] | None = None, seeds: list[int] | None = None) -> ResolvedRecipe:
        # models and seeds: the UI's choices (which start as the command line's --models/--seeds)
        benchmarks = request.selection.benchmarks
        return load_session().resolve_recipe(recipe, models=models, seeds=seeds,
                                      benchmarks=list(benchmarks) if benchmarks else None)

    def check(resolved: ResolvedRecipe, report: HardwareReport) -> list[StepCheck]:
        return load_session().check_recipe(resolved, report, runtime=runtime_for(campaign_dir_for(resolved)))

    def run_problems(resolved: ResolvedRecipe, report: HardwareReport | None) -> list[str]:
        runtime = make_runtime(runtime_for(campaign_dir_for(resolved)), flavour=resolved.recipe.image_flavor)
        return requirement_problems(resolved, runtime, home, report if report is not None else hardware_probe(),
                                    offline=opts.offline)

    def campaign_dir_for(resolved: ResolvedRecipe) -> Path:
        return session_campaign_folder(given, resolved, home)

    def runner_factory(resolved: ResolvedRecipe, campaign_dir: Path, skip: frozenset[str] = frozenset()) -> OwnedRunner:
        session = load_session()
        resolved = session.trusted(resolved, campaign_dir, request.recipe)
        steps = without_steps(resolved, skip)
        plan = run_gpu_plan(steps, hardware_probe())  # the same plan a headless run of it gets
        runtime = make_runtime(runtime_for(campaign_dir), flavour=resolved.recipe.image_flavor)
        # finished work with changed inputs: the run screen shows the one line listing the change unless the TUI
        # was started with --redo; skipped steps are listed as skipped
        return session.open_runner(steps, campaign_dir, runtime, home=home,
                                   offline=chosen["offline"], plan=plan, redo=opts.redo,
                                   listed_steps=resolved.recipe.steps)

    def verify_release(path: Path) -> ReleaseVerification:
        return verify(path)

    def verify_campaign(path: Path) -> CampaignVerification:
        return load_session().verify_campaign(path)

    def runtimes(report: HardwareReport) -> list[str]:
        session = load_session()
        resolved = []
        for name in session.known_recipes():
            try:
                resolved.append(resolve(load(name)))
            except Exception:  # noqa: BLE001 - a recipe that cannot be resolved is said on the recipes table
                continue
        return [line.removeprefix("Runtime").strip() for line in
                session.runtime_lines(session.detect_runtimes(report, resolved))]

    def verify_attestation(path: Path) -> AttestationReport:
        # the attestation readers load pydantic and the image models: only when a file is verified
        from trace_tui.service.attest import check_attestation_file

        return check_attestation_file(path, home=home, trust=[], campaign=None, allow_unsigned=False)

    return Backends(
        hardware_probe=hardware_probe, gpu_sampler=nvml_sampler(), known_recipes=known,
        load_recipe=load, resolve_recipe=resolve, check_recipe=check,
        preview=lambda resolved, report: default_preview(resolved, report, home=home,
                                                         campaign_dir=campaign_dir_for(resolved),
                                                         runtime=runtime_for(campaign_dir_for(resolved))),
        runner_factory=runner_factory, campaign_dir_for=campaign_dir_for, open_campaign=open_campaign,
        verify_release=verify_release, verify_campaign=verify_campaign, verify_attestation=verify_attestation,
        release_dir=Path(release).expanduser().resolve() if release else None, home=home,
        run_problems=run_problems, runtime_name=runtime_name, runtime_for=runtime_for, cluster=cluster_backend(request),
        set_choices=set_choices, runtimes=runtimes,
    )


def default_preview(resolved: ResolvedRecipe, report: HardwareReport | None, *, home: Path, campaign_dir: Path,
                    runtime: str = "docker") -> Preview:
    """The configuration-only preview: the same object `trace-tui preview NAME` prints."""
    return load_session().build_preview(resolved, report, home=home, campaign_dir=campaign_dir, runtime=runtime)
