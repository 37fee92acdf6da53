"""A campaign handed over runs nothing, writes nowhere else, and launders no tampered row: the runner's side.

Real runs of the selftest, generate and extract workers on the local runtime, real links,
real batch scripts run by bash; no fakes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _plant_trace_tui(folder: Path, marker: Path) -> None:
    """A trace_tui/ package in FOLDER that leaves MARKER when imported."""
    pkg = folder / "trace_tui"
    pkg.mkdir(parents=True)
    payload = f"open({str(marker)!r}, 'a').write('ran\\n')\n"
    (pkg / "__init__.py").write_text(payload)
    (pkg / "__main__.py").write_text(payload)


def test_slurm_scripts_never_import_a_trace_tui_folder_from_where_they_were_submitted(tmp_path: Path) -> None:
    """A batch job starts in the submission folder; `python3 -m trace_tui` there imported a trace_tui/
    planted in it. The generated merge script, run by bash from such a folder, runs the installed one."""
    camp = tmp_path / "c"
    done = subprocess.run([sys.executable, "-m", "trace_tui", "--home", str(tmp_path / "home"), "--recipe", "demo",
                           "--scheduler", "slurm", "--dry-run", "--campaign", str(camp)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    submit = tmp_path / "submitted-from"
    marker = tmp_path / "planted-code-ran"
    _plant_trace_tui(submit, marker)
    env = {**os.environ, "SLURM_JOB_ID": "7", "PYTHONPATH": ""}
    run = subprocess.run(["bash", str(camp / "slurm" / "merge.sbatch")], cwd=submit, env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert not marker.exists(), "a trace_tui/ in the submission folder ran in the batch job"
    # the installed trace-tui ran: the merge refuses the unstarted shards in one line
    assert "has not started" in run.stderr + run.stdout, run.stderr
