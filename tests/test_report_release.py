"""`trace-tui report --release-dir` on damaged release files: one line, exit 1 (as `verify` fails the same file).

README's exit codes: 2 for usage and a directory that is not a release; 1 for a check that failed, the
line naming the file. A release whose results.json is cut, ill-typed or holds NaN is a release with a
file that fails its check: `verify` exits 1 for it, and so does `report`, with verify's words.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from test_verify_release import RESULTS, copy_release
from trace_tui.verify.release import verify_release

VALIDATION = "rlvr/evaluation/trace_validation/results.v1.json"


@pytest.fixture
def release_copy(tmp_path: Path) -> Path:
    return copy_release(tmp_path / "release")


def report(release: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trace_tui", "report", "--release-dir", str(release)],
                          capture_output=True, text=True, timeout=60)


def error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 1 and proc.stdout == "", (proc.returncode, proc.stdout[-500:], proc.stderr)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_a_nan_score_is_one_line_without_the_hash_warning(release_copy: Path) -> None:
    path = release_copy / RESULTS
    data = json.loads(path.read_text())
    data["scores"]["benchmark_scores"][0]["score"] = float("nan")
    path.write_text(json.dumps(data))
    line = error_line(report(release_copy))
    assert line.startswith(f"trace-tui: error: {RESULTS}: results.complete: score ")
    assert "nan is not a percentage" in line


def test_deeply_nested_validation_results_are_one_line(release_copy: Path) -> None:
    (release_copy / VALIDATION).write_text("[" * 200_000 + "]" * 200_000)
    line = error_line(report(release_copy))
    assert line.startswith(f"trace-tui: error: {VALIDATION}: report: nested too deeply to be a release document")


def test_an_ill_typed_results_json_fails_report_as_it_fails_verify(release_copy: Path) -> None:
    path = release_copy / RESULTS
    data = json.loads(path.read_text())
    data["scores"]["benchmark_scores"][3]["score"] = "41.2"
    path.write_text(json.dumps(data))
    doc = next(c for c in verify_release(release_copy).failed if c.id == f"document:{RESULTS}")
    line = error_line(report(release_copy))
    assert line.startswith(f"trace-tui: error: {RESULTS}: report: {doc.message} ("), (line, doc.message)
