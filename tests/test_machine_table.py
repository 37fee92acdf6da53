"""The machines users have: what each step's containers are given, derived by hand.

Fake machines at the NVML edge only (tests/fake_nvml.py: pynvml's functions over
the memory nvidia-smi reports on such hosts); the real hardware report, the real
run plan (trace_tui.gpu_plan.run_plan), the real runner's job specs, preview, and
(in test_container_requests_through_the_docker_engine) the real Docker runtime
against the real engine.

How the golden values below follow from the requirements (trace_tui.hardware)
------------------------------------------------------------------------------
A GPU "meets" a nominal class C when it reports >= 0.97 C GiB, is not MIG-
partitioned and has compute capability >= 8.0. Reported memory: H200 140.4 GiB,
H100 79.65, A100-80 80.0, A100-40 40.0, L40S 44.99, RTX 4090 23.99, RTX 3090
24.0 GiB.

Generation (one vLLM endpoint per group): 3B needs tp 1 on >= 24 GiB; 7B needs
tp 1 on >= 40 GiB, else tp 2 on >= 24 GiB; a run with both sizes takes the
larger tp. Groups are tp consecutive eligible GPUs, as many as there are.
- 8x RTX 4090: 7B cannot take tp 1 (24 < 38.8) -> tp 2 -> "0,1 2,3 4,5 6,7";
  3B only -> tp 1 on all eight. 2x RTX 3090 likewise: 7B -> one group "0,1".
- mixed (2x 80 + 2x 24): 7B at tp 1 fits the two 80 GiB cards (the first option
  any two GPUs can host) -> "0 1"; 3B only -> all four at tp 1 "0 1 2 3".
- the MIG-partitioned H100 hosts nothing whole: refused.

Judge (Qwen3-32B; trace_tui.gpu_plan.judge_tp_sizes / judge_fits): tp must divide
its 64 attention heads and 8 KV heads (1, 2, 4, 8); at vLLM's 0.90 memory
utilisation less 2 GiB per GPU, tp GPUs of M GiB must hold the 61.1 GiB bf16
weights plus 16,384 tokens of KV (2 x the 8,192-token context, 256 KiB/token =
4 GiB): tp x (0.9 M - 2) >= 65.1.
- H200: 1 x 124.4 -> tp 1.   H100: 1 x 69.7 -> tp 1.   A100-80: 1 x 70 -> tp 1.
- A100-40: 1 x 34 no; 2 x 34 = 68 -> tp 2.   L40S: 1 x 38.5 no; 2 x 38.5 -> tp 2.
- RTX 4090/3090: 2 x 19.6 = 39 no; 4 x 19.6 = 78 -> tp 4 (two 3090s: refused).
- mixed: tp 1 on the two 80 GiB cards -> "0 1" (the 24 GiB cards would need 4).

Smoke training (one process, one GPU; trace_tui.stages.train_profile): 3B needs
>= 55 GiB (53.35 reported), 7B >= 98 GiB (95.06 reported): only the H200 runs
7B; H200, H100 and the mixed box's first A100 run 3B; the rest refuse.

In a container GPUs are numbered from 0: a whole-step job (the release
evaluator) gets every GPU of its groups and GPU_GROUPS renumbered; a per-slice
job gets one group, seen as "0" or "0,1" (the judge's extraction keeps the judge
loaded: one container per judge group works through that group's slices).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_hardware_nvml import report_for

from trace_tui.gpu_plan import run_plan
from trace_tui.recipe.catalog import resolve_recipe

TESTS = Path(__file__).resolve().parent
THREE_B = ["qwen2.5-vl-3b-base", "trace-qwen2.5-vl-3b"]
SEVEN_B = ["qwen2.5-vl-7b-base", "trace-qwen2.5-vl-7b", "vero-qwen2.5-vl-7b", "game-rl-qwen2.5-vl-7b",
           "sphinx-qwen2.5-vl-7b", "pcgrpo-qwen2.5-vl-7b"]
RUNS = {
    "validation": ("validation", {}),
    "full": ("full", {}),
    "full-3b": ("full", {"models": THREE_B}),
    "full-7b": ("full", {"models": SEVEN_B}),
    "smoke-3b": ("smoke-3b", {}),
    "smoke-7b": ("smoke-7b", {}),
}
MACHINES = ["1xh200", "8xh100", "8xa100-40gb", "4xl40s", "8xrtx4090", "2xrtx3090", "mixed-80-24", "h100-mig"]

# step -> "host groups | GPU_GROUPS one container sees", "refused: <why>", or "-" (CPU / host).
ONE, EIGHT = "0", "0 1 2 3 4 5 6 7"
PAIRS8, QUADS8, PAIRS4 = "0,1 2,3 4,5 6,7", "0,1,2,3 4,5,6,7", "0,1 2,3"
R_GEN7, R_GEN3 = "refused: 7B model endpoint", "refused: 3B model endpoint"
R_JUDGE = "refused: judge endpoint (Qwen3-32B)"
R_TRAIN3, R_TRAIN7 = "refused: >= 55 GiB per 3B GRPO trainer", "refused: >= 98 GiB per 7B GRPO trainer"


def _full(gen: str, judge: str) -> dict[str, str]:
    """A whole-step job: one container, every group's GPUs, GPU_GROUPS as the groups renumbered from 0."""
    return {"generate": gen if gen.startswith("refused") else f"{gen} | {gen}",
            "score": judge if judge.startswith("refused") else f"{judge} | {judge}", "summary": "-"}


def _validation(gen: str, gen_one: str, judge: str, judge_one: str) -> dict[str, str]:
    """Per-slice jobs on one group each, which a container sees as 0..tp-1 (generation: one container per
    slice; the judge's extraction: one container per group serving its share of the slices in turn)."""
    return {"generate": gen if gen.startswith("refused") else f"{gen} | {gen_one}",
            "extract": judge if judge.startswith("refused") else f"{judge} | {judge_one}", "score": "-"}


def _train(groups: str) -> dict[str, str]:
    return {"train": groups if groups.startswith("refused") else f"{groups} | {groups}"}


GOLDEN: dict[str, dict[str, dict[str, str]]] = {
    "1xh200": {
        "validation": _validation(ONE, "0", ONE, "0"),
        "full": _full(ONE, ONE), "full-3b": _full(ONE, ONE), "full-7b": _full(ONE, ONE),
        "smoke-3b": _train("0"), "smoke-7b": _train("0"),
    },
    "8xh100": {
        "validation": _validation(EIGHT, "0", EIGHT, "0"),
        "full": _full(EIGHT, EIGHT), "full-3b": _full(EIGHT, EIGHT), "full-7b": _full(EIGHT, EIGHT),
        "smoke-3b": _train("0"), "smoke-7b": _train(R_TRAIN7),
    },
    "8xa100-40gb": {
        "validation": _validation(EIGHT, "0", PAIRS8, "0,1"),
        "full": _full(EIGHT, PAIRS8), "full-3b": _full(EIGHT, PAIRS8), "full-7b": _full(EIGHT, PAIRS8),
        "smoke-3b": _train(R_TRAIN3), "smoke-7b": _train(R_TRAIN7),
    },
    "4xl40s": {
        "validation": _validation("0 1 2 3", "0", PAIRS4, "0,1"),
        "full": _full("0 1 2 3", PAIRS4), "full-3b": _full("0 1 2 3", PAIRS4), "full-7b": _full("0 1 2 3", PAIRS4),
        "smoke-3b": _train(R_TRAIN3), "smoke-7b": _train(R_TRAIN7),
    },
    "8xrtx4090": {
        "validation": _validation(PAIRS8, "0,1", QUADS8, "0,1,2,3"),
        "full": _full(PAIRS8, QUADS8), "full-3b": _full(EIGHT, QUADS8), "full-7b": _full(PAIRS8, QUADS8),
        "smoke-3b": _train(R_TRAIN3), "smoke-7b": _train(R_TRAIN7),
    },
    "2xrtx3090": {
        "validation": _validation("0,1", "0,1", R_JUDGE, ""),
        "full": _full("0,1", R_JUDGE), "full-3b": _full("0 1", R_JUDGE), "full-7b": _full("0,1", R_JUDGE),
        "smoke-3b": _train(R_TRAIN3), "smoke-7b": _train(R_TRAIN7),
    },
    "mixed-80-24": {
        "validation": _validation("0 1", "0", "0 1", "0"),
        "full": _full("0 1", "0 1"), "full-3b": {**_full("0 1 2 3", "0 1")}, "full-7b": _full("0 1", "0 1"),
        "smoke-3b": _train("0"), "smoke-7b": _train(R_TRAIN7),
    },
    "h100-mig": {
        "validation": _validation(R_GEN7, "", R_JUDGE, ""),
        "full": _full(R_GEN7, R_JUDGE), "full-3b": _full(R_GEN3, R_JUDGE), "full-7b": _full(R_GEN7, R_JUDGE),
        "smoke-3b": _train(R_TRAIN3), "smoke-7b": _train(R_TRAIN7),
    },
}


def resolved(run: str):
    name, kw = RUNS[run]
    return resolve_recipe(name, **kw)


def observed(plan) -> dict[str, str]:
    out = {}
    for s in plan.steps:
        if s.refusal:
            out[s.step] = f"refused: {s.refusal}"
        elif not s.groups:
            out[s.step] = "-"
        else:
            out[s.step] = " ".join(",".join(map(str, g)) for g in s.groups) + " | " + s.gpu_groups_env()
    return out


def matches(golden: str, got: str) -> bool:
    # a refusal is matched on its reason's key words (the full line also lists what was found)
    if golden.startswith("refused: "):
        return got.startswith("refused: ") and golden.removeprefix("refused: ") in got
    return golden == got


@pytest.mark.parametrize("machine", MACHINES)
def test_the_machine_table(machine):
    """Every run on every machine gives each step exactly the hand-derived groups, tp and GPU_GROUPS."""
    report = report_for(machine)
    for run, want in GOLDEN[machine].items():
        got = observed(run_plan(resolved(run), report))
        assert set(got) == set(want), (machine, run, got)
        for step, golden in want.items():
            assert matches(golden, got[step]), (machine, run, step, golden, got[step])


def test_the_judge_tp_divides_its_heads_and_agrees_with_the_requirement_table():
    """The judge's own plan (from its memory need) and the hardware check's table say the same per card class."""
    from trace_tui.gpu_plan import JUDGE_ATTENTION_HEADS, JUDGE_KV_HEADS, judge_fits, judge_tp_sizes
    from trace_tui.hardware import REQUIREMENTS

    assert judge_tp_sizes() == [1, 2, 4, 8]
    assert all(JUDGE_ATTENTION_HEADS % tp == 0 and JUDGE_KV_HEADS % tp == 0 for tp in judge_tp_sizes())
    table = {o.min_gib: o.tp for o in REQUIREMENTS["judge"]["judge"].options}  # {80: 1, 40: 2, 24: 4}
    for gib, tp in table.items():
        reported = gib * 0.9995  # as drivers report the class (23.99 for 24)
        assert min(t for t in judge_tp_sizes() if judge_fits(t, reported)) == tp, gib
    assert not judge_fits(1, 48) and judge_fits(2, 44.99)  # an L40S needs two
    assert not judge_fits(2, 24.0) and judge_fits(4, 23.99)  # a 24 GiB card needs four


def test_the_runner_gives_the_containers_the_plan(tmp_path):
    """The runner's job specs (what each container reads) carry exactly the plan's devices, tp and groups."""
    from trace_tui.engine.campaign import Campaign
    from trace_tui.engine.runner import Runner
    from trace_tui.runtime.local import LocalRuntime

    for machine, run, step_id, want_devices, want_groups in [
        ("8xrtx4090", "full", "generate", [0, 1, 2, 3, 4, 5, 6, 7], [[0, 1], [2, 3], [4, 5], [6, 7]]),
        ("8xrtx4090", "full", "score", [0, 1, 2, 3, 4, 5, 6, 7], [[0, 1, 2, 3], [4, 5, 6, 7]]),
        ("4xl40s", "validation", "extract", [2, 3], [[0, 1]]),
        ("8xa100-40gb", "validation", "generate", [5], [[0]]),
        ("mixed-80-24", "full-3b", "score", [0, 1], [[0], [1]]),
        ("1xh200", "smoke-7b", "train", [0], [[0]]),
    ]:
        r = resolved(run)
        plan = run_plan(r, report_for(machine))
        with Campaign(tmp_path / f"{machine}-{run}") as c:
            runner = Runner(r, c, LocalRuntime(), plan=plan)
            step = next(s for s in r.recipe.steps if s.id == step_id)
            groups = runner.groups_for(step)
            gpus = next(g for g in groups if g == want_devices) if step.per_slice else groups[0]
            assert gpus == want_devices, (machine, run, step_id, groups)
            jobs = [j for j in runner.plan().jobs if j.step.id == step_id]
            if step.keep_loaded:  # one worker per group serves its slices: what it reads is its batch
                launch = runner.launches.for_batch(jobs, gpus, "_worker-0")
                batch = json.loads((launch.job_dir / "job.json").read_text())
                assert launch.gpus == batch["host_gpus"] == want_devices and len(batch["batch"]) == len(jobs)
                specs = batch["batch"]
            else:
                specs = [runner.launches.job_spec(jobs[0], gpus)]
            for spec in specs:
                assert spec["host_gpus"] == want_devices and spec["gpu_groups"] == want_groups, (machine, run, spec)
                assert spec["tensor_parallel"] == len(want_groups[0])


def _cli(*args: str, home: Path, machine: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRACE_TUI_HOME": str(home), "XDG_DATA_HOME": str(home.parent / "xdg"),
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
           "TRACE_TUI_FAKE_NVML": machine}
    return subprocess.run([sys.executable, "-m", "trace_tui", *args], capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.mark.parametrize("machine", MACHINES)
def test_preview_prints_the_plan_the_containers_receive(tmp_path, machine):
    """`trace-tui preview full` on each machine prints, per step, the same groups and GPU_GROUPS as the table."""
    out = _cli("preview", "--recipe", "full", "--json", home=tmp_path / "h", machine=machine)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    from trace_tui.gpu_plan import StepGpus

    got = observed(type("P", (), {"steps": [StepGpus.model_validate(s) for s in data["step_gpus"]]})())
    for step, golden in GOLDEN[machine]["full"].items():
        assert matches(golden, got[step]), (machine, step, golden, got[step])
    from trace_tui.preview import Preview

    text = Preview.model_validate(data).render_text()  # what `preview --recipe full` prints
    assert "Containers  what each step's containers are given" in text
    for s in data["step_gpus"]:
        assert StepGpus.model_validate(s).line() in text
    gen = GOLDEN[machine]["full"]["generate"]
    if not gen.startswith("refused"):
        assert data["gpu_groups"] == gen.split(" | ")[1]  # what the launcher's GPU_GROUPS will be


MACHINE_NAMES = {"1xh200": "1x H200 141 GB", "8xh100": "8x H100 80 GB", "8xa100-40gb": "8x A100 40 GB",
                 "4xl40s": "4x L40S 48 GB", "8xrtx4090": "8x RTX 4090 24 GB", "2xrtx3090": "2x RTX 3090 24 GB",
                 "mixed-80-24": "2x A100 80 GB + 2x RTX 4090", "h100-mig": "1x H100 80 GB, MIG on"}


def readme_row(machine: str) -> str:
    """The README's short machine table, from the real plan: per run, each GPU step as N x tp T, or refused."""
    report = report_for(machine)
    cells = []
    for run in RUNS:
        plan = run_plan(resolved(run), report)
        parts = ["no" if s.refusal else f"{len(s.groups)}x tp{s.tp}" for s in plan.steps if s.refusal or s.groups]
        cells.append(" · ".join(parts))
    return f"| {MACHINE_NAMES[machine]} | " + " | ".join(cells) + " |"


def test_the_readme_machine_table_is_the_plan():
    readme = (TESTS.parent / "README.md").read_text(encoding="utf-8")
    for machine in MACHINES:
        assert readme_row(machine) in readme, readme_row(machine)


def test_the_readme_requirement_rows_are_the_code():
    """The README's GPU requirement table says what trace_tui.hardware.REQUIREMENTS says (one truth)."""
    from trace_tui.hardware import REQUIREMENTS

    def cell(profile: str, scale: str) -> str:
        first, *rest = REQUIREMENTS[profile][scale].options
        text = f"{first.tp} GPU{'s' if first.tp > 1 else ''} >= {first.min_gib} GiB"
        return text + "".join(f", or {o.tp} >= {o.min_gib} GiB" for o in rest)

    readme = (TESTS.parent / "README.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:4]]
            for line in readme.splitlines() if line.startswith("| ") and line.count("|") >= 5}
    assert rows["generation (vLLM)"] == [cell("generate", "3B"), cell("generate", "7B")]
    assert rows["judge (Qwen3-32B)"] == [cell("judge", "judge")] * 2
    assert rows["smoke training (one GRPO step, TRL, one process on one GPU)"] == \
        [cell("train", "3B"), cell("train", "7B")]
