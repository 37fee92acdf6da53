"""Finished work survives changed inputs, a lost state database and a full disk.

Real runs of the selftest worker on the local runtime; the disk-full run uses a real
tmpfs mounted for the test (root), or, where mounting is not permitted, ENOSPC raised
at the narrowest edge (the receipt write), as the docstring of that test says.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_engine_support import REPO, content_of, make_recipe, resolved_for, selftest_step
from tests.tmpfs import tmpfs

from trace_tui.engine.campaign import Campaign
from trace_tui.engine.planner import diff_inputs
from trace_tui.engine.runner import Runner
from trace_tui.errors import CheckFailed, UsageError
from trace_tui.runtime.local import LocalRuntime
from trace_tui.verify.campaign import verify_campaign


def two_step():
    return make_recipe([selftest_step("gen", "rows", image=None),
                        selftest_step("agg", "whoami", per_slice=False, image=None)])


def run(tmp: Path, resolved, name: str = "c", **kw):
    events: list = []
    with Campaign(tmp / name) as c:
        result = Runner(resolved, c, LocalRuntime(), store=tmp / "store", **kw).run(events.append)
    return result, events


def files_of(campaign: Path) -> dict[str, bytes]:
    return {p.relative_to(campaign).as_posix(): p.read_bytes()
            for sub in ("outputs", "receipts") for p in sorted((campaign / sub).rglob("*")) if p.is_file()}


def test_changed_inputs_delete_nothing_without_redo_and_say_every_value_in_full(tmp_path: Path) -> None:
    first = resolved_for(two_step(), benchmarks={"t1": 4, "t2": 4})
    assert run(tmp_path, first)[0].exit_code == 0
    before = files_of(tmp_path / "c")
    changed = resolved_for(two_step(), benchmarks={"t1": 4, "t2": 6})
    with pytest.raises(UsageError) as err:
        run(tmp_path, changed)
    assert "--redo" in err.value.line() and "\n" not in err.value.line()
    assert "benchmark.rows: 4 -> 6" in err.value.line()
    assert files_of(tmp_path / "c") == before  # nothing moved, nothing deleted
    assert verify_campaign(tmp_path / "c").ok()  # and the state still says what is on disk
    # a "no" from the question (the TUI's hook) is the same as no --redo; it sees every change
    asked: list[list[str]] = []
    with pytest.raises(UsageError):
        run(tmp_path, changed, confirm_redo=lambda lines: asked.append(lines) or False)
    assert len(asked[0]) == 2 and files_of(tmp_path / "c") == before


def test_redo_moves_superseded_outputs_aside_listed_and_restorable(tmp_path: Path) -> None:
    from trace_tui.engine.recovery import restore, superseded

    first = resolved_for(two_step(), benchmarks={"t1": 4, "t2": 4})
    assert run(tmp_path, first)[0].exit_code == 0
    before = files_of(tmp_path / "c")
    changed = resolved_for(two_step(), benchmarks={"t1": 4, "t2": 6})
    result, _ = run(tmp_path, changed, redo=True)
    assert result.exit_code == 0
    kept = superseded(tmp_path / "c")
    assert {(e["step"], e["slice"]) for e in kept} == {("gen", "tiny-a/42/t2"), ("agg", "_step")}
    assert all("4 -> 6" in " ".join(e["changes"]) for e in kept if e["step"] == "gen")
    stamp = kept[0]["stamp"]
    from trace_tui.engine.status import campaign_status, render_status

    listed = campaign_status(tmp_path / "c")["superseded"]
    assert {(e["step"], e["slice"], e["stamp"]) for e in listed} == {(e["step"], e["slice"], stamp) for e in kept}
    assert f"superseded/{stamp}" in render_status(campaign_status(tmp_path / "c"))
    old_rows = tmp_path / "c/superseded" / stamp / "outputs/gen/tiny-a/42/t2/rows.jsonl"
    assert old_rows.read_bytes() == before["outputs/gen/tiny-a/42/t2/rows.jsonl"]
    # put the old outputs back: the campaign is as it was before the change, and verifies for the old inputs
    with Campaign(tmp_path / "c") as c:
        c.rebuild_from_receipts(restore(tmp_path / "c", stamp))
    assert files_of(tmp_path / "c") == before
    result, events = run(tmp_path, first)
    assert result.exit_code == 0 and not [e for e in events if getattr(e, "state", "") == "running"]


def test_full_old_and_new_values_are_never_cut() -> None:
    a, b = "sha256:" + "a" * 20 + "1" * 44, "sha256:" + "a" * 20 + "2" * 44
    (line,) = diff_inputs({"image_id": a}, {"image_id": b})
    assert line == f"image_id: {a} -> {b}"


@pytest.mark.parametrize("damage", ["deleted", "empty"])
def test_a_lost_state_database_is_rebuilt_from_receipts_not_redone(tmp_path: Path, damage: str) -> None:
    resolved = resolved_for(two_step(), seeds=[42, 43])
    assert run(tmp_path, resolved)[0].exit_code == 0
    before = files_of(tmp_path / "c")
    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "c/outputs").rglob("*") if p.is_file()}
    db = tmp_path / "c/state.sqlite"
    for extra in (db, db.with_name("state.sqlite-wal"), db.with_name("state.sqlite-shm")):
        extra.unlink(missing_ok=True)
    if damage == "empty":
        db.write_bytes(b"")
    result, events = run(tmp_path, resolved)
    assert result.exit_code == 0
    assert not [e for e in events if getattr(e, "state", "") == "running"]  # nothing redone
    assert any("restored from their receipts" in getattr(e, "message", "") for e in events)
    assert files_of(tmp_path / "c") == before
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes
    assert verify_campaign(tmp_path / "c").ok()


def test_readers_of_a_campaign_without_its_state_database_say_how_to_rebuild_it(tmp_path: Path, capsys) -> None:
    """status and verify do not write: for a campaign whose state.sqlite is gone they say so and how to get
    it back (they called it "not a campaign"); a directory without receipts is still not a campaign."""
    from trace_tui.cli import main

    assert run(tmp_path, resolved_for(two_step()))[0].exit_code == 0
    db = tmp_path / "c/state.sqlite"
    for extra in (db, db.with_name("state.sqlite-wal"), db.with_name("state.sqlite-shm")):
        extra.unlink(missing_ok=True)
    for command in ("status", "verify"):
        capsys.readouterr()
        assert main([command, "--campaign", str(tmp_path / "c")]) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith(f"trace-tui: error: {db}: missing") and "rebuilt from its receipts" in line
    (tmp_path / "other").mkdir()
    assert main(["status", "--campaign", str(tmp_path / "other")]) == 2
    assert "is not a campaign" in capsys.readouterr().err


def test_a_corrupt_state_database_is_one_line_saying_how(tmp_path: Path) -> None:
    resolved = resolved_for(two_step())
    assert run(tmp_path, resolved)[0].exit_code == 0
    db = tmp_path / "c/state.sqlite"
    for extra in (db.with_name("state.sqlite-wal"), db.with_name("state.sqlite-shm")):
        extra.unlink(missing_ok=True)
    db.write_bytes(b"this is not a database" * 100)
    with pytest.raises(UsageError) as err:
        run(tmp_path, resolved)
    assert str(db) in err.value.line() and "mv" in err.value.line()


def _fill(path: Path) -> None:
    with open(path, "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


def test_disk_full_on_a_real_tmpfs_is_one_line_and_resumes_after_space_is_freed(tmp_path: Path) -> None:
    """A 2 MiB tmpfs holds the campaign's outputs; a filler file takes the space the rows need. (Mounted at
    the campaign's outputs/ itself: the runner writes through no link in a campaign.)"""
    campaign = tmp_path / "c"
    mnt = campaign / "outputs"
    with tmpfs(mnt, "size=2m") as mounted:
        if not mounted:
            pytest.skip("mounting a tmpfs is not permitted here; the injected-ENOSPC test covers the runner")
        resolved = resolved_for(two_step(), benchmarks={"t1": 2000})
        _fill(mnt / "filler")
        (mnt / "filler").open("r+b").truncate((mnt / "filler").stat().st_size - 100_000)  # ~1/2 of the rows fit
        result, _ = run(tmp_path, resolved)
        assert result.exit_code == 1
        line = result.failed[0]
        assert "no space left on device (ENOSPC) writing" in line and "\n" not in line
        assert str(campaign / "outputs/gen/tiny-a/42/t1") in line
        with Campaign(campaign) as c:
            states = {(j.step, j.slice): j.state for j in c.jobs().values()}
        assert states[("gen", "tiny-a/42/t1")] == "failed"
        (mnt / "filler").unlink()
        result, _ = run(tmp_path, resolved)
        assert result.exit_code == 0, result.message
        clean, _ = run(tmp_path, resolved, name="clean")
        assert content_of(campaign) == content_of(tmp_path / "clean")


def test_disk_full_in_the_runner_marks_the_job_failed_and_stops_with_one_line(tmp_path: Path, monkeypatch) -> None:
    """ENOSPC injected at the narrowest write edge the engine owns: the receipt write (the receipts
    module's atomic_write_json, called for receipts/...). The worker, the database and the rest are real."""
    from trace_tui.engine import receipts as receipts_module

    real = receipts_module.atomic_write_json

    def full(path, obj):
        if "/receipts/" in str(path):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, obj)

    resolved = resolved_for(two_step())
    monkeypatch.setattr(receipts_module, "atomic_write_json", full)
    with pytest.raises(CheckFailed) as err:
        run(tmp_path, resolved)
    assert "no space left on device writing" in err.value.line() and "receipts/gen" in err.value.line()
    with Campaign(tmp_path / "c") as c:
        assert c.job("gen", "tiny-a/42/t1").state == "failed"
    monkeypatch.setattr(receipts_module, "atomic_write_json", real)
    result, _ = run(tmp_path, resolved)
    assert result.exit_code == 0, result.message
    assert verify_campaign(tmp_path / "c").ok()


def test_disk_full_through_the_cli_is_one_line_without_traceback(tmp_path: Path) -> None:
    """The whole campaign on a real 1 MiB tmpfs, filled: the CLI prints one line naming where, exit 1."""
    mnt = tmp_path / "fs"
    with tmpfs(mnt, "size=1m") as mounted:
        if not mounted:
            pytest.skip("mounting a tmpfs is not permitted here")
        recipe = tmp_path / "r.yaml"
        recipe.write_text("""name: enginetest
title: engine test
purpose: exercise the engine
canonical: false
selection: {suite: demo, seeds: all, benchmarks: all}
local_models:
  - {id: tiny-a, label: A, store_entry: "local:model/tiny-a"}
demo_tasks:
  - {key: t1, rows: 20}
steps:
  - {id: gen, title: rows, stage: host, per_slice: true, run: [trace_tui.stages.selftest, rows]}
""")
        args = [sys.executable, "-m", "trace_tui", "--home", str(tmp_path / "home"), "--recipe", str(recipe), "--yes",
                "--runtime", "local", "--campaign", str(mnt / "c"), "--log-file", str(tmp_path / "log.jsonl")]
        first = subprocess.run(args, capture_output=True, text=True, cwd=REPO, timeout=120)
        assert first.returncode == 0, first.stderr
        shutil.rmtree(mnt / "c" / "outputs")
        shutil.rmtree(mnt / "c" / "receipts")
        os.unlink(mnt / "c" / "state.sqlite")
        _fill(mnt / "filler")
        out = subprocess.run(args, capture_output=True, text=True, cwd=REPO, timeout=120)
        assert out.returncode in (1, 2), out.stderr
        assert "Traceback" not in out.stderr and "internal error" not in out.stderr
        err = [x for x in out.stderr.splitlines() if x.strip()]
        assert len(err) == 1 and "trace-tui: error:" in err[0] and str(mnt) in err[0], out.stderr
        (mnt / "filler").unlink()
        again = subprocess.run(args, capture_output=True, text=True, cwd=REPO, timeout=120)
        assert again.returncode == 0, again.stderr + again.stdout
