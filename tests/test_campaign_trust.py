"""A campaign handed over hides nothing: a damaged state database, a forged or missing row or receipt, a
score that names a file outside the campaign are each found by `status`, `verify --campaign` and a resume.

Real campaigns made by the real CLI (a selftest recipe on the local runtime, about a second), damaged the way
a probe of the landed code found them; `trace_tui.cli.main` in process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import shutil
from pathlib import Path
from typing import Any

import pytest

from trace_tui.campaign_files.state import REBUILD_HINT
from trace_tui.cli import main

RECIPE = """name: trusttest
title: trust test
purpose: a campaign to damage
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


@pytest.fixture(autouse=True)
def _own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACE_TUI_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TRACE_TUI_DEBUG", raising=False)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("made")
    recipe = root / "r.yaml"
    recipe.write_text(RECIPE)
    campaign = root / "c"
    assert main(["--home", str(root / "home"), "--recipe", str(recipe), "--yes", "--runtime", "local",
                 "--campaign", str(campaign)]) == 0
    return {"campaign": campaign, "recipe": recipe, "home": root / "home"}


@pytest.fixture()
def single(made: dict[str, Path], tmp_path: Path) -> Path:
    copy = tmp_path / "c"
    shutil.copytree(made["campaign"], copy, symlinks=True)
    return copy


def one_error_line(capsys: pytest.CaptureFixture[str], argv: list[str], code: int) -> str:
    capsys.readouterr()
    got = main(argv)
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert got == code and len(lines) == 1, (got, err)
    assert "Traceback" not in err and "internal error" not in err, err
    return lines[0]


# --------------------------------------------------------------------------- 7. a damaged page in state.sqlite


def _damage_page(db: Path, page: int) -> None:
    """Overwrite one whole page of the database (its header page after its first 100 bytes) with junk."""
    data = bytearray(db.read_bytes())
    size = int.from_bytes(data[16:18], "big")
    start = (page - 1) * size + (100 if page == 1 else 0)
    assert start < len(data)
    data[start:page * size] = b"\xa5" * (page * size - start)
    db.write_bytes(bytes(data))


@pytest.mark.parametrize("page", [2, 3, 6])
def test_a_damaged_page_in_the_state_database_is_the_unreadable_database_line_everywhere(
        single: Path, made: dict[str, Path], page: int, capsys: pytest.CaptureFixture[str]) -> None:
    """status, verify and a resume said `internal error: DatabaseError` (the page of the meta table, of an
    index, of the jobs table); each now says the one line an unreadable database gets, with its hint."""
    db = single / "state.sqlite"
    for extra in (db.with_name("state.sqlite-wal"), db.with_name("state.sqlite-shm")):
        extra.unlink(missing_ok=True)
    _damage_page(db, page)
    for argv in (["status", "--campaign", str(single)], ["verify", "--campaign", str(single)],
                 ["--home", str(made["home"]), "--recipe", str(made["recipe"]), "--yes", "--runtime", "local",
                  "--campaign", str(single)]):
        line = one_error_line(capsys, argv, 2)
        assert line.startswith(f"trace-tui: error: {db}: not a readable campaign database"), line
        assert REBUILD_HINT in line and f"mv {db} {db}.broken" in line, line
    # and the hint works: moved aside, the state is rebuilt from the receipts and the campaign verifies
    db.rename(db.with_name("state.sqlite.broken"))
    assert main(["--home", str(made["home"]), "--recipe", str(made["recipe"]), "--yes", "--runtime", "local",
                 "--campaign", str(single)]) == 0
    assert main(["verify", "--campaign", str(single)]) == 0


# --------------------------------------------------------------------------- campaigns of the demo's steps


@pytest.fixture(scope="module")
def rows_made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished campaign of the demo's generate -> extract -> score steps (2 models x 2 seeds x 2 benchmarks),
    written in the engine's format by bench/campaign_writer.py, the writer of `make bench`'s full-size campaign:
    the real steps need a model and minutes (the demo campaign fixture); the rows, receipts and state here are
    made by the engine's and the workers' own functions (checked below against outputs_record)."""
    from bench.campaign_writer import demo_shaped_recipe, write_campaign

    path = tmp_path_factory.mktemp("rows") / "c"
    write_campaign(path, demo_shaped_recipe(models=["m-a", "m-b"], seeds=[42, 43], benchmarks={"t1": 24, "t2": 5}))
    return path


@pytest.fixture()
def rows_campaign(rows_made: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "rc"
    shutil.copytree(rows_made, copy, symlinks=True)
    return copy


def failed_checks(campaign: Path) -> list[str]:
    from trace_tui.verify.campaign import verify_campaign

    return [f"{c.id} {c.subject}: {c.message}" for c in verify_campaign(campaign).failed]


def reseal(campaign: Path, change: Any = None, only: str | None = None) -> None:
    """What a careful forger does after editing files: every score.json's inputs and every receipt's outputs and
    content_sha256 made consistent with the files as they now are (``change`` edits the receipt ``only``)."""
    from trace_tui.common.digest import sha256_file, sha256_json
    from trace_tui.engine.receipts import outputs_record

    for score in campaign.glob("outputs/score/**/score.json"):
        data = json.loads(score.read_text())
        source = campaign / data["source"]
        if (campaign / "outputs") in source.parents:  # a source outside is left as it names it (a FIFO there)
            data["inputs"] = {f.relative_to(campaign).as_posix(): sha256_file(f) for f in sorted(source.glob("*.json"))}
        score.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    for receipt in campaign.glob("receipts/**/*.json"):
        rel = receipt.relative_to(campaign).as_posix()
        data = json.loads(receipt.read_text())
        content = data["content"]
        content["outputs"] = outputs_record(campaign, f"outputs/{rel[len('receipts/'):-len('.json')]}")
        if change is not None and rel == only:
            change(content)
        data["content_sha256"] = sha256_json(content)
        receipt.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def test_the_writers_campaign_is_the_engines_format_and_verifies(rows_campaign: Path) -> None:
    from trace_tui.engine.receipts import outputs_record
    from trace_tui.engine.status import campaign_status

    receipt = json.loads((rows_campaign / "receipts/extract/m-a/42/t1.json").read_text())
    assert receipt["content"]["outputs"] == outputs_record(rows_campaign, "outputs/extract/m-a/42/t1")
    assert failed_checks(rows_campaign) == []
    assert campaign_status(rows_campaign)["complete"]
    reseal(rows_campaign)  # the forger's tool changes nothing on an intact campaign
    assert failed_checks(rows_campaign) == []


# --------------------------------------------------------------------------- 4. consistent forgeries


GEN = "outputs/generate/m-a/42/t1"
EXT = "outputs/extract/m-a/42/t1"


def _edit_row(path: Path, **fields: Any) -> None:
    row = json.loads(path.read_text())
    row.update(fields)
    path.write_text(json.dumps(row, indent=2, sort_keys=True) + "\n")


def test_an_extract_row_not_from_its_generate_row_fails_though_every_hash_is_redone(rows_campaign: Path) -> None:
    """The extract row's response_sha256 was never compared with the generate row it came from."""
    _edit_row(rows_campaign / EXT / "rows/000003.json", response_sha256="ab" * 32)
    reseal(rows_campaign)
    failed = failed_checks(rows_campaign)
    assert len(failed) == 1 and "extract m-a/42/t1" in failed[0] and "000003.json" in failed[0] \
        and "response_sha256 is not their generate row's" in failed[0], failed


def test_a_generate_row_whose_response_is_not_its_hash_fails_though_its_receipt_is_redone(rows_campaign: Path) -> None:
    """A row's own hashes: its response_sha256 must be the sha256 of its response."""
    _edit_row(rows_campaign / GEN / "rows/000002.json", response="a better answer")
    reseal(rows_campaign)
    failed = failed_checks(rows_campaign)
    assert any(f"{GEN}/rows/000002.json" in x and "not the sha256 of its response" in x for x in failed), failed


def test_a_receipt_that_lists_no_outputs_fails_though_its_hash_is_redone(rows_campaign: Path) -> None:
    reseal(rows_campaign, change=lambda content: content.update(outputs={}), only="receipts/generate/m-a/42/t1.json")
    failed = failed_checks(rows_campaign)
    assert any("generate m-a/42/t1: its receipt lists no outputs" in x for x in failed), failed
    assert any(f"{GEN}/rows/000000.json: in the job's output folder but not in its receipt" in x for x in failed)


def test_a_row_file_its_receipt_does_not_list_fails(rows_campaign: Path) -> None:
    shutil.copy(rows_campaign / GEN / "rows/000001.json", rows_campaign / GEN / "rows/000099.json")
    failed = failed_checks(rows_campaign)
    assert any(f"{GEN}/rows/000099.json: in the job's output folder but not in its receipt" in x for x in failed)
    reseal(rows_campaign)  # listed now: the extract step has no row 99
    failed = failed_checks(rows_campaign)
    assert failed and all("generate rows without their extract row" in x and "000099.json" in x for x in failed)


def test_a_score_of_another_slices_rows_fails_though_every_hash_is_redone(rows_campaign: Path) -> None:
    score = rows_campaign / "outputs/score/m-a/42/t1/score.json"
    data = json.loads(score.read_text())
    other = json.loads((rows_campaign / "outputs/score/m-b/43/t1/score.json").read_text())
    score.write_text(json.dumps({**other, "source": "outputs/extract/m-b/43/t1/rows"}, indent=2, sort_keys=True))
    reseal(rows_campaign)
    failed = failed_checks(rows_campaign)
    assert any("score m-a/42/t1" in x and "not its slice's rows of the step before it" in x for x in failed), failed
    assert data["source"] == "outputs/extract/m-a/42/t1/rows"


def test_verify_in_worker_processes_is_verify_in_one(rows_campaign: Path) -> None:
    """A large campaign's jobs are checked in a process per core, runs of whole slices each (a generate job's rows
    are tied to its extract job's, an extract job's read again by its score): the same checks in the same order,
    with the same messages, intact and forged, as in one process."""
    from trace_tui.verify.campaign import verify_campaign

    def dump(workers: int) -> str:
        return json.dumps(verify_campaign(rows_campaign, workers=workers).model_dump(), default=str)

    intact = dump(1)
    assert dump(2) == intact and dump(3) == intact
    _edit_row(rows_campaign / EXT / "rows/000003.json", response_sha256="ab" * 32)
    _edit_row(rows_campaign / "outputs/generate/m-b/43/t2/rows/000001.json", response="a better answer")
    reseal(rows_campaign)
    (rows_campaign / "outputs/extract/m-b/42/t1/rows/000005.json").write_text("{}")
    (rows_campaign / "outputs/generate/m-a/43/t2/rows/000000.json").unlink()
    forged = dump(1)
    assert dump(2) == forged and dump(3) == forged
    failed = {c["subject"].split(" ")[-1].split("/rows/")[0] for c in json.loads(forged)["checks"]
              if c["status"] == "failed"}
    assert {"m-a/42/t1", "outputs/generate/m-b/43/t2", "outputs/extract/m-b/42/t1", "outputs/generate/m-a/43/t2"} \
        <= failed, failed


@pytest.mark.parametrize("text", ['{"a": 1}', '{"a": 1}\n', ' {"a": 1}', '{"a": 1}\r\n\t ', '{"a": 1} x',
                                  '{"a": 1}\x0b', '{"a": 1}{}', "", "[1,", "1", "NaN", "\ufeff{}", '{"a": "\\ud800"}'])
def test_a_row_is_parsed_as_json_loads_parses_it(text: str) -> None:
    """verify parses a row file past json.loads's own steps: the same value, or a ValueError where it raises one."""
    from trace_tui.verify.campaign import _json_value

    def parsed(fn: Any) -> Any:
        try:
            return fn(text)
        except ValueError:
            return ValueError
    assert repr(parsed(_json_value)) == repr(parsed(json.loads))


def test_verify_parts_are_runs_of_whole_slices(rows_campaign: Path) -> None:
    """What goes to each worker process: whole slices, in the order the checks are walked, all of them once."""
    from trace_tui.campaign_files.state import read_snapshot
    from trace_tui.verify import campaign as verify

    _meta, _steps, jobs, _subs = read_snapshot(rows_campaign)
    steps = [{"id": s, "run": [f"trace_tui.stages.{s}"], "per_slice": True} for s in ("generate", "extract", "score")]
    walk = verify._JobWalk(rows_campaign, {s["id"]: s for s in steps}, steps, {}, 0, None, None)
    ordered = sorted(jobs, key=lambda j: (j.slice, walk.position[j.step]))
    parts = walk.parts(ordered, 2)
    assert len(parts) > 1 and [j for part in parts for j in part] == ordered
    assert not {j.slice for j in parts[0]} & {j.slice for part in parts[1:] for j in part}
    assert walk.parts(ordered, 1) == [ordered]
    steps[0]["per_slice"] = False  # generate rows of the whole step: tied to every slice's extract rows
    assert walk.parts(ordered, 2) == [ordered]


# --------------------------------------------------------------------------- 5. a score names rows outside


@pytest.mark.parametrize("how", ["dots", "link"])
def test_a_score_source_outside_the_campaign_is_not_read_and_a_fifo_there_does_not_block(
        rows_campaign: Path, tmp_path: Path, how: str) -> None:
    """score.json's "source" is data: stages.score.recompute joined it unchecked ("../../outside" opened the
    files there; a FIFO there blocked verify for ever). `python -m trace_tui verify` with a timeout."""
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(rows_campaign / EXT / "rows/000000.json", outside / "000001.json")
    os.mkfifo(outside / "000000.json")
    score = rows_campaign / "outputs/score/m-a/42/t1/score.json"
    if how == "dots":
        source = "../outside"
    else:
        (rows_campaign / "elsewhere").symlink_to(outside)
        source = "elsewhere"
    data = json.loads(score.read_text())
    data["source"] = source
    score.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    reseal(rows_campaign)
    env = {k: v for k, v in os.environ.items() if k != "TRACE_TUI_DEBUG"}
    out = subprocess.run([sys.executable, "-m", "trace_tui", "verify", "--campaign", str(rows_campaign)],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr
    failed = [x for x in out.stdout.splitlines() if x.startswith("FAILED score")]
    assert len(failed) == 1 and "m-a/42/t1" in failed[0] and repr(source) in failed[0] and \
        ("not a path inside the campaign" in failed[0] or "leads out of the campaign" in failed[0]), out.stdout


# --------------------------------------------------------------------------- 6. complete only when it is


def _damage(campaign: Path, kind: str, output: str, receipt: str) -> None:
    if kind == "row deleted":
        (campaign / output).unlink()
    elif kind == "receipt deleted":
        (campaign / receipt).unlink()
    elif kind == "receipt truncated":
        data = (campaign / receipt).read_bytes()
        (campaign / receipt).write_bytes(data[:len(data) // 2])
    else:  # score.json changed
        score = campaign / output
        data = json.loads(score.read_text())
        data["accuracy"] = 12.345678
        score.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


DAMAGES = ["row deleted", "receipt deleted", "receipt truncated", "score.json changed"]


@pytest.mark.parametrize("kind", DAMAGES)
def test_status_of_a_campaign_with_a_lost_row_or_receipt_or_a_changed_score_is_not_complete(
        rows_campaign: Path, kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    """status said COMPLETE and --fail-if-incomplete exited 0 (a row in a folder of 24, a receipt, score.json)."""
    output = f"{GEN}/rows/000005.json" if kind == "row deleted" else "outputs/score/m-a/42/t1/score.json"
    receipt = "receipts/extract/m-b/43/t2.json"
    _damage(rows_campaign, kind, output, receipt)
    capsys.readouterr()
    assert main(["status", "--campaign", str(rows_campaign), "--fail-if-incomplete"]) == 1
    out = capsys.readouterr().out
    assert "COMPLETE" not in out and " incomplete " in out, out
    job = "extract m-b/43/t2" if "receipt" in kind else "generate m-a/42/t1" if kind == "row deleted" \
        else "score m-a/42/t1"
    (line,) = [x for x in out.splitlines() if x.startswith("not as finished: ")]
    assert line.startswith(f"not as finished: {job}: "), line


def _files(campaign: Path) -> dict[str, bytes]:
    return {p.relative_to(campaign).as_posix(): p.read_bytes()
            for sub in ("outputs", "receipts") for p in sorted((campaign / sub).rglob("*")) if p.is_file()}


@pytest.mark.parametrize("kind", DAMAGES)
def test_a_resume_redoes_exactly_the_damaged_slice_and_moves_what_was_left_aside(
        single: Path, made: dict[str, Path], kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A resume said "campaign complete" and repaired nothing; now it redoes the one slice (the other's files are
    not touched), keeps what was left of it under superseded/, and the campaign is complete and verifies."""
    from trace_tui.engine.recovery import superseded

    output = "outputs/gen/tiny-a/42/t1/" + ("rows.jsonl" if kind == "row deleted" else "score.json")
    receipt = "receipts/gen/tiny-a/42/t1.json"
    before = _files(single)
    _damage(single, kind, output, receipt)
    capsys.readouterr()
    assert main(["--home", str(made["home"]), "--recipe", str(made["recipe"]), "--yes", "--runtime", "local",
                 "--campaign", str(single)]) == 0
    out = capsys.readouterr().out
    assert "gen tiny-a/42/t1 completed" in out and "gen tiny-a/42/t2 running" not in out, out
    after = _files(single)
    assert {k: v for k, v in after.items() if "/t2" in k} == {k: v for k, v in before.items() if "/t2" in k}
    assert after[output] == before[output]  # the selftest rows are seeded per row: the same again
    (kept,) = superseded(single)
    assert (kept["step"], kept["slice"]) == ("gen", "tiny-a/42/t1") and "outputs damaged" in kept["changes"][0]
    assert main(["status", "--campaign", str(single), "--fail-if-incomplete"]) == 0
    assert main(["verify", "--campaign", str(single)]) == 0


# --------------------------------------------------------------------------- the bench's paths, small


def test_the_benchs_paths_on_a_small_campaign(rows_campaign: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """`make bench` (bench/bench_trust.py) times these on a full-size campaign; here each runs once, small:
    status, a resume's planning (Runner.plan with the presence checks), the TUI opening the campaign to its grid
    (a real app, headless, in a fresh process) and verify."""
    from bench.bench_trust import plan_resume, tui_to_grid

    assert main(["status", "--campaign", str(rows_campaign), "--fail-if-incomplete"]) == 0
    _opened, _planned, summary = plan_resume(rows_campaign)
    assert summary == "24 jobs: 24 complete, 0 to resume, 0 invalidated, 0 to run", summary
    (rows_campaign / GEN / "rows/000004.json").unlink()
    _opened, _planned, summary = plan_resume(rows_campaign)
    assert summary.endswith(", 3 to redo (outputs missing or damaged)"), summary  # generate, extract, score
    (tmp_path / "home").mkdir()
    painted, _cpu = tui_to_grid(rows_campaign, tmp_path / "home", runs=1)
    assert painted > 0
    capsys.readouterr()
    assert main(["verify", "--campaign", str(rows_campaign)]) == 1
    assert f"FAILED output   {GEN}/rows/000004.json: output missing" in capsys.readouterr().out


def test_a_generate_row_whose_response_has_no_utf8_form_fails_instead_of_stopping_verify(rows_campaign: Path) -> None:
    """A JSON escape of a lone surrogate (\\ud800) decodes to a string that has no UTF-8 form: hashing it raised
    UnicodeEncodeError out of verify, and out of the generate and extract workers reading such a row."""
    from trace_tui.stages.extract import check_generated_row
    from trace_tui.stages.generate import row_proves_itself
    from trace_tui.stages.jobs import JobError

    path = rows_campaign / GEN / "rows/000002.json"
    path.write_text(path.read_text().replace('"response": "', '"response": "\\ud800', 1))
    reseal(rows_campaign)
    failed = failed_checks(rows_campaign)
    assert any(f"{GEN}/rows/000002.json" in x and "not the sha256 of its response" in x for x in failed), failed
    row = json.loads(path.read_text())
    assert row["response"].startswith("\ud800")
    assert not row_proves_itself(row, path, {row["inputs_sha256"]})
    with pytest.raises(JobError, match="does not match its response_sha256"):
        check_generated_row(row, path)
