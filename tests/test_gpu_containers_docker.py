"""What each step's container asks the real Docker engine for, on the machines users have.

The engine here has no GPU and no NVIDIA runtime, so a GPU container is created with its
device request and then refused at start; the runtime removes it and says why. Two narrow
edges are not real: NVML (tests/fake_nvml.py machines) and, to present an engine with the
nvidia runtime or with CDI specs, the `docker info` answer (the client is otherwise the real
one, and every container is really created on the real engine; the recording proxy only
notes what `containers.create` was given).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import docker
import pytest
from test_engine_docker import IMAGES, docker_image, labelled  # noqa: F401 - the engine tests' image fixture
from test_hardware_nvml import report_for

from trace_tui.engine.campaign import Campaign
from trace_tui.engine.runner import Runner
from trace_tui.errors import RequirementsError
from trace_tui.gpu_plan import run_plan
from trace_tui.hardware import probe_docker
from trace_tui.recipe.catalog import resolve_recipe
from trace_tui.runtime.docker import DockerRuntime

pytestmark = [pytest.mark.docker, pytest.mark.slow]


class _Containers:
    def __init__(self, real: Any, created: list[dict[str, Any]]) -> None:
        self._real, self.created = real, created

    def create(self, image: str, command: Any = None, **kwargs: Any) -> Any:
        self.created.append({"image": image, "command": command, **kwargs})
        return self._real.create(image, command, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class EngineAs:
    """The real client, with `docker info` showing an nvidia runtime, CDI specs, or (None) as it is."""

    def __init__(self, gpu: str | None, cdi_dir: Path) -> None:
        self._real = docker.from_env(timeout=60)
        self._gpu, self._cdi_dir = gpu, cdi_dir
        self.created: list[dict[str, Any]] = []
        self.containers = _Containers(self._real.containers, self.created)

    def info(self) -> dict[str, Any]:
        info = dict(self._real.info())
        if self._gpu == "nvidia":
            info["Runtimes"] = {**(info.get("Runtimes") or {}), "nvidia": {"path": "nvidia-container-runtime"}}
        elif self._gpu == "cdi":
            self._cdi_dir.mkdir(parents=True, exist_ok=True)
            (self._cdi_dir / "nvidia.yaml").write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\n")
            info["CDISpecDirs"] = [str(self._cdi_dir)]
        return info

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@pytest.mark.parametrize("gpu", ["nvidia", "cdi", None])
def test_the_runtime_check_and_the_hardware_check_agree(docker_image, tmp_path, gpu):  # noqa: F811
    """nvidia runtime or CDI: both checks pass; neither: both fail (the runtime used to demand nvidia)."""
    client = EngineAs(gpu, tmp_path / "cdi")
    seen = probe_docker(lambda: client, lock_path=tmp_path / "no-lock.json").gpu_runtime
    problems = DockerRuntime(client=client, images=IMAGES).check({"infer"}, gpus=True)
    assert seen == gpu
    assert any("no GPU runtime" in p for p in problems) == (gpu is None), problems


# machine, run, expected per GPU step: (device ids of the first container, GPU groups it reads, tp)
CASES = [
    ("8xrtx4090", ("full", {"models": ["qwen2.5-vl-7b-base"]}),
     {"generate": ([0, 1, 2, 3, 4, 5, 6, 7], [[0, 1], [2, 3], [4, 5], [6, 7]], 2),
      "score": ([0, 1, 2, 3, 4, 5, 6, 7], [[0, 1, 2, 3], [4, 5, 6, 7]], 4)}),
    ("4xl40s", ("validation", {"models": ["qwen2.5-vl-7b-base"]}),
     {"generate": ([0], [[0]], 1), "extract": ([0, 1], [[0, 1]], 2)}),
    ("mixed-80-24", ("full", {"models": ["qwen2.5-vl-3b-base"]}),
     {"generate": ([0, 1, 2, 3], [[0], [1], [2], [3]], 1), "score": ([0, 1], [[0], [1]], 1)}),
    ("1xh200", ("smoke-7b", {}), {"train": ([0], [[0]], 1)}),
]


@pytest.mark.parametrize("gpu", ["nvidia", "cdi"])
@pytest.mark.parametrize("machine,run,want", CASES, ids=[c[0] for c in CASES])
def test_each_steps_container_request_reaches_the_engine(docker_image, tmp_path, machine, run, want,  # noqa: F811
                                                         gpu):
    """The runner (with the run's plan) asks the real engine for exactly the plan's GPUs, by id (nvidia
    runtime) or as CDI devices; the job spec the container reads carries the groups and tp; the GPU-less
    engine refuses the start and nothing is left behind."""
    name, kw = run
    resolved = resolve_recipe(name, **kw)
    client = EngineAs(gpu, tmp_path / "cdi")
    runtime = DockerRuntime(client=client, images=IMAGES)
    with Campaign(tmp_path / "c") as c:
        runner = Runner(resolved, c, runtime, store=tmp_path / "store", plan=run_plan(resolved, report_for(machine)))
        for step in resolved.recipe.steps:
            if step.id not in want:
                assert runner.groups_for(step) == [[]] or not step.image
                continue
            devices, groups, tp = want[step.id]
            jobs = [j for j in runner.plan().jobs if j.step.id == step.id]
            # a keep_loaded step (the judge's extraction): one worker per group, its slices as a batch
            launch = (runner.launches.for_batch(jobs, runner.groups_for(step)[0], "_worker-0") if step.keep_loaded
                      else runner.launches.for_job(jobs[0], runner.groups_for(step)[0]))
            with pytest.raises(RequirementsError) as err:
                runtime.start(launch)
            assert "cannot give GPUs" in err.value.line()
            request = client.created[-1]["device_requests"][0]
            if gpu == "cdi":
                assert request["Driver"] == "cdi"
                assert request["DeviceIDs"] == [f"nvidia.com/gpu={d}" for d in devices]
            else:
                assert request["DeviceIDs"] == [str(d) for d in devices] and request["Capabilities"] == [["gpu"]]
            env = client.created[-1]["environment"]
            assert env["TRACE_TUI_JOB"] == "/job/job.json"
            for k, v in (step.env or {}).items():
                assert env[k] == v
            spec = json.loads((launch.job_dir / "job.json").read_text())
            if step.keep_loaded:
                assert spec["host_gpus"] == devices and spec["gpus"] == list(range(len(devices)))
                assert [x["slice"] for x in spec["batch"]] == [{"model": x.model, "seed": x.seed,
                                                                 "benchmark": x.benchmark} for x in jobs]
                spec = spec["batch"][0]
            assert spec["host_gpus"] == devices and spec["gpu_groups"] == groups and spec["tensor_parallel"] == tp
            assert spec["gpus"] == list(range(len(devices)))
        assert labelled(c.id) == []
