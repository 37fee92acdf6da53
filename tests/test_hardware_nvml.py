"""GPU probe and per-step verdicts on realistic machines.

NVML cannot see a GPU here, so it is faked at the narrowest edge: tests/fake_nvml.py
exposes pynvml's functions and raises pynvml's real exception classes with
the real error codes (see its docstring). Everything above that edge —
trace_tui.hardware.probe_gpus, check_recipe, the GPU plan — is the real code.
The Docker part of the report comes from the real engine in test_hardware_docker.py;
here it is a plain model so the verdicts are about GPUs alone.
"""

from __future__ import annotations

import fake_nvml
import pynvml
import pytest

from trace_tui.hardware import (
    GIB,
    DiskStatus,
    DockerStatus,
    HardwareReport,
    ImageStatus,
    check_recipe,
    probe_gpus,
    worst,
)
from trace_tui.recipe.catalog import resolve_recipe


def docker_ok(flavor: str = "gpu", runtime: str | None = "nvidia") -> DockerStatus:
    return DockerStatus(status="ok", message="Docker 27.3.1", version="27.3.1", gpu_runtime=runtime, lock_status="ok",
                        lock_flavor=flavor, lock_message="image lock",
                        images=[ImageStatus(name=n, status="present", tag=f"trace-tui/{n}:0.1.0-{flavor}",
                                            locked_id="sha256:" + "ab" * 32, found_id="sha256:" + "ab" * 32,
                                            message="as locked") for n in ("train", "infer", "score")])


def report_for(machine: str, *, docker: DockerStatus | None = None, free_gib: float = 2000) -> HardwareReport:
    return HardwareReport(home="/srv/trace-tui", gpu=probe_gpus(fake_nvml.machine(machine)),
                          docker=docker or docker_ok(),
                          disk=DiskStatus(path="/srv/trace-tui", free_bytes=int(free_gib * GIB),
                                          total_bytes=int(4000 * GIB)))


def checks(recipe: str, machine: str, **kw) -> dict[str, object]:
    return {c.step: c for c in check_recipe(resolve_recipe(recipe), report_for(machine, **kw))}


def test_8x_h100_reads_every_field():
    nvml = fake_nvml.machine("8xh100")
    s = probe_gpus(nvml)
    assert s.status == "ok" and s.message == "8 GPUs"
    assert s.driver_version == "570.124.06" and s.cuda_driver_version == "12.8"
    assert [g.index for g in s.gpus] == list(range(8))
    g = s.gpus[0]
    assert g.name == "NVIDIA H100 80GB HBM3" and g.uuid.startswith("GPU-")
    assert g.memory_total_bytes == 81559 * 2**20 and g.memory_free_bytes == (81559 - 556) * 2**20
    assert g.compute_capability == "9.0" and g.mig_mode == "disabled"
    assert g.ecc_volatile_uncorrected == 0 and g.nvlink_links_up == 18
    assert nvml.calls == {"init": 1, "shutdown": 1}  # NVML is always shut down again


def test_rtx_4090_has_no_mig_ecc_or_nvlink():
    g = probe_gpus(fake_nvml.machine("rtx4090")).gpus[0]
    assert (g.compute_capability, g.mig_mode, g.ecc_volatile_uncorrected, g.nvlink_links_up) == ("8.9", "n/a", None, 0)
    assert round(g.memory_total_gib, 2) == 23.99
    assert probe_gpus(fake_nvml.machine("rtx4090")).cuda_driver_version == "12.4"


def test_a100_with_mig_on():
    g = probe_gpus(fake_nvml.machine("a100-mig")).gpus[0]
    assert g.mig_mode == "enabled" and g.nvlink_links_up == 12


@pytest.mark.parametrize("machine, status, words", [
    ("none", "no_driver", "no NVIDIA driver"),
    ("mismatch", "driver_mismatch", "driver/library version mismatch"),
    ("zero", "no_devices", "reports 0 GPUs"),
])
def test_statuses_not_errors(machine, status, words):
    s = probe_gpus(fake_nvml.machine(machine))
    assert s.status == status and words in s.message and s.gpus == []


def test_the_real_pynvml_here_reports_no_driver():
    """This machine has no driver: the real binding raises NVMLError_LibraryNotFound, which is a status."""
    s = probe_gpus(pynvml)
    assert s.status == "no_driver"


def test_an_unexpected_nvml_error_on_a_device_is_a_status():
    nvml = fake_nvml.machine("8xh100")

    def broken(handle):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)

    nvml.nvmlDeviceGetName = broken
    s = probe_gpus(nvml)
    assert s.status == "error" and "GPU 0" in s.message and nvml.calls["shutdown"] == 1


def test_full_on_8x_h100_passes_the_gpu_checks():
    c = checks("full", "8xh100")
    assert c["generate"].verdict == "pass", c["generate"]
    assert "8 7B model endpoints on 8 GPUs (tp 1)" in c["generate"].reason
    assert c["score"].verdict == "pass" and "judge endpoint" in c["score"].reason
    assert worst(list(c.values())) == "pass"


def test_full_on_a_4090_fails_with_the_requirement_in_one_line():
    c = checks("full", "rtx4090")
    assert c["generate"].verdict == "fail"
    assert c["generate"].reason == ("needs 1 GPU with >= 40 GiB per 7B model endpoint (or 2 GPUs with >= 24 GiB); "
                                    "found 1x NVIDIA GeForce RTX 4090 24 GiB")
    assert c["score"].verdict == "fail" and c["score"].reason.startswith("needs 1 GPU with >= 80 GiB per judge endpoint")


def test_3b_generation_fits_a_4090_and_3b_training_does_not():
    r = resolve_recipe("validation", models=["qwen2.5-vl-3b-base", "trace-qwen2.5-vl-3b"])
    c = {x.step: x for x in check_recipe(r, report_for("rtx4090"))}
    assert c["generate"].verdict == "pass" and "(tp 1)" in c["generate"].reason
    assert checks("smoke-3b", "rtx4090")["train"].reason.startswith("needs 1 GPU with >= 55 GiB per 3B GRPO trainer")
    assert checks("smoke-3b", "8xh100")["train"].verdict == "pass"


def test_smoke_7b_needs_one_gpu_larger_than_an_h100():
    """The one-process smoke step does not shard: 7B needs more than one 80 GiB H100 holds."""
    c = checks("smoke-7b", "8xh100")["train"]
    assert c.verdict == "fail" and "needs 1 GPU with >= 98 GiB per 7B GRPO trainer" in c.reason


def test_mig_gpus_are_not_used_and_say_why():
    c = checks("validation", "a100-mig")["generate"]
    assert c.verdict == "fail" and "(MIG)" in c.reason
    assert any("MIG enabled" in n for n in c.notes)


def test_old_gpus_without_bf16_fail_on_compute_capability():
    c = checks("validation", "t4")["generate"]
    assert c.verdict == "fail" and "cc 7.5 < 8.0" in c.reason


def test_two_a100_40gb_host_the_judge_with_tp_2():
    c = checks("full", "2xa100-40gb")
    assert c["generate"].verdict == "pass" and c["score"].verdict == "pass"
    assert "tp 2" in c["score"].reason


def test_ecc_errors_warn():
    c = checks("validation", "h100-ecc")["generate"]
    assert c.verdict == "warn" and "uncorrectable ECC" in c.reason


@pytest.mark.parametrize("machine", ["none", "mismatch", "zero"])
def test_no_usable_gpu_fails_gpu_steps_and_not_host_or_cpu_steps(machine):
    c = checks("full", machine)
    assert c["generate"].verdict == "fail" and "found none" in c["generate"].reason
    assert c["summary"].verdict == "pass"
    assert worst(check_recipe(resolve_recipe("demo"), report_for(machine, docker=docker_ok("cpu", None)))) == "pass"


def test_gpu_steps_need_a_gpu_runtime_and_the_gpu_image_flavour():
    c = checks("full", "8xh100", docker=docker_ok("gpu", None))["generate"]
    assert c.verdict == "fail" and "no GPU runtime" in c.reason
    c = checks("full", "8xh100", docker=docker_ok("cpu", "nvidia"))["generate"]
    assert c.verdict == "fail" and "cpu flavour" in c.reason
    assert checks("validation", "8xh100", docker=docker_ok("cpu", "nvidia"))["score"].verdict == "pass"


def test_images_not_built_or_different():
    d = docker_ok()
    imgs = [i.model_copy(update={"status": "not_built", "message": "not built: no image lock (run `make appliance`)"})
            if i.name == "infer" else
            i.model_copy(update={"status": "different", "message": "trace-tui/score:x is sha256:1 but the lock ..."})
            for i in d.images]
    c = checks("full", "8xh100", docker=d.model_copy(update={"images": imgs}))
    assert c["generate"].verdict == "fail" and "image infer not built" in c["generate"].reason
    assert "make appliance" in c["generate"].reason
    assert c["score"].verdict == "warn" and c["score"].reason.startswith("image score:")
    c = checks("full", "8xh100", docker=DockerStatus(status="unreachable", message="Docker engine not reachable (x)"))
    assert c["generate"].verdict == "fail" and "not reachable" in " ".join(c["generate"].notes)


def test_local_runtime_skips_image_checks():
    r = resolve_recipe("demo")
    rep = report_for("none", docker=DockerStatus(status="unreachable", message="Docker engine not reachable"))
    assert worst(check_recipe(r, rep)) == "fail"
    assert worst(check_recipe(r, rep, runtime="local")) == "pass"


def test_disk_against_the_recipe():
    c = checks("eval-setup", "8xh100", free_gib=100)["fetch-eval"]
    assert c.verdict == "fail" and c.reason == "needs 250 GiB free under /srv/trace-tui; 100.0 GiB free"
    assert checks("eval-setup", "8xh100", free_gib=300)["fetch-eval"].verdict == "pass"


def test_fake_machines_from_the_environment(monkeypatch):
    """TRACE_TUI_FAKE_NVML lets a separate app process (TUI end-to-end tests) see a fake machine."""
    from trace_tui.hardware import probe_gpus as probe

    monkeypatch.setenv("TRACE_TUI_FAKE_NVML", "8xh100")
    assert probe().message == "8 GPUs"


def test_disk_needs_add_up_over_the_steps():
    c = checks("full", "8xh100", free_gib=22)
    assert c["generate"].verdict == "pass"  # 20 GiB
    assert c["score"].verdict == "fail" and "(25 GiB with the earlier steps)" in c["score"].reason


def test_disk_probe_does_not_create_home(tmp_path):
    from trace_tui.hardware import probe_disk

    d = probe_disk(tmp_path / "not" / "yet")
    assert d.free_bytes > 0 and d.path == str(tmp_path / "not" / "yet") and not (tmp_path / "not").exists()
