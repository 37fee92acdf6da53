"""Every bad input a user can give is one line on stderr naming what and where, with README's exit code.

Real `python -m trace_tui` processes; a real read-only tmpfs for the unwritable campaign directory.
"""

from __future__ import annotations

import json
import re
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tmpfs import tmpfs

REPO = Path(__file__).resolve().parents[1]

RECIPE = """name: enginetest
title: engine test
purpose: exercise the engine
canonical: false
selection: {suite: demo, seeds: all, benchmarks: all}
local_models:
  - {id: tiny-a, label: A, store_entry: "local:model/tiny-a"}
demo_tasks:
  - {key: t1, rows: 3}
steps:
  - {id: gen, title: rows, stage: host, per_slice: true, run: [trace_tui.stages.selftest, rows]}
"""


def cli(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRACE_TUI_DEBUG"}
    return subprocess.run([sys.executable, "-m", "trace_tui", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=env)


def one_line(out: subprocess.CompletedProcess, code: int, *must: str) -> str:
    # a run's own log lines (structlog's console lines) may come before the error; the error is one line
    lines = [x for x in out.stderr.splitlines() if x.strip() and not re.match(r"^\S+Z \[(info|warning)", x)]
    assert out.returncode == code, (out.returncode, out.stderr)
    assert len(lines) == 1, out.stderr
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr, out.stderr
    for text in must:
        assert text in lines[0], (text, lines[0])
    return lines[0]


@pytest.fixture()
def campaign(tmp_path: Path) -> tuple[Path, Path]:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    out = cli("--home", str(tmp_path / "home"), "--recipe", str(recipe), "--yes", "--runtime", "local",
              "--campaign", str(tmp_path / "c"))
    assert out.returncode == 0, out.stderr
    return tmp_path / "c", recipe


@pytest.mark.parametrize("argv", [["--bogus"], ["verify", "--nope"], ["store", "fetch", "--entry"],
                                  ["bundle"], ["status", "--watch", "x"], ["--runtime", "podman"]])
def test_usage_errors_are_one_line(argv: list[str]) -> None:
    line = one_line(cli(*argv), 2, "error:")
    assert "--help" in line


def test_a_corrupt_state_database_is_one_line(campaign) -> None:
    c, recipe = campaign
    db = c / "state.sqlite"
    for extra in ("state.sqlite-wal", "state.sqlite-shm"):
        (c / extra).unlink(missing_ok=True)
    db.write_bytes(b"garbage" * 200)
    one_line(cli("status", "--campaign", str(c)), 2, str(db))
    one_line(cli("verify", "--campaign", str(c)), 2, str(db))
    one_line(cli("--home", str(c.parent / "home"), "--recipe", str(recipe), "--yes", "--runtime", "local",
                 "--campaign", str(c)), 2, str(db), "mv")


def test_bad_inputs_json_in_the_state_is_one_line(campaign) -> None:
    c, recipe = campaign
    db = sqlite3.connect(c / "state.sqlite")
    db.execute("UPDATE jobs SET inputs='{not json'")
    db.commit()
    db.close()
    one_line(cli("status", "--campaign", str(c)), 2, str(c / "state.sqlite"), "not valid JSON")
    one_line(cli("--home", str(c.parent / "home"), "--recipe", str(recipe), "--yes", "--runtime", "local",
                 "--campaign", str(c)), 2, "state.sqlite")


def test_an_unreadable_receipt_is_a_failed_check_not_a_crash(campaign) -> None:
    c, _ = campaign
    receipt = next((c / "receipts").rglob("*.json"))
    receipt.write_text(json.dumps([1, 2, 3]))
    out = cli("verify", "--campaign", str(c))
    assert out.returncode == 1 and "Traceback" not in out.stderr and "internal error" not in out.stderr
    receipt.write_text(json.dumps({"content": "nope"}))
    out = cli("verify", "--campaign", str(c))
    assert out.returncode == 1 and "Traceback" not in out.stderr and "internal error" not in out.stderr


@pytest.mark.parametrize("damage", [b"{not json", b"[1, 2, 3]", b"\xff\xfe", None])
def test_a_damaged_recipe_json_is_one_line_for_every_reader(campaign, damage: bytes | None) -> None:
    """recipe.json cut, not an object, not UTF-8 or gone: `verify --campaign` fails its completeness check
    naming the file, `report --campaign` and the TUI's reader give the same one line, never a traceback
    (a JSON list once reached `.get` in two of them: an internal error)."""
    from trace_tui.errors import CheckFailed, UsageError
    from trace_tui.service.campaigns import read_campaign

    c, _ = campaign
    recipe_json = c / "recipe.json"
    if damage is None:
        recipe_json.unlink()
    else:
        recipe_json.write_bytes(damage)
    out = cli("verify", "--campaign", str(c))
    assert out.returncode == 1 and "Traceback" not in out.stderr and "internal error" not in out.stderr, out.stderr
    failed = [line for line in out.stdout.splitlines() if "FAIL" in line and "recipe.json" in line]
    assert failed, out.stdout
    report = one_line(cli("report", "--campaign", str(c)), 2 if damage is None else 1, "recipe.json")
    if damage is None:
        assert "not a campaign directory" in report
        with pytest.raises(UsageError, match="no recipe.json"):
            read_campaign(c)
    else:
        assert str(recipe_json) in report
        with pytest.raises(CheckFailed, match="recipe.json: not"):
            read_campaign(c)


def test_a_campaign_that_is_a_file_a_fifo_or_unwritable_is_one_line(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    base = ["--home", str(tmp_path / "home"), "--recipe", str(recipe), "--yes", "--runtime", "local", "--campaign"]
    a_file = tmp_path / "file"
    a_file.write_text("x")
    one_line(cli(*base, str(a_file)), 2, str(a_file), "a file")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    one_line(cli(*base, str(fifo)), 2, str(fifo), "FIFO")
    ro = tmp_path / "ro"
    with tmpfs(ro, "ro,size=1m") as mounted:
        if not mounted:
            ro.chmod(0o555)  # not root: an unwritable directory by its mode
            if os.access(ro, os.W_OK):
                pytest.skip("neither a read-only mount nor a read-only mode is possible here")
        one_line(cli(*base, str(ro)), 2, str(ro), "not writable")


def test_bundle_export_to_a_file_is_one_line(tmp_path: Path) -> None:
    target = tmp_path / "bundle.tar"
    target.write_text("x")
    one_line(cli("bundle", "export", str(target), "--recipe", "demo", "--home", str(tmp_path / "home")), 2,
             str(target))


def test_a_log_file_that_is_a_directory_is_one_line(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    logdir = tmp_path / "logs"
    logdir.mkdir()
    one_line(cli("--home", str(tmp_path / "home"), "--recipe", str(recipe), "--yes", "--runtime", "local",
                 "--log-file", str(logdir), "--campaign", str(tmp_path / "c")), 2, str(logdir))


def test_a_home_that_is_a_file_is_one_line_before_anything_runs(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    home = tmp_path / "home"
    home.write_text("x")
    one_line(cli("--home", str(home), "--recipe", str(recipe), "--yes", "--runtime", "local"), 2, str(home))
    one_line(cli("recipes", "--home", str(home)), 2, str(home))


@pytest.mark.parametrize("columns", ["60", "132"])
def test_help_is_wrapped_to_the_terminal_width(columns: str) -> None:
    """`--help` fits $COLUMNS (what argparse's own sizing reads), for the top level and a command."""
    for argv in (["--help"], ["verify", "--help"]):
        out = subprocess.run([sys.executable, "-m", "trace_tui", *argv], capture_output=True, text=True,
                             env={**os.environ, "COLUMNS": columns}, timeout=60)
        assert out.returncode == 0
        widths = [len(line) for line in out.stdout.splitlines()]
        assert max(widths) <= int(columns) - 2
        assert max(widths) > int(columns) - 20  # wrapped at that width, not at a fixed 80


# --------------------------------------------------------------------------- flags that did nothing, or too much

SLURM_FLAGS = [["--dry-run"], ["--no-wait"], ["--shard-by", "seed"], ["--partition", "p"], ["--account", "a"],
               ["--gpus-per-node", "1"], ["--time", "10"], ["--max-parallel", "2"]]


@pytest.mark.parametrize("flag", SLURM_FLAGS, ids=lambda f: f[0])
def test_a_slurm_flag_without_the_slurm_scheduler_is_refused_before_anything_runs(tmp_path: Path, flag) -> None:
    """`--dry-run` without `--scheduler slurm` once started a real run (in Docker, where it is the default)."""
    camp = tmp_path / "c"
    line = one_line(cli("--home", str(tmp_path / "home"), "--recipe", "demo", *flag, "--yes", "--runtime", "local",
                        "--campaign", str(camp)), 2, flag[0], "--scheduler slurm")
    assert "not on Slurm" in line
    assert not camp.exists()


def test_a_slurm_flag_before_a_subcommand_is_refused(tmp_path: Path) -> None:
    one_line(cli("--dry-run", "recipes", "--home", str(tmp_path / "home")), 2, "--dry-run", "recipes")


def test_home_and_log_file_before_the_subcommand_apply(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch, trace_release_dir: Path) -> None:
    """`trace-tui --home X preview ...` used $TRACE_TUI_HOME, and `--log-file F verify ...` wrote no F."""
    from trace_tui.cli import main

    monkeypatch.setenv("TRACE_TUI_HOME", str(tmp_path / "env-home"))
    assert main(["--home", str(tmp_path / "given"), "preview", "--recipe", "demo"]) == 0
    out = capsys.readouterr().out
    assert f"{tmp_path / 'given'}/campaigns/" in out and "env-home" not in out
    # given after the subcommand too: the later one stands
    assert main(["--home", str(tmp_path / "given"), "preview", "--home", str(tmp_path / "after"),
                 "--recipe", "demo"]) == 0
    assert f"{tmp_path / 'after'}/campaigns/" in capsys.readouterr().out
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    assert main(["--home", str(a_file), "recipes"]) == 2
    assert str(a_file) in capsys.readouterr().err
    log = tmp_path / "top.log"
    code = main(["--log-file", str(log), "--log-format", "json", "verify", "--release-dir", str(trace_release_dir)])
    assert code in (0, 1) and log.is_file() and log.stat().st_size > 0


def test_a_repeated_seed_model_or_benchmark_is_a_usage_error() -> None:
    """`--seeds 42 42` ran, while the same repeat in a recipe file is refused (exit 2)."""
    for argv in (["preview", "--recipe", "full", "--seeds", "42", "42"],
                 ["preview", "--recipe", "demo", "--models", "tiny-qwen2.5-vl", "tiny-qwen2.5-vl"],
                 ["preview", "--recipe", "demo", "--benchmarks", "counting", "counting"]):
        line = one_line(cli(*argv), 2, argv[-3], "given twice")
        assert argv[-1] in line


def test_narrowing_flags_without_a_recipe_are_refused_by_hw() -> None:
    one_line(cli("hw", "--models", "nope", "--seeds", "99"), 2, "--models", "--recipe")


def test_a_huge_flag_value_is_cut_in_the_error_line() -> None:
    out = cli("preview", "--recipe", "demo", "--models", "a" * 100_000)
    line = one_line(out, 2, "--models", "100000 characters")
    assert len(line) < 400 and "…" in line
