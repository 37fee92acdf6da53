"""A campaign handed over hides nothing: a damaged state database, a forged or missing row or receipt, a
score that names a file outside the campaign are each found by `status`, `verify --campaign` and a resume.

Real campaigns made by the real CLI (a selftest recipe on the local runtime, about a second), damaged the way
a probe of the landed code found them; `trace_tui.cli.main` in process.
"""

from __future__ import annotations

import shutil
from pathlib import Path

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
