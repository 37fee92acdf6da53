"""tests/gpu/gpu_check.py, the GPU check a maintainer runs, checked where there is no GPU: its arguments,
its summary, and its plan and nvidia-smi parts run for real (NVML faked at the pynvml edge; this machine
has no nvidia-smi, which the hw part must say). Its generate and train parts need a GPU to mean anything;
`--device cpu` runs them here by hand (not in the suite: a minute of CPU each)."""

from __future__ import annotations

import importlib.util
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
SCRIPT = TESTS / "gpu" / "gpu_check.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_arguments():
    m = _module()
    assert m.parse_args([]).parts == ["hw", "generate", "train", "plan"]
    assert m.parse_args(["--only", "plan, hw"]).parts == ["plan", "hw"]
    for bad in (["--only", "gpu"], ["--only", ","], ["--rows", "0"], ["--device", "tpu"]):
        with pytest.raises(SystemExit) as exc:
            m.parse_args(bad)
        assert exc.value.code == 2, bad


def test_the_summary_names_each_part_and_fails_when_one_does():
    m = _module()
    results = [
        {"part": "hw", "ok": True, "summary": "trace-tui hw agrees with nvidia-smi on 1 GPU(s)", "seconds": 2.0},
        {"part": "generate", "ok": True, "rows": 8, "device": "NVIDIA H200", "dtype": "bfloat16",
         "seconds_per_row": 0.125, "peak_gpu_memory_gib": 1.5, "same_responses": True, "seconds": 20.0},
        {"part": "train", "ok": False, "error": "ran past its 150 s limit", "seconds": 150.0},
        {"part": "plan", "ok": True, "gpus": "1 GPU", "plans": {"smoke-7b": ["train: trainer, 1 group"]},
         "seconds": 1.0},
    ]
    text, ok = m.summarize(results, machine="1 GPU")
    assert not ok and text.splitlines()[0] == "trace-tui GPU check on 1 GPU"
    assert "  generate  PASS  8 rows x2 on NVIDIA H200 (bfloat16): 0.125 s/row, peak 1.50 GiB, " \
           "same responses twice: yes  (20.0 s)" in text
    assert "  train     FAIL  ran past its 150 s limit  (150.0 s)" in text
    assert "smoke-7b: train: trainer, 1 group" in text and text.endswith("overall: FAIL (3/4 parts)")
    assert m.summarize([r for r in results if r["part"] != "train"])[1] is True
    assert m.summarize([])[1] is False


def test_the_script_runs_its_plan_and_hw_parts(tmp_path):
    env = {**os.environ, "TRACE_TUI_FAKE_NVML": "8xrtx4090", "TRACE_TUI_HOME": str(tmp_path / "home"),
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, str(SCRIPT), "--only", "plan,hw", "--json", "--work", str(tmp_path / "w")],
                         env=env, capture_output=True, text=True, timeout=300)
    data = json.loads(out.stdout)
    assert out.returncode == 1 and data["ok"] is False  # no nvidia-smi here
    parts = {p["part"]: p for p in data["parts"]}
    assert parts["plan"]["ok"] and parts["plan"]["gpus"] == "8 GPUs"
    for name in ("validation", "full", "smoke-3b", "smoke-7b"):
        assert parts["plan"]["plans"][name] == run_plan(resolve_recipe(name), report_for("8xrtx4090")).lines()
    assert not parts["hw"]["ok"] and "nvidia-smi not found" in parts["hw"]["error"]
