"""A campaign handed over is data: `verify --campaign`, `merge` and `status` read only its own files, only
regular files, and check what they read.

Real campaigns made by the real CLI (a selftest recipe on the local runtime, about a second each), real
files damaged the way the probe found them; `trace_tui.cli.main` in process, and `python -m trace_tui` with a
timeout where the old code hung (a FIFO, /dev/zero).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trace_tui.cli import main
from trace_tui.common.digest import sha256_json

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
  - {key: t2, rows: 2}
steps:
  - {id: gen, title: rows, stage: host, per_slice: true, run: [trace_tui.stages.selftest, rows]}
"""
SCORE = "outputs/gen/tiny-a/42/t1/score.json"
ROWS = "outputs/gen/tiny-a/42/t1/rows.jsonl"
RECEIPT = "receipts/gen/tiny-a/42/t1.json"


@pytest.fixture(autouse=True)
def _own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACE_TUI_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TRACE_TUI_DEBUG", raising=False)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One finished single-node campaign and one finished, merged Slurm parent (one shard), made once."""
    root = tmp_path_factory.mktemp("made")
    recipe = root / "r.yaml"
    recipe.write_text(RECIPE)
    home = root / "home"
    single = root / "single"
    assert main(["--home", str(home), "--recipe", str(recipe), "--yes", "--runtime", "local",
                 "--campaign", str(single)]) == 0
    parent = root / "parent"
    assert main(["--home", str(home), "--recipe", str(recipe), "--scheduler", "slurm", "--dry-run", "--yes",
                 "--campaign", str(parent), "--seeds", "42"]) == 0
    from trace_tui.campaign_files.shard_files import read_plan
    from trace_tui.campaign_files.shards import shard_arguments

    plan = read_plan(parent)
    assert [s.id for s in plan.shards] == ["seed-42"]
    narrowing = shard_arguments(plan, plan.shards[0])[2:]  # what the array task runs, less its --recipe NAME
    assert main(["--home", str(home), "--recipe", str(recipe), *narrowing, "--yes", "--runtime", "local",
                 "--campaign", str(parent / "shards" / "seed-42")]) == 0
    assert main(["merge", "--campaign", str(parent)]) == 0
    return {"single": single, "parent": parent, "recipe": recipe}


@pytest.fixture()
def single(made: dict[str, Path], tmp_path: Path) -> Path:
    copy = tmp_path / "c"
    shutil.copytree(made["single"], copy, symlinks=True)
    return copy


@pytest.fixture()
def parent(made: dict[str, Path], tmp_path: Path) -> Path:
    copy = tmp_path / "p"
    shutil.copytree(made["parent"], copy, symlinks=True)
    return copy


def verify(campaign: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """(exit code, the FAILED lines) of `trace-tui verify --campaign` run in process."""
    capsys.readouterr()
    code = main(["verify", "--campaign", str(campaign)])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    return code, [line for line in out.splitlines() if line.startswith("FAILED ")]


def cli(*args: str, timeout: int = 60) -> subprocess.CompletedProcess[str]:
    """`python -m trace_tui ARGS` with a timeout: where the old code blocked on a FIFO or read /dev/zero."""
    env = {k: v for k, v in os.environ.items() if k != "TRACE_TUI_DEBUG"}
    return subprocess.run([sys.executable, "-m", "trace_tui", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=env)


def one_line(out: subprocess.CompletedProcess[str], code: int, *must: str) -> str:
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    assert out.returncode == code, (out.returncode, out.stderr, out.stdout[-2000:])
    assert len(lines) == 1 and "Traceback" not in out.stderr and "internal error" not in out.stderr, out.stderr
    for text in must:
        assert text in lines[0], (text, lines[0])
    return lines[0]


def error_line(capsys: pytest.CaptureFixture[str], argv: list[str], code: int, *must: str) -> str:
    """The one stderr line of `main(argv)` in process (argparse's own errors exit through SystemExit)."""
    capsys.readouterr()
    try:
        got = main(argv)
    except SystemExit as exc:
        got = exc.code
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert got == code and len(lines) == 1, (got, err)
    assert "Traceback" not in err and "internal error" not in err
    for text in must:
        assert text in lines[0], (text, lines[0])
    return lines[0]


def edit_json(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_the_campaigns_as_made_verify(made: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("single", "parent"):
        code, failed = verify(made[name], capsys)
        assert code == 0 and failed == [], (name, failed)


# --------------------------------------------------------------------------- 1. a Slurm parent reads only itself


def test_a_shard_id_that_leaves_the_parent_is_refused_by_merge_status_and_verify(
        parent: Path, made: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """shards.json naming shard "../../outside" once made merge and verify read (and pass) a campaign elsewhere."""
    outside = parent.parent / "outside"
    shutil.copytree(made["single"], outside)
    (parent / "merged.json").unlink()
    edit_json(parent / "shards.json", lambda d: d["shards"][0].update(id="../../outside"))
    line = error_line(capsys, ["merge", "--campaign", str(parent)], 1, "shards.json", "shards[0].id",
                      "../../outside")
    assert "plain" in line
    assert not (parent / "merged.json").exists()
    error_line(capsys, ["status", "--campaign", str(parent)], 1, "shards[0].id")
    code, failed = verify(parent, capsys)
    assert code == 1 and any("shards.json" in x and "shards[0].id" in x for x in failed), failed


def test_a_shard_folder_that_is_a_link_is_not_read(parent: Path, made: dict[str, Path],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    shard = parent / "shards" / "seed-42"
    moved = parent.parent / "elsewhere"
    shard.rename(moved)
    shard.symlink_to(moved, target_is_directory=True)
    code, failed = verify(parent, capsys)
    assert code == 1 and any("shards/seed-42" in x and "symbolic link" in x for x in failed), failed
    (parent / "merged.json").unlink()
    error_line(capsys, ["merge", "--campaign", str(parent)], 1, str(shard), "symbolic link")
    assert not (parent / "merged.json").exists()
    error_line(capsys, ["status", "--campaign", str(parent)], 1, str(shard), "symbolic link")
    # the shards folder itself as a link: the same
    shard.unlink()
    shards = parent / "shards"
    shards.rename(parent.parent / "all-shards")
    shards.symlink_to(parent.parent / "all-shards", target_is_directory=True)
    (parent.parent / "all-shards" / "seed-42").symlink_to(moved, target_is_directory=True)
    code, failed = verify(parent, capsys)
    assert code == 1 and any(f"{shards}: a symbolic link" in x for x in failed), failed


def test_a_shard_id_must_be_a_plain_name() -> None:
    from pydantic import ValidationError

    from trace_tui.campaign_files.shards import Shard

    fields = {"index": 0, "models": ["m"], "seeds": [1], "slices": [], "rows_total": 0}
    for bad in ("../x", "a/b", "..", ".", "", "x\x00y", "/abs", ".hidden"):
        with pytest.raises(ValidationError):
            Shard(id=bad, **fields)
    for good in ("seed-42", "qwen2.5-vl-3b_s42", "_"):
        assert Shard(id=good, **fields).dir == f"shards/{good}"


# --------------------------------------------------------------------------- 2. merged.json is checked


@pytest.mark.parametrize("damage", [b"[1,2", b"[1, 2]", b"{}", b'{"schema": "trace-tui-merged-v1"}'])
def test_a_damaged_merged_json_fails_verify(parent: Path, damage: bytes,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    (parent / "merged.json").write_bytes(damage)
    code, failed = verify(parent, capsys)
    assert code == 1 and any("merged.json" in x for x in failed), failed


def test_a_merged_json_of_other_shards_fails_verify(parent: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit_json(parent / "merged.json", lambda d: d["shards"].clear())
    code, failed = verify(parent, capsys)
    assert code == 1 and any("merged.json" in x and "not the plan's" in x for x in failed), failed


# --------------------------------------------------------------------------- 3. recipe.json is checked


def test_an_emptied_recipe_json_fails_verify_naming_a_field(single: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    (single / "recipe.json").write_text("{}")
    code, failed = verify(single, capsys)
    assert code == 1 and any("recipe.json" in x and "recipe is missing" in x for x in failed), failed


@pytest.mark.parametrize(("field", "change"), [
    ("models", lambda d: d.update(models=[])),
    ("slices", lambda d: d.update(slices=[])),
    ("seeds", lambda d: d.update(seeds=[1])),
    ("settings", lambda d: d["settings"].update(max_tokens=9999)),
    ("benchmarks", lambda d: d["benchmarks"][0].update(rows=99)),
])
def test_an_edited_recipe_json_fails_verify_naming_the_field(single: Path, field: str, change: Any,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    edit_json(single / "recipe.json", change)
    code, failed = verify(single, capsys)
    assert code == 1, failed
    # slices are not part of the configuration's hash: they are derived from it, and checked as such
    hashed = "recipe.json slices" if field == "slices" else "recipe.json config_sha256"
    assert any(hashed in x for x in failed), failed
    # and with its hash made to fit, what the campaign's jobs ran still tells it apart
    from trace_tui.recipe.schema import config_data
    from trace_tui.verify.campaign import _model_objects, _recipe_file_model

    def rehash(d: dict[str, Any]) -> None:
        r: Any = _recipe_file_model().model_validate(d)
        d["config_sha256"] = sha256_json(config_data(r.recipe, r.suite, r.suite_sha256, _model_objects(r.models),
                                                     r.seeds, r.benchmarks, r.settings, r.training, r.store_entries))
    edit_json(single / "recipe.json", rehash)
    code, failed = verify(single, capsys)
    assert code == 1 and any(f"recipe.json {field}" in x for x in failed), (field, failed)


def test_a_recipe_json_whose_fields_are_mistyped_fails_verify(single: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    edit_json(single / "recipe.json", lambda d: d.update(seeds=["42"]))
    code, failed = verify(single, capsys)
    assert code == 1 and any("recipe.json" in x and "seeds[0]" in x for x in failed), failed


def test_recipe_json_config_hash_is_the_resolvers() -> None:
    """What verify recomputes is what trace_tui.recipe.catalog computed, for every shipped recipe (release pins too)."""
    from trace_tui.recipe.catalog import known_recipes, resolve_recipe
    from trace_tui.verify.campaign import recipe_checks

    for name in known_recipes():
        resolved = resolve_recipe(name)
        data = json.loads(json.dumps(resolved.model_dump(mode="json")))
        typed, checks = recipe_checks(data, {"config_sha256": resolved.config_sha256, "run_tag": resolved.run_tag,
                                             "recipe": name})
        assert typed is not None and [c.status for c in checks] == ["passed"], (name, checks)


# --------------------------------------------------------------------------- 4. campaign.json is checked


@pytest.mark.parametrize("damage", ["garbage", "null", "[]", '{"id": "x", "created_at": 1, "schema": '
                                                               '"trace-tui-campaign-v1"}', None])
def test_a_damaged_campaign_json_fails_verify(single: Path, damage: str | None,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    ident = single / "campaign.json"
    if damage is None:
        ident.unlink()
    else:
        ident.write_text(damage)
    code, failed = verify(single, capsys)
    assert code == 1 and any("campaign.json" in x for x in failed), failed


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_campaign_json_that_is_a_fifo_or_dev_zero_fails_at_once(single: Path, kind: str) -> None:
    ident = single / "campaign.json"
    ident.unlink()
    os.mkfifo(ident) if kind == "fifo" else ident.symlink_to("/dev/zero")
    out = cli("verify", "--campaign", str(single))
    assert out.returncode == 1 and "campaign.json" in out.stdout and "Traceback" not in out.stderr, out


# --------------------------------------------------------------------------- 5. nothing blocks or reads without end


@pytest.mark.parametrize(("rel", "kind"), [(SCORE, "fifo"), (ROWS, "fifo"), (ROWS, "zero"), (SCORE, "zero"),
                                           ("outputs/gen/tiny-a/42/t1/extra.json", "fifo")])
def test_a_fifo_or_dev_zero_in_the_campaign_fails_verify_at_once(single: Path, rel: str, kind: str) -> None:
    """The score recomputer reads per-row files (here rows.jsonl; the demo's scorer reads extract/rows/*.json,
    which are not its receipt's outputs): a FIFO there blocked verify forever, /dev/zero grew it without end."""
    path = single / rel
    path.unlink(missing_ok=True)
    os.mkfifo(path) if kind == "fifo" else path.symlink_to("/dev/zero")
    out = cli("verify", "--campaign", str(single))
    assert out.returncode == 1 and "Traceback" not in out.stderr and "internal error" not in out.stderr, out
    assert any(line.startswith("FAILED") and rel in line for line in out.stdout.splitlines()), out.stdout


def test_a_lock_that_is_a_fifo_is_one_line_for_status(single: Path) -> None:
    (single / ".lock").unlink()
    os.mkfifo(single / ".lock")
    one_line(cli("status", "--campaign", str(single)), 2, str(single / ".lock"), "FIFO")


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_shards_json_that_is_not_a_file_is_one_line_for_merge_and_status(parent: Path, kind: str) -> None:
    plan = parent / "shards.json"
    plan.unlink()
    os.mkfifo(plan) if kind == "fifo" else plan.mkdir()
    for command in ("merge", "status"):
        one_line(cli(command, "--campaign", str(parent)), 1, str(plan), "not a regular file")


# --------------------------------------------------------------------------- 6. one line, never an internal error


@pytest.mark.parametrize("rel", [RECEIPT, SCORE])
def test_a_receipt_or_output_that_links_to_itself_is_a_failed_check(single: Path, rel: str,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = single / rel
    path.unlink()
    path.symlink_to(path.name)
    code, failed = verify(single, capsys)
    assert code == 1 and any(rel in x and "link loop" in x for x in failed), failed


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e300", "1e-300", "0", "-1", "0.1", "86401"])
def test_status_watch_takes_a_sane_number_of_seconds(single: Path, value: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    error_line(capsys, ["status", "--campaign", str(single), f"--watch={value}"], 2, "--watch", value)


def test_status_watch_within_its_bounds_still_watches(single: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["status", "--campaign", str(single), "--watch", "0.2"]) == 0  # complete: prints once and ends
    assert "COMPLETE" in capsys.readouterr().out.upper()


@pytest.mark.parametrize("damage", ['{"shards": "abc"}', '[1]', '[{"array_job": "1; rm -rf /", "tasks": {}}]',
                                    '[{"array_job": "5", "tasks": {"../x": "seed-42"}}]', "[1,"])
def test_a_damaged_submissions_record_is_one_line_for_status(parent: Path, damage: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    (parent / "slurm" / "submissions.json").write_text(damage)
    error_line(capsys, ["status", "--campaign", str(parent)], 1, "submissions.json")


@pytest.mark.parametrize(("change", "names"), [
    (lambda d: d.update(recipe=5), "recipe = 5"),
    (lambda d: d["shards"][0].update(index="x"), "shards[0].index = 'x'"),
    (lambda d: d.pop("slices"), "slices is missing"),
    (lambda d: d["shards"].append(dict(d["shards"][0], index=1)), "'seed-42' is used twice"),
])
def test_a_damaged_shard_plan_names_its_field(parent: Path, change: Any, names: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    edit_json(parent / "shards.json", change)
    line = error_line(capsys, ["merge", "--campaign", str(parent)], 1, "shards.json", names)
    assert "1 validation error" not in line and "--scheduler slurm" in line  # says the field and the fix


@pytest.mark.parametrize("command", ["status", "merge"])
def test_an_empty_campaign_flag_is_a_usage_error(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    error_line(capsys, [command, "--campaign", ""], 2, "--campaign")


@pytest.mark.parametrize(("argv", "flag"), [(["verify", "--campaign", ""], "--campaign"),
                                            (["verify", "--release-dir", "R", "--report-dir", ""], "--report-dir"),
                                            (["verify", "--release-dir", "R", "--log-file", ""], "--log-file"),
                                            (["report", "--release-dir", "R", "--campaign", ""], "--campaign"),
                                            (["report", "--release-dir", ""], "--release-dir")])
def test_an_empty_path_flag_is_a_usage_error_not_ignored(argv: list[str], flag: str,
                                                         capsys: pytest.CaptureFixture[str],
                                                         trace_release_dir: Path) -> None:
    error_line(capsys, [str(trace_release_dir) if a == "R" else a for a in argv], 2, flag)


@pytest.mark.parametrize(("damage", "said"), [("truncated", "not valid JSON"), ("list", "a JSON list"),
                                              ("no name", "names no recipe"), ("deleted", "missing")])
def test_status_and_the_campaign_list_call_a_damaged_recipe_json_damaged_not_complete(
        single: Path, damage: str, said: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Every job of this campaign finished; its recipe.json, which says what it ran, is damaged. status said
    COMPLETE (exit 0) and the campaign list "complete", while opening or resuming it failed."""
    path = single / "recipe.json"
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:40])
    elif damage == "list":
        path.write_text("[]")
    elif damage == "no name":
        path.write_text(json.dumps({"recipe": {"title": "x"}}))
    else:
        path.unlink()
    assert main(["status", "--campaign", str(single)]) == 1
    out, err = capsys.readouterr()
    assert "DAMAGED" in out and "COMPLETE" not in out and f"damaged: {path}" in out
    assert err.count("\n") == 1 and err.startswith(f"trace-tui: error: {path}") and said in err
    assert main(["status", "--campaign", str(single), "--json", "--fail-if-incomplete"]) == 1
    st = json.loads(capsys.readouterr().out)
    assert st["complete"] is False and said in st["damaged"]
    from trace_tui.engine.campaign_list import read_summary

    summary = read_summary(single)
    assert summary.state == "unreadable" and said in summary.message


def test_a_slurm_shard_with_a_damaged_recipe_json_is_named_not_complete(
        parent: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The merged parent was COMPLETE with its one shard's recipe.json truncated: the shard now says damaged,
    the parent is not complete, and the campaign list names the shard's file."""
    shard_recipe = parent / "shards" / "seed-42" / "recipe.json"
    shard_recipe.write_bytes(shard_recipe.read_bytes()[:40])
    assert main(["status", "--campaign", str(parent), "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    shard = st["shards"][0]
    assert st["complete"] is False and shard["campaign_state"] == "damaged"
    assert any(str(shard_recipe) in f and "not valid JSON" in f for f in shard["failures"])
    from trace_tui.engine.campaign_list import read_summary

    summary = read_summary(parent)
    assert summary.state == "failed" and str(shard_recipe) in summary.message
