"""`trace-tui verify` and `trace-tui report` as a user runs them: exit codes, one-line failures, outputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trace_tui.cli import main
from test_verify_release import RELEASE_RECEIPTS, RESULTS, copy_release


@pytest.fixture
def release_copy(tmp_path: Path) -> Path:
    return copy_release(tmp_path / "release")


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_verify_real_release_exit_0(trace_release_dir: Path, capsys) -> None:
    code, out, err = run(["verify", "--release-dir", str(trace_release_dir)], capsys)
    assert code == 0, out + err
    assert "Files: 20 verified, 0 failed, 0 unverified, 120 absent (0 needed by the checks) of 140 known files" in out
    assert "ABSENT paper.pdf" in out
    assert "Result: OK" in out
    assert err == ""


def test_verify_strict_fails_on_absent_files(trace_release_dir: Path, capsys) -> None:
    code, out, _ = run(["verify", "--release-dir", str(trace_release_dir), "--strict"], capsys)
    assert code == 1
    assert "Result: FAILED" in out and "--strict fails on any absent file" in out


def test_verify_json_is_the_same_checklist(trace_release_dir: Path, capsys) -> None:
    code, out, _ = run(["verify", "--release-dir", str(trace_release_dir), "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["ok"] is True and data["exit_code"] == 0
    assert data["counts"]["files_verified"] == 20 and data["counts"]["files_absent"] == 120
    statuses = {c["status"] for c in data["checks"]}
    assert statuses == {"passed", "absent"}
    assert {"id", "file", "status", "expected", "actual", "message"} <= set(data["checks"][0])


def test_verify_report_dir_writes_json_and_markdown(trace_release_dir: Path, tmp_path: Path, capsys) -> None:
    out_dir = tmp_path / "out"
    code, _, _ = run(["verify", "--release-dir", str(trace_release_dir), "--report-dir", str(out_dir)], capsys)
    assert code == 0
    report = json.loads((out_dir / "report.json").read_text())
    assert report["counts"]["files_verified"] == 20
    md = (out_dir / "report.md").read_text()
    assert md.startswith("# trace-tui verify: OK")
    assert "| 3B | TRACE Qwen2.5-VL 3B | TRACE (synthetic) | 42.85 ± 0.39 | +3.51 ± 0.25 |" in md
    assert sorted(p.name for p in out_dir.iterdir()) == ["report.json", "report.md"]


def test_verify_flipped_byte_names_file_and_check(release_copy: Path, capsys) -> None:
    path = release_copy / RESULTS
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    code, out, _ = run(["verify", "--release-dir", str(release_copy)], capsys)
    assert code == 1
    summary = out.split("Result: FAILED", 1)[1]  # one line per failure: file, check, expected vs actual
    fail_lines = [ln.strip() for ln in summary.splitlines() if ln.strip()]
    assert fail_lines and all(ln.startswith(f"FAIL {RESULTS}: ") for ln in fail_lines)
    assert any(f"lock:{RESULTS}" in ln and "expected 569ea246" in ln for ln in fail_lines)


def test_verify_json_mode_puts_failures_on_stderr(release_copy: Path, capsys) -> None:
    (release_copy / RESULTS).write_text("not json")
    code, out, err = run(["verify", "--release-dir", str(release_copy), "--json"], capsys)
    assert code == 1
    assert json.loads(out)["failed_files"] == [RESULTS]
    lines = err.strip().splitlines()
    assert lines and all(ln.startswith(f"trace-tui: FAIL {RESULTS}: ") for ln in lines)
    assert any("not valid JSON" in ln for ln in lines)


def test_verify_missing_needed_file_exit_1(release_copy: Path, capsys) -> None:
    (release_copy / RELEASE_RECEIPTS).unlink()
    code, out, _ = run(["verify", "--release-dir", str(release_copy)], capsys)
    assert code == 1
    assert f"ABSENT {RELEASE_RECEIPTS}: needed by the checks" in out


@pytest.mark.parametrize("make, needle", [
    (lambda tmp: tmp / "nope", "no such directory"),
    (lambda tmp: (tmp / "empty").mkdir() or tmp / "empty", "not a release layout"),
    (lambda tmp: (tmp / "file").write_text("x") and tmp / "file", "not a directory"),
])
def test_usage_errors_exit_2(tmp_path: Path, capsys, make, needle) -> None:
    target = make(tmp_path)
    for cmd in ("verify", "report"):
        code, out, err = run([cmd, "--release-dir", str(target)], capsys)
        assert code == 2
        assert err.startswith("trace-tui: error: --release-dir") and needle in err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_verify_needs_something_to_verify(capsys) -> None:
    code, _, err = run(["verify"], capsys)
    assert code == 2 and "nothing to verify" in err


def test_report_markdown(trace_release_dir: Path, capsys) -> None:
    code, out, err = run(["report", "--release-dir", str(trace_release_dir)], capsys)
    assert code == 0 and err == ""
    assert "| ChartQAPro | 31.57 ± 0.66 | 31.43 ± 1.33 (-0.14) |" in out
    assert "21 of 24 benchmarks at 3B" in out


def test_report_json(trace_release_dir: Path, capsys) -> None:
    code, out, _ = run(["report", "--release-dir", str(trace_release_dir), "--format", "json"], capsys)
    data = json.loads(out)
    assert code == 0
    assert data["benchmarks"]["columns"] == ["3B Base", "3B TRACE (Δ)", "7B Base", "7B TRACE (Δ)"]
    assert data["overall"][1]["cells"][3] == "42.85 ± 0.39"


def test_report_bad_results_exit_1_one_line(release_copy: Path, capsys) -> None:
    (release_copy / RESULTS).write_text('{"truncated": ')
    code, out, err = run(["report", "--release-dir", str(release_copy)], capsys)
    assert code == 1 and out == ""
    assert err.startswith(f"trace-tui: error: {RESULTS}: report: not valid JSON")
    assert len(err.strip().splitlines()) == 1


def test_report_warns_on_unpublished_bytes(release_copy: Path, capsys) -> None:
    path = release_copy / RESULTS
    data = json.loads(path.read_text())
    path.write_text(json.dumps(data, indent=1))  # same content, other bytes
    code, out, err = run(["report", "--release-dir", str(release_copy)], capsys)
    assert code == 0 and "42.85 ± 0.39" in out
    assert "is not the published" in err


def test_report_refuses_incomplete_results(release_copy: Path, capsys) -> None:
    path = release_copy / RESULTS
    data = json.loads(path.read_text())
    del data["scores"]["benchmark_scores"][7]
    path.write_text(json.dumps(data))
    code, _, err = run(["report", "--release-dir", str(release_copy)], capsys)
    assert code == 1 and "results.complete: 575 scores, expected 576 (1 missing" in err


def test_subprocess_never_a_traceback(release_copy: Path) -> None:
    """The installed entry point, as a user runs it, on a broken YAML config."""
    (release_copy / "rlvr/configs/trace-qwen2.5-vl-7b.yaml").write_text("release: [unclosed\n")
    proc = subprocess.run([sys.executable, "-m", "trace_tui", "verify", "--release-dir", str(release_copy)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "FAIL rlvr/configs/trace-qwen2.5-vl-7b.yaml: document:rlvr/configs/trace-qwen2.5-vl-7b.yaml: not valid YAML" in proc.stdout


def test_verify_writes_no_log_unless_asked(release_copy: Path, tmp_path: Path, capsys) -> None:
    (release_copy / RESULTS).write_text("[]")
    log_file = tmp_path / "logs" / "verify.jsonl"
    code, _, _ = run(["verify", "--release-dir", str(release_copy), "--log-file", str(log_file)], capsys)
    assert code == 1
    events = [json.loads(x) for x in log_file.read_text().splitlines()]
    assert events[-1]["event"] == "verify.release" and events[-1]["exit_code"] == 1
    assert {e["file"] for e in events if e["event"] == "verify.check_failed"} == {RESULTS}


def test_report_without_validation_results_leaves_that_table_out(release_copy: Path, capsys) -> None:
    (release_copy / "rlvr/evaluation/trace_validation/results.v1.json").unlink()
    code, out, err = run(["report", "--release-dir", str(release_copy)], capsys)
    assert code == 0 and "## Overall" in out and "TRACE validation" not in out
    assert "the TRACE validation table is left out" in err


def _subprocess(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trace_tui", *args], capture_output=True, text=True, timeout=60)


def test_overflowing_scores_and_huge_integers_are_failed_checks_not_crashes(release_copy: Path) -> None:
    """A fresh interpreter, so the configs are parsed in the forked child, as a user's run does."""
    path = release_copy / RESULTS
    data = json.loads(path.read_text())
    data["scores"]["benchmark_scores"][0]["score"] = 1e308
    path.write_text(json.dumps(data))
    config = "rlvr/configs/trace-qwen2.5-vl-3b.yaml"
    (release_copy / config).write_text("1" + "0" * 100_000)
    proc = _subprocess("verify", "--release-dir", str(release_copy))
    assert proc.returncode == 1 and proc.stderr == "", proc.stderr
    assert f"FAIL {RESULTS}: aggregates.overall_summaries: cannot recompute: a value out of range" in proc.stdout
    assert f"FAIL {config}: document:{config}: not valid YAML: Exceeds the limit (4300 digits)" in proc.stdout
    assert "Result: FAILED" in proc.stdout


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_log_file_that_cannot_be_written_is_one_line(trace_release_dir: Path) -> None:
    proc = _subprocess("verify", "--release-dir", str(trace_release_dir), "--log-file", "/dev/full")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines() == [
        "trace-tui: error: --log-file /dev/full: cannot be written (No space left on device) "
        "(free space there, or name a file elsewhere)"]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_the_executable_exits_without_teardown_yet_loses_nothing(trace_release_dir: Path, tmp_path: Path,
                                                                fmt: str) -> None:
    """`trace-tui verify --release-dir` leaves the process at once after the checklist (os._exit, no
    interpreter teardown): everything written before must be whole, the exit code as it returned; with
    --log-file (a handler to flush) the process exits the ordinary way and the log holds its last event."""
    out = tmp_path / "report"
    args = ["verify", "--release-dir", str(trace_release_dir), "--report-dir", str(out)]
    proc = _subprocess(*args, *(["--json"] if fmt == "json" else []))
    assert proc.returncode == 0, proc.stderr
    if fmt == "json":
        assert json.loads(proc.stdout)["exit_code"] == 0
    else:
        assert proc.stdout.rstrip().splitlines()[-1].startswith("Result: OK")
    assert json.loads((out / "report.json").read_text())["exit_code"] == 0
    assert (out / "report.md").read_text().strip()
    log = tmp_path / "verify.log"
    proc = _subprocess(*args, "--log-file", str(log), "--log-format", "json", "--strict")
    assert proc.returncode == 1
    last = json.loads(log.read_text().splitlines()[-1])
    assert last["event"] == "verify.release" and last["exit_code"] == 1
