"""Helpers for the TUI tests (no tests here): backends with injected hardware, and run recipes.

What is real: the recipes (trace_tui.recipe.catalog), the hardware report and per-step
checks (trace_tui.hardware), the engine Runner with the local runtime over the
selftest stage worker, and verify over the real release copy. What is faked,
at the narrowest edge and only where no real one exists here:

- NVML: tests/fake_nvml.py machines ("none" = this machine's real behaviour,
  "8xh100" = the upstream reference), exactly as the hardware tests do;
- the Docker client passed to the hardware probe, for snapshots only, so that
  the engine version and image ids on screen do not depend on the CI host;
- the free disk space, for snapshots only (it changes from run to run).
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path
from typing import Any

from trace_tui import hardware
from trace_tui.recipe import catalog as recipes_mod
from trace_tui.service.campaigns import OwnedRunner, read_campaign, without_steps
from trace_tui.tui.backends import Backends, GpuSample, default_preview

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:  # fake_nvml lives beside this file
    sys.path.insert(0, str(TESTS))
fake_nvml = importlib.import_module("fake_nvml")

# A fixed, absent home: the hardware screen shows the store path, which must not be a temp path in snapshots.
SNAPSHOT_HOME = Path("/home/researcher/.local/share/trace-tui")


def FIXED_CLOCK() -> float:  # noqa: N802 - a constant clock: rates and ETAs show "—" in snapshots
    return 1000.0


class FakeImages:
    def __init__(self, ids: dict[str, str]) -> None:
        self.ids = ids

    def get(self, tag: str) -> Any:
        import docker.errors

        if tag not in self.ids:
            raise docker.errors.ImageNotFound(f"No such image: {tag}")
        return type("Image", (), {"id": self.ids[tag]})()


class FakeDockerClient:
    """docker-py's DockerClient as far as hardware.probe_docker reads it (version, info, images.get)."""

    def __init__(self, gpu_runtime: bool, images: dict[str, str] | None = None) -> None:
        self._gpu = gpu_runtime
        self.images = FakeImages(images or {})

    def version(self) -> dict[str, str]:
        return {"Version": "26.1.5"}

    def info(self) -> dict[str, Any]:
        return {"Runtimes": {"runc": {}, **({"nvidia": {}} if self._gpu else {})}}


def unreachable_docker() -> Any:
    import docker.errors

    raise docker.errors.DockerException("Error while fetching server API version: connection refused")


def snapshot_report(machine: str) -> hardware.HardwareReport:
    """The real hardware report over a fake NVML machine, with deterministic Docker and disk."""
    def docker_with_gpu_runtime() -> FakeDockerClient:
        return FakeDockerClient(gpu_runtime=True)  # images not built: a fresh host

    factory = docker_with_gpu_runtime if machine == "8xh100" else unreachable_docker
    report = hardware.hardware_report(SNAPSHOT_HOME, nvml=fake_nvml.machine(machine),
                                      docker_client_factory=factory,
                                      image_lock=SNAPSHOT_HOME / "appliance" / "images.lock.json")
    disk = hardware.DiskStatus(path=str(SNAPSHOT_HOME), free_bytes=812 * 2**30, total_bytes=1863 * 2**30)
    return report.model_copy(update={"disk": disk})


def gpu_samples(machine: str) -> list[GpuSample]:
    """Deterministic utilisation and memory for the machine's GPUs (fake NVML has no utilisation counters)."""
    spec = fake_nvml.MACHINES[machine]
    return [GpuSample(i, 87 if i % 2 == 0 else 64, g.used_mib / 1024 + 61.0, g.memory_mib / 1024)
            for i, g in enumerate(spec.gpus)]


def local_runner_factory(home: Path):
    """The real engine: Runner + Campaign + LocalRuntime (stage workers as subprocesses)."""

    def factory(resolved: Any, campaign_dir: Path, skip: frozenset[str] = frozenset()) -> Any:
        from trace_tui.engine.campaign import Campaign
        from trace_tui.engine.runner import Runner
        from trace_tui.runtime.local import LocalRuntime

        campaign = Campaign(campaign_dir)
        runner = Runner(without_steps(resolved, skip), campaign, LocalRuntime(), store=home / "store",
                        listed_steps=resolved.recipe.steps)
        return OwnedRunner(runner, campaign)

    return factory


def make_backends(tmp: Path, *, machine: str = "none", release_dir: Path | None = None,
                  extra_recipes: dict[str, Any] | None = None, snapshot: bool = False,
                  runtime: str | None = None, campaigns_root: Path | None = None) -> Backends:
    """Backends over the real modules; `extra_recipes` adds Python-built resolved recipes by name.

    The runtime for the checks follows what `trace-tui` picks on its own: Docker where its engine
    answers (the snapshots' 8x H100 host), else local. Runs always use the local runtime here.
    """
    if runtime is None:
        runtime = "docker" if snapshot and machine == "8xh100" else "local"
    extra = dict(extra_recipes or {})
    home = SNAPSHOT_HOME if snapshot else tmp / "home"

    def probe() -> Any:
        if snapshot:
            return snapshot_report(machine)
        return hardware.hardware_report(home, nvml=fake_nvml.machine(machine), docker_client_factory=unreachable_docker)

    def known() -> list[str]:
        return list(extra) + recipes_mod.known_recipes()

    def load(name: str) -> Any:
        if name in extra:
            return extra[name].recipe
        return recipes_mod.load_recipe(name)

    def resolve(recipe: Any, models: list[str] | None = None, seeds: list[int] | None = None) -> Any:
        if recipe.name in extra:
            return extra[recipe.name]
        return recipes_mod.resolve_recipe(recipe, models=models, seeds=seeds)

    def check(resolved: Any, report: Any) -> list[Any]:
        return hardware.check_recipe(resolved, report, runtime=runtime)

    campaigns = campaigns_root or (SNAPSHOT_HOME if snapshot else tmp) / "campaigns"

    def campaign_dir_for(resolved: Any) -> Path:
        return campaigns / resolved.run_tag

    def preview(resolved: Any, report: Any) -> Any:
        return default_preview(resolved, report, home=home, campaign_dir=campaign_dir_for(resolved), runtime=runtime)

    def verify_release(path: Path) -> Any:
        from trace_tui.verify.release import verify_release as verify

        return verify(path)

    def verify_campaign(path: Path) -> Any:
        from trace_tui.verify import campaign

        return campaign.verify_campaign(path)

    return Backends(
        hardware_probe=probe,
        gpu_sampler=lambda: gpu_samples(machine),
        known_recipes=known, load_recipe=load, resolve_recipe=resolve, check_recipe=check,
        preview=preview, runner_factory=local_runner_factory(tmp / "home"),
        campaign_dir_for=campaign_dir_for,
        open_campaign=read_campaign, verify_release=verify_release, verify_campaign=verify_campaign,
        release_dir=release_dir, home=home, clock=FIXED_CLOCK if snapshot else time.monotonic,
        campaigns_root=campaigns,
    )


def selftest_resolved(name: str = "tuitest", *, rows: int = 6, delay: float = 0.0, seeds=(42, 43),
                      benchmarks: dict[str, int] | None = None, host_step: bool = True,
                      models: tuple[str, ...] = ("tiny-a",), fail_step: bool = False) -> Any:
    """A small Python-built recipe over the engine's selftest worker (host steps: no image needed)."""
    import hashlib
    import json

    from trace_tui.common.digest import sha256_json
    from trace_tui.recipe.schema import BenchmarkRef, LocalModel, Recipe, ResolvedRecipe, SliceKey, Step, config_data

    benchmarks = benchmarks or {"t1": rows, "t2": rows}
    args = ["--delay", str(delay)] if delay else []
    steps = [Step(id="generate", title="Generate rows (selftest)", stage="host",
                  description="One job per slice: the selftest worker writes one row per slice row.",
                  run=["trace_tui.stages.selftest", "rows", *args], per_slice=True)]
    if fail_step:
        steps.append(Step(id="broken", title="A step that fails (selftest)", stage="host",
                          run=["trace_tui.stages.selftest", "fail"]))
    if host_step:
        steps.append(Step(id="report", title="Report (selftest)", stage="host",
                          run=["trace_tui.stages.selftest", "whoami"]))
    ms = [LocalModel(id=m, label=m, store_entry=f"local:model/{m}") for m in models]
    recipe = Recipe(name=name, title="TUI test recipe", purpose="Exercise the run screen with the real engine",
                    canonical=False, selection={"suite": "demo"}, local_models=ms,
                    demo_tasks=[{"key": k, "rows": n} for k, n in benchmarks.items()], steps=steps)
    slices = [SliceKey(model=m, seed=s, benchmark=b) for m in models for s in seeds for b in benchmarks]
    data = {"recipe": recipe.model_dump(mode="json"), "seeds": list(seeds), "benchmarks": benchmarks}
    sha = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()  # names the run, as it always has
    refs = [BenchmarkRef(key=k, rows=n) for k, n in benchmarks.items()]
    # the configuration's hash as trace_tui.recipe.catalog computes it: `verify --campaign` recomputes it from recipe.json
    config = sha256_json(config_data(recipe, "demo", None, ms, list(seeds), refs, {"max_tokens": 8}, None, {}))
    return ResolvedRecipe(recipe=recipe, suite="demo", models=ms, seeds=list(seeds), benchmarks=refs,
                          settings={"max_tokens": 8}, slices=slices,
                          rows_total=sum(benchmarks[s.benchmark] for s in slices),
                          config_sha256=config, run_tag=f"{name}-{sha[:12]}")
