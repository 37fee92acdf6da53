"""tests/gpu/check_hw_against_nvidia_smi.py, exercised without a GPU.

The script is meant for a real GPU machine. Here both of its sources are
stand-ins that describe the same 8x H100 machine: trace-tui reads the fake
NVML machine (TRACE_TUI_FAKE_NVML), and a stand-in `nvidia-smi` on PATH prints
what the real tool prints for it. This checks the script's parsing and
comparison logic; agreement with real hardware is what the script itself checks.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import fake_nvml

TESTS = Path(__file__).resolve().parent
SCRIPT = TESTS / "gpu" / "check_hw_against_nvidia_smi.py"


def _fake_smi(bin_dir: Path, *, total_mib: int = 81559) -> None:
    m = fake_nvml.MACHINES["8xh100"]
    rows = "\n".join(f"{i}, {g.name}, {g.uuid}, {total_mib}, {g.memory_mib - g.used_mib}, 9.0, Disabled, 0, {m.driver}"
                     for i, g in enumerate(m.gpus))
    links = "\n".join(f"\t Link {k}: 26.562 GB/s" for k in range(18))
    script = f"""#!/bin/sh
case "$1" in
  --query-gpu=*) printf '%s\\n' "{rows}" ;;
  nvlink) printf 'GPU $5: NVIDIA H100 80GB HBM3\\n{links}\\n' ;;
  *) echo "| NVIDIA-SMI {m.driver}   Driver Version: {m.driver}   CUDA Version: 12.8 |" ;;
esac
"""
    p = bin_dir / "nvidia-smi"
    p.write_text(script)
    p.chmod(p.stat().st_mode | stat.S_IEXEC)


def _run(tmp_path: Path, **kw) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_smi(bin_dir, **kw)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "TRACE_TUI_FAKE_NVML": "8xh100",
           "TRACE_TUI_HOME": str(tmp_path / "home"), "PYTHONPATH": str(TESTS)}
    return subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=120)


def test_agreement(tmp_path):
    out = _run(tmp_path)
    assert out.returncode == 0, out.stderr
    assert "agrees with nvidia-smi on 8 GPU(s), driver 570.124.06, CUDA 12.8" in out.stdout


def test_a_difference_is_reported(tmp_path):
    out = _run(tmp_path, total_mib=81920)
    assert out.returncode == 1 and "GPU 0 memory.total MiB: trace-tui 81559 != nvidia-smi 81920" in out.stderr


def test_without_nvidia_smi(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}
    out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 2 and "nvidia-smi not found" in out.stderr
