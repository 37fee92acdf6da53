"""The GPU plan (trace_tui.gpu_plan.gpu_plan): groups = GPUs // tp, every slice exactly once, rows balanced."""

from __future__ import annotations

from collections import Counter

import fake_nvml
from test_hardware_nvml import report_for

from trace_tui.gpu_plan import gpu_groups_env, gpu_plan
from trace_tui.recipe.catalog import resolve_recipe


def test_paper_matrix_on_8x_h100_is_8_balanced_groups():
    r = resolve_recipe("full")
    plan = gpu_plan(r, report_for("8xh100"))
    assert [g.gpus for g in plan] == [[i] for i in range(8)]
    assert gpu_groups_env(plan) == "0 1 2 3 4 5 6 7"
    dealt = [s for g in plan for s in g.slices]
    assert len(dealt) == 576 and set(dealt) == set(r.slices)  # every slice exactly once
    rows = [g.rows for g in plan]
    assert sum(rows) == 787_320 and max(rows) / min(rows) < 1.01
    assert all(len({s.model for s in g.slices}) == 8 for g in plan)  # every model on every group


def test_validation_gives_each_model_its_own_group():
    plan = gpu_plan(resolve_recipe("validation"), report_for("8xh100"))
    assert [len(g.slices) for g in plan] == [1] * 8
    assert len({g.slices[0].model for g in plan}) == 8


def test_7b_on_24gb_gpus_uses_tp_2():
    spec = fake_nvml.FakeMachine(gpus=[fake_nvml.MACHINES["rtx4090"].gpus[0]] * 4)
    from test_hardware_nvml import docker_ok

    from trace_tui.hardware import DiskStatus, HardwareReport, probe_gpus

    rep = HardwareReport(home="/h", gpu=probe_gpus(fake_nvml.build(spec)), docker=docker_ok(),
                         disk=DiskStatus(path="/h", free_bytes=10**13, total_bytes=10**13))
    plan = gpu_plan(resolve_recipe("full", models=["qwen2.5-vl-7b-base"], seeds=[42]), rep)
    assert [g.gpus for g in plan] == [[0, 1], [2, 3]] and gpu_groups_env(plan) == "0,1 2,3"
    plan3b = gpu_plan(resolve_recipe("full", models=["qwen2.5-vl-3b-base"], seeds=[42]), rep)
    assert [g.gpus for g in plan3b] == [[0], [1], [2], [3]]


def test_no_plan_without_suitable_gpus_and_cpu_plan_for_the_demo():
    assert gpu_plan(resolve_recipe("full"), report_for("none")) == []
    assert gpu_plan(resolve_recipe("full"), report_for("rtx4090")) == []
    demo = gpu_plan(resolve_recipe("demo"), report_for("none"))
    assert len(demo) == 1 and demo[0].gpus == [] and demo[0].spec == "cpu" and demo[0].rows == 32
    assert gpu_plan(resolve_recipe("smoke-3b"), report_for("8xh100")) == []  # nothing to deal


def test_mig_gpus_are_left_out_of_groups():
    spec = fake_nvml.FakeMachine(gpus=[fake_nvml.MACHINES["a100-mig"].gpus[0],
                                       fake_nvml.MACHINES["8xh100"].gpus[0], fake_nvml.MACHINES["8xh100"].gpus[1]])
    from test_hardware_nvml import docker_ok

    from trace_tui.hardware import DiskStatus, HardwareReport, probe_gpus

    rep = HardwareReport(home="/h", gpu=probe_gpus(fake_nvml.build(spec)), docker=docker_ok(),
                         disk=DiskStatus(path="/h", free_bytes=10**13, total_bytes=10**13))
    plan = gpu_plan(resolve_recipe("validation"), rep)
    assert [g.gpus for g in plan] == [[1], [2]]
    assert Counter(len(g.slices) for g in plan) == Counter({4: 2})
