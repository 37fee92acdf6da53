"""`trace-tui store ...` end to end through cli.main, on the real release copy and TRACE sample.

The fetch case uses the local HTTP server of test_store_fetch (see its docstring: it plays
the hub and the repository host at the narrowest edge; everything above it is real).
"""

from __future__ import annotations

import json
import stat

from fake_hub import hub  # noqa: F401 - the fixture is used by name
from test_store_fetch import COMMIT, FILES, REPO

from trace_tui.cli import main
from trace_tui.engine.events import Progress, parse_stage_line
from trace_tui.release import release_lock
from trace_tui.store import Store, model_entry, release_entry

LOCK = release_lock()
RELEASE = release_entry(LOCK)


def test_import_list_verify(tmp_path, capsys, trace_release_dir, trace_sample_dir):
    home = str(tmp_path / "home")
    assert main(["store", "import", str(trace_release_dir), "--home", home]) == 0
    assert main(["store", "--home", home, "import", "--local", "dataset/trace-sample",
                 str(trace_sample_dir / "trace-sample.parquet")]) == 0
    out = capsys.readouterr().out
    assert f"stored {RELEASE} (20 files" in out and "119 files absent" in out
    assert "stored local:dataset/trace-sample (unpinned" in out

    assert main(["store", "list", "--json", "--home", home]) == 0
    listed = {e["name"]: e for e in json.loads(capsys.readouterr().out)}
    assert set(listed) == {RELEASE, "local:dataset/trace-sample"}
    assert "validation" in listed[RELEASE]["recipes"] and listed[RELEASE]["pinned"]
    assert not listed["local:dataset/trace-sample"]["pinned"] and listed[RELEASE]["ok"]

    assert main(["store", "verify", "--deep", "--home", home]) == 0
    assert capsys.readouterr().out.count("rehashed") == 2

    stored = Store(tmp_path / "home" / "store").path_of("local:dataset/trace-sample")
    stored.chmod(stored.stat().st_mode | stat.S_IWUSR)
    data = bytearray(stored.read_bytes())
    data[500] ^= 0xFF
    stored.write_bytes(bytes(data))
    stored.chmod(0o444)  # read-only again, as the store left it
    assert main(["store", "verify", "--home", home]) == 0  # same size: only a rehash sees it
    capsys.readouterr()
    assert main(["store", "verify", "--deep", "--home", home]) == 1
    out = capsys.readouterr().out
    assert "FAILED  local:dataset/trace-sample" in out and str(stored) in out


def test_import_refusal_names_the_file(tmp_path, capsys, trace_release_dir):
    import shutil

    src = tmp_path / "copy"
    shutil.copytree(trace_release_dir, src)
    bad = src / "rlvr/evaluation/trace_eval/suite.v1.json"
    bad.chmod(0o644)
    bad.write_bytes(bad.read_bytes() + b" ")
    assert main(["store", "import", str(src), "--home", str(tmp_path / "home")]) == 1
    err = capsys.readouterr().err
    assert f"refused {RELEASE}: {bad}: sha256" in err
    assert main(["store", "import", str(tmp_path / "home"), "--home", str(tmp_path / "h2")]) == 2
    assert "nothing recognisable to import" in capsys.readouterr().err


def test_fetch_entry_with_jsonl_progress(hub, tmp_path, capsys):  # noqa: F811
    hub.add_repo("model", REPO, COMMIT, dict(FILES), {"model.safetensors"})
    name = model_entry(REPO, COMMIT)
    home = str(tmp_path / "home")
    assert main(["store", "fetch", "--entry", name, "--jsonl", "--home", home]) == 0
    events = [parse_stage_line(line) for line in capsys.readouterr().out.splitlines()]
    progress = [e for e in events if isinstance(e, Progress)]
    assert {e.phase for e in progress} >= {f"fetch {f}" for f in FILES}
    assert all(e.model == name for e in progress)
    assert main(["store", "fetch", "--entry", name, "--home", home]) == 0
    assert "0 fetched, 1 already in the store" in capsys.readouterr().out
    assert main(["store", "fetch", "--entry", "model:acme/x@main", "--home", home]) == 2


def test_fetch_local_entry_is_requirements_exit(tmp_path, capsys):
    assert main(["store", "fetch", "--entry", "local:model/tiny", "--home", str(tmp_path)]) == 3
    assert "trace-tui store import --local model/tiny PATH" in capsys.readouterr().out


def test_fetch_for_a_recipe_gets_what_its_steps_read(hub, tmp_path, capsys, trace_release_dir):  # noqa: F811
    from trace_tui.commands.store import recipe_entries

    assert recipe_entries("verify") == [RELEASE]
    commit = LOCK.upstream.commit
    for p in (trace_release_dir / "rlvr").rglob("*"):
        if p.is_file():
            hub.raw[f"/maveryn/trace/{commit}/{p.relative_to(trace_release_dir).as_posix()}"] = p.read_bytes()
    home = str(tmp_path / "home")
    assert main(["store", "fetch", "--recipe", "verify", "--home", home]) == 0
    out = capsys.readouterr().out
    assert f"stored {RELEASE} (20 files" in out and "1 fetched, 0 already in the store" in out
    assert "results.json  " in out and "verified" in out
    from trace_tui.store import missing_entries

    assert missing_entries(home, recipe_entries("verify")) == []
