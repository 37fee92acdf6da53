"""Runtime settings the GPU stages need: shared memory and CUDA's device order for GPU containers,
the release's vLLM engine settings for the judge, the chat template from the VL model's processor.

No GPU runtime exists on this machine: the container test sends a real GPU launch to the real engine
(which refuses it) and records what was asked of it at the narrowest edge, `containers.create`.
vLLM cannot run without CUDA: the backend tests replace the `vllm` module (LLM records its arguments);
the same calls are checked against the real vLLM 0.10.2 inside the gpu infer image by
tests/test_gpu_images.py (`make test-gpu-images`).
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
from test_engine_docker import IMAGES, docker_image, labelled  # noqa: F401  (docker_image: the fixture)

from trace_tui.runtime.docker import GPU_ENV, gpu_container_settings


def test_gpu_containers_get_their_own_large_shm_and_cpu_ones_nothing():
    assert gpu_container_settings([]) == {}
    assert gpu_container_settings([0]) == {"shm_size": "16g"}
    assert gpu_container_settings(list(range(8))) == {"shm_size": "64g"}
    assert GPU_ENV == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


@pytest.mark.docker
@pytest.mark.slow
def test_a_gpu_launch_asks_docker_for_shm_and_the_pci_device_order(docker_image: str, tmp_path: Path,
                                                                    monkeypatch) -> None:
    from docker.models.containers import ContainerCollection

    from trace_tui.engine.campaign import Campaign
    from trace_tui.errors import RequirementsError
    from trace_tui.runtime.base import LABEL_CAMPAIGN, Launch
    from trace_tui.runtime.docker import DockerRuntime

    runtime = DockerRuntime(images=IMAGES)
    asked: dict = {}
    real_create = ContainerCollection.create

    def create(self, image, command=None, **kwargs):
        asked.update(kwargs)
        return real_create(self, image, command, **kwargs)

    monkeypatch.setattr(ContainerCollection, "create", create)
    with Campaign(tmp_path / "c") as c:
        job_dir = c.path / "jobs/g/_step"
        job_dir.mkdir(parents=True)
        (job_dir / "job.json").write_text('{"step": "g", "output_dir": "outputs/g/_step"}')
        launch = Launch(step="g", slice="_step", module="trace_tui.stages.selftest", args=["whoami"], job_dir=job_dir,
                        campaign=c.path, store=tmp_path / "store", log_path=c.path / "logs/g.log", image="infer",
                        gpus=[0, 1], labels={LABEL_CAMPAIGN: c.id}, output_dir=c.path / "outputs/g/_step")
        with pytest.raises(RequirementsError):
            runtime.start(launch)
        assert labelled(c.id) == []
    assert asked["shm_size"] == "16g"
    assert "ipc_mode" not in asked
    assert asked["environment"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def _fake_vllm(monkeypatch, seen: dict, cpu: bool = False) -> None:
    """vLLM's CUDA build (or, with ``cpu``, its CPU build as its platform detection reports it)."""
    class LLM:
        def __init__(self, **kw):
            seen["init"] = kw

        def generate(self, prompts, sampling_params=None, use_tqdm=True):
            seen["prompts"] = prompts
            return [types.SimpleNamespace(outputs=[types.SimpleNamespace(text='{"answer": 1}')]) for _ in prompts]

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM, SamplingParams=lambda **kw: kw))
    platform = types.SimpleNamespace(is_cpu=lambda: cpu)
    monkeypatch.setitem(sys.modules, "vllm.platforms", types.SimpleNamespace(current_platform=platform))


def test_the_judge_is_served_with_the_release_engine_settings(monkeypatch, tmp_path, tiny_qwen25vl_dir) -> None:
    import shutil

    from trace_tui.release import release_lock
    from trace_tui.stages.extract import JudgeClient

    judge_dir = tmp_path / "judge"
    shutil.copytree(tiny_qwen25vl_dir, judge_dir)
    cfg = json.loads((judge_dir / "config.json").read_text())
    cfg.pop("vision_config")
    (judge_dir / "config.json").write_text(json.dumps(cfg))
    seen: dict = {}
    _fake_vllm(monkeypatch, seen)
    JudgeClient(judge_dir, "vllm", gpus=2)([{"role": "user", "content": "hi"}], 128)
    pin = release_lock().judge.vllm
    assert (pin.max_model_len, pin.gpu_memory_utilization) == (8192, 0.9)
    assert seen["init"]["max_model_len"] == 8192
    assert seen["init"]["gpu_memory_utilization"] == 0.9
    assert seen["init"]["tensor_parallel_size"] == 2
    assert seen["init"]["generation_config"] == pin.generation_config == "vllm"


def test_on_cpu_the_engine_gets_what_vllms_cpu_build_needs(monkeypatch, tiny_qwen25vl_dir) -> None:
    """The same backend on vLLM's CPU build: float32, eager, native ops, no prefill split; the GPU path
    (above) gets none of these."""
    from trace_tui.stages.backends import build_backend
    from trace_tui.stages.backends.vllm_backend import CPU_MAX_NUM_SEQS

    seen: dict = {}
    _fake_vllm(monkeypatch, seen, cpu=True)
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    build_backend("vllm", str(tiny_qwen25vl_dir), min_pixels=3136, max_pixels=50176)
    init = seen["init"]
    assert (init["dtype"], init["enforce_eager"], init["compilation_config"]) == \
        ("float32", True, {"custom_ops": ["none"]})
    assert init["max_num_batched_tokens"] == CPU_MAX_NUM_SEQS * init["max_model_len"]


def test_generation_leaves_unpinned_engine_settings_to_vllm(monkeypatch, tiny_qwen25vl_dir) -> None:
    from trace_tui.stages.backends import build_backend

    seen: dict = {}
    _fake_vllm(monkeypatch, seen)
    build_backend("vllm", str(tiny_qwen25vl_dir), min_pixels=3136, max_pixels=50176)
    assert "gpu_memory_utilization" not in seen["init"] and "max_model_len" not in seen["init"]


def test_vllm_renders_image_prompts_with_the_processors_chat_template(monkeypatch, tiny_qwen25vl_dir) -> None:
    """The prompt vLLM gets is exactly the transformers backend's rendering (the processor's template)."""
    from PIL import Image

    from trace_tui.stages.backends import Request, Sampling, build_backend
    from trace_tui.stages.backends.transformers_backend import load_processor

    seen: dict = {}
    _fake_vllm(monkeypatch, seen)
    b = build_backend("vllm", str(tiny_qwen25vl_dir), min_pixels=3136, max_pixels=50176)
    msgs = [{"role": "system", "content": "S"},
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Q"}]}]
    b.generate([Request(messages=msgs, images=[Image.new("RGB", (64, 64))], sampling=Sampling(temperature=0.0))])
    processor = load_processor(str(tiny_qwen25vl_dir), min_pixels=3136, max_pixels=50176)
    assert b.processor is not None
    assert seen["prompts"][0]["prompt"] == processor.apply_chat_template(msgs, tokenize=False,
                                                                         add_generation_prompt=True)
