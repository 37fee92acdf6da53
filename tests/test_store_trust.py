"""Trust levels: a copied Hugging Face cache of a pinned model the release publishes no hashes for is
*local* trust at most, `store list` says so, and a recipe that pins that model refuses to run on it.

A real store on disk, a Hugging Face cache written by hand (blobs named by the sha256 of their own
bytes, as anyone can write one), the real CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from trace_tui.release import release_lock
from trace_tui.store import Store
from trace_tui.store import names as N
from trace_tui.store.trust import LOCAL, entry_trust

from tests.test_store_hardening import hub_cache

LOCK = release_lock()
JUDGE = next(n for n in sorted(N.pinned_entries(LOCK)) if n.startswith("model:Qwen/Qwen3-32B@"))


def _cli(home, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRACE_TUI_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "trace_tui", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_a_copied_hub_cache_of_the_judge_is_local_trust_and_the_recipe_refuses_it(tmp_path):
    repo, revision = JUDGE.removeprefix("model:").split("@")
    hub_cache(tmp_path / "hub", repo, revision, {"config.json": b"{}", "model.safetensors": b"FORGED JUDGE"})
    home = tmp_path / "home"
    done = _cli(home, "store", "import", str(tmp_path / "hub"))
    assert done.returncode == 0, done.stderr
    record = Store(home / "store").record(JUDGE)
    assert record is not None and entry_trust(record, LOCK) == LOCAL
    listed = _cli(home, "store", "list")
    assert "trust: local (imported files that vouch only for themselves" in listed.stdout
    as_json = json.loads(_cli(home, "store", "list", "--json").stdout)
    assert {e["name"]: e["trust"] for e in as_json}[JUDGE] == "local"
    preview = _cli(home, "preview", "--recipe", "validation")
    assert f"store  {JUDGE}: present, local (refused: a pinned entry that vouches only for itself)" in preview.stdout
    run = _cli(home, "--recipe", "validation", "--yes", "--runtime", "local", "--campaign", str(tmp_path / "c"))
    assert run.returncode == 3, run.stderr
    assert f"the store's {JUDGE} is local trust: nothing but its own files vouches for them" in run.stderr
    assert f"trace-tui store fetch --entry {JUDGE}" in run.stderr and "Traceback" not in run.stderr
