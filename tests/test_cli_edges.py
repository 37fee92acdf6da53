"""The smaller edges of the command line: paths that cannot be used, a standard output that cannot be written,
values out of range, credentials in a URL, the disk a run writes, a full disk's step, control characters.

Each is one line on stderr with the README's exit code, never `internal error`. Real `python -m trace_tui`
processes and real files; a real tmpfs (root mounts it) for a small filesystem; a folder this user may not read
is made so by running trace-tui without the capabilities that let root read any folder (setpriv), as an
ordinary user runs it; a local HTTP server stands in for the raw file host (no network here). The full-disk
step test injects ENOSPC at the receipt write, the narrowest edge the engine owns, as test_never_erase does.
"""

from __future__ import annotations

import base64
import errno
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from test_engine_support import make_recipe, resolved_for, selftest_step

from tests.tmpfs import tmpfs

REPO = Path(__file__).resolve().parents[1]

HOST_RECIPE = """name: edgetest
title: edge test
purpose: rows on the host
canonical: false
selection: {{suite: demo, seeds: all, benchmarks: all}}
local_models:
  - {{id: tiny-a, label: A, store_entry: "local:model/tiny-a"}}
demo_tasks:
  - {{key: t1, rows: 3}}
steps:
  - {{id: gen, title: rows, stage: host, per_slice: true, run: [trace_tui.stages.selftest, rows]{needs}}}
"""


def env_for(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TRACE_TUI_DEBUG", "TRACE_TUI_FAKE_NVML")}
    env.update(TRACE_TUI_HOME=str(tmp / "home"), **extra)
    return env


def cli(tmp: Path, *args: str, prefix: tuple[str, ...] = (), **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-m", "trace_tui", *args], capture_output=True, text=True,
                          cwd=REPO, env=env_for(tmp, **extra), timeout=180)


def one_line(out: subprocess.CompletedProcess, code: int, *must: str) -> str:
    lines = [x for x in out.stderr.splitlines() if x.strip() and not re.match(r"^\S+Z \[(info|warning|error)", x)]
    assert out.returncode == code, (out.returncode, out.stderr)
    assert len(lines) == 1, out.stderr
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr, out.stderr
    for text in must:
        assert text in lines[0], (text, lines[0])
    return lines[0]


def recipe_file(tmp: Path, needs: str = "") -> Path:
    path = tmp / "r.yaml"
    path.write_text(HOST_RECIPE.format(needs=needs))
    return path


# -- paths that cannot be used ----------------------------------------------------------------

def _long(tmp: Path) -> Path:
    return tmp / ("a" * 300)


def _loop(tmp: Path) -> Path:
    (tmp / "loop-a").symlink_to(tmp / "loop-b")
    (tmp / "loop-b").symlink_to(tmp / "loop-a")
    return tmp / "loop-a"


def _file(tmp: Path) -> Path:
    (tmp / "a-file").write_text("x")
    return tmp / "a-file"


@pytest.mark.parametrize("make,words", [(_long, "too long"), (_loop, "symbolic link loop"),
                                        (_file, "is a file, not a campaign directory")])
@pytest.mark.parametrize("command", ["status", "verify", "run"])
def test_a_campaign_path_that_cannot_be_used_is_one_line(tmp_path: Path, make, words: str, command: str) -> None:
    where = make(tmp_path)
    args = {"status": ["status", "--campaign", str(where)], "verify": ["verify", "--campaign", str(where)],
            "run": ["--recipe", str(recipe_file(tmp_path)), "--yes", "--runtime", "local", "--campaign",
                    str(where / "c" if make is _long else where)]}[command]
    line = one_line(cli(tmp_path, *args), 2, words, "--campaign")
    assert "no such directory" not in line


def _without_root_reading() -> tuple[str, ...]:
    """Run as root without CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH: folder permissions then apply, as to a user."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return ()
    caps = "-dac_override,-dac_read_search"
    return ("setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}", "--")


@pytest.mark.parametrize("command", ["status", "verify", "run"])
def test_a_folder_this_user_may_not_read_is_one_line(tmp_path: Path, command: str) -> None:
    prefix = _without_root_reading()
    if os.geteuid() == 0 and not prefix:
        pytest.skip("root reads any folder and setpriv is not there to drop that")
    closed = tmp_path / "closed"
    (closed / "c").mkdir(parents=True)
    closed.chmod(0)
    try:
        where = closed / "c"
        args = {"status": ["status", "--campaign", str(where)], "verify": ["verify", "--campaign", str(where)],
                "run": ["--recipe", str(recipe_file(tmp_path)), "--yes", "--runtime", "local", "--campaign",
                        str(where)]}[command]
        line = one_line(cli(tmp_path, *args, prefix=prefix), 2, "permission denied", str(where))
        assert "not a campaign" not in line
    finally:
        closed.chmod(0o755)


def test_control_characters_in_a_path_are_written_escaped(tmp_path: Path) -> None:
    where = tmp_path / "a\nb\x1b[31mred"
    out = cli(tmp_path, "status", "--campaign", str(where))
    line = one_line(out, 2, "a\\nb\\x1b[31mred")
    assert "\x1b" not in out.stderr


# -- standard output ---------------------------------------------------------------------------

@pytest.mark.parametrize("command", [["recipes"], ["verify", "--release-dir", "{release}"]])
def test_a_full_standard_output_is_one_line(tmp_path: Path, trace_release_dir: Path, command: list[str]) -> None:
    args = [a.replace("{release}", str(trace_release_dir)) for a in command]
    with open("/dev/full", "w") as full:
        out = subprocess.run([sys.executable, "-m", "trace_tui", *args], stdout=full, stderr=subprocess.PIPE,
                             text=True, cwd=REPO, env=env_for(tmp_path), timeout=180)
    one_line(out, 2, "standard output", "No space left on device")


def test_standard_output_on_a_full_filesystem_is_one_line(tmp_path: Path) -> None:
    mnt = tmp_path / "fs"
    with tmpfs(mnt, "size=64k") as mounted:
        if not mounted:
            pytest.skip("mounting a tmpfs is not permitted here")
        with open(mnt / "filler", "wb", buffering=0) as fh:
            try:
                while True:
                    fh.write(b"\0" * 4096)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
        with open(mnt / "out.txt", "w") as dest:
            out = subprocess.run([sys.executable, "-m", "trace_tui", "recipes"], stdout=dest, stderr=subprocess.PIPE,
                                 text=True, cwd=REPO, env=env_for(tmp_path), timeout=180)
        one_line(out, 2, "standard output")


def test_a_closed_standard_output_is_one_line(tmp_path: Path) -> None:
    out = subprocess.run(["bash", "-c", f"{shlex_join([sys.executable, '-m', 'trace_tui', 'recipes'])} >&-"],
                         capture_output=True, text=True, cwd=REPO, env=env_for(tmp_path), timeout=180)
    one_line(out, 2, "standard output is closed")


def shlex_join(argv: list[str]) -> str:
    import shlex

    return shlex.join(argv)


# -- values ------------------------------------------------------------------------------------

def test_seeds_have_the_recipe_files_range(tmp_path: Path) -> None:
    from trace_tui.commands.arguments import SEED_MAX
    from trace_tui.recipe.catalog import SEED_RANGE

    assert (0, SEED_MAX) == SEED_RANGE
    for seed in ("-1", "1" * 35, "4294967296"):
        one_line(cli(tmp_path, "preview", "--recipe", "demo", "--seeds", seed), 2, "--seeds", "4294967295")
    campaign = tmp_path / "c"
    one_line(cli(tmp_path, "--recipe", str(recipe_file(tmp_path)), "--yes", "--runtime", "local", "--seeds",
                 "9" * 35, "--campaign", str(campaign)), 2, "--seeds")
    assert not campaign.exists()  # refused before anything was made
    assert cli(tmp_path, "preview", "--recipe", "demo", "--seeds", "4294967295").returncode == 0  # the top is a seed


@pytest.mark.parametrize("value", ["0", "100000", "1" * 40])
def test_max_parallel_is_bounded_and_says_the_bound(tmp_path: Path, value: str) -> None:
    one_line(cli(tmp_path, "--recipe", "demo", "--scheduler", "slurm", "--max-parallel", value, "--dry-run"), 2,
             "--max-parallel", "1 to 1000")


@pytest.mark.parametrize("argv", [["--home", "", "recipes"], ["recipes", "--home", ""],
                                  ["--home", "", "--recipe", "demo", "--yes"], ["store", "list", "--home", ""],
                                  ["bundle", "export", "x", "--recipe", "demo", "--home", ""]])
def test_an_empty_home_is_a_usage_error(tmp_path: Path, argv: list[str]) -> None:
    one_line(cli(tmp_path, *argv), 2, "--home", "empty")


# -- credentials in TRACE_TUI_RELEASE_URL -------------------------------------------------------

class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[str | None] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        type(self).seen.append(self.headers.get("Authorization"))
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET  # noqa: N815

    def log_message(self, *args) -> None:
        pass


def test_credentials_in_the_release_url_are_sent_never_printed(tmp_path: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://alice:s3cret-pw@127.0.0.1:{server.server_address[1]}"
        out = cli(tmp_path, "store", "fetch", "--entry", "paper:maveryn/trace", TRACE_TUI_RELEASE_URL=url)
    finally:
        server.shutdown()
    assert out.returncode != 0
    assert "s3cret-pw" not in out.stdout + out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert f"Basic {base64.b64encode(b'alice:s3cret-pw').decode()}" in _Recorder.seen
    assert not any("s3cret" in p.read_text(errors="replace") for p in (tmp_path / "home").rglob("*") if p.is_file())


# -- the disk a run writes -----------------------------------------------------------------------

def test_the_disk_check_measures_the_campaigns_filesystem(tmp_path: Path) -> None:
    from trace_tui import hardware

    mnt = tmp_path / "small"
    with tmpfs(mnt, "size=1m") as mounted:
        if not mounted:
            pytest.skip("mounting a tmpfs is not permitted here")
        report = hardware.hardware_report(tmp_path / "home", campaign=mnt / "c")
        assert report.campaign_disk is not None and report.campaign_disk.path == str(mnt / "c")
        assert report.campaign_disk.total_bytes <= 1 << 20 < report.disk.total_bytes
        recipe = recipe_file(tmp_path, needs=", needs: {disk_gib: 0.5}")
        out = cli(tmp_path, "--recipe", str(recipe), "--yes", "--runtime", "local", "--campaign", str(mnt / "c"))
        one_line(out, 3, "needs 0.5 GiB free under " + str(mnt / "c"))
        assert not (mnt / "c").exists()


def test_a_full_disk_leaves_the_step_failed_with_its_line(tmp_path: Path, monkeypatch) -> None:
    """ENOSPC at the receipt write: the step is failed (not `running`) in the state, in the events the TUI and the
    headless printer read, and in `status`, with the one line the run stopped with."""
    from trace_tui.engine import receipts as receipts_module
    from trace_tui.engine.campaign import Campaign
    from trace_tui.engine.events import StepState
    from trace_tui.engine.runner import Runner
    from trace_tui.engine.status import campaign_status, render_status
    from trace_tui.errors import CheckFailed
    from trace_tui.runtime.local import LocalRuntime

    real = receipts_module.atomic_write_json

    def full(path, obj):
        if "/receipts/" in str(path):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, obj)

    monkeypatch.setattr(receipts_module, "atomic_write_json", full)
    events: list = []
    resolved = resolved_for(make_recipe([selftest_step("gen", "rows", image=None)]))
    with Campaign(tmp_path / "c") as c, pytest.raises(CheckFailed) as err:
        Runner(resolved, c, LocalRuntime(), store=tmp_path / "store").run(events.append)
    line = err.value.line()
    assert "no space left on device writing" in line
    last = [e for e in events if isinstance(e, StepState) and e.step == "gen"][-1]
    assert (last.state, last.message) == ("failed", line)
    status = campaign_status(tmp_path / "c")
    gen = next(s for s in status["steps"] if s["step"] == "gen")
    assert gen["state"] == "failed" and "no space left" in (gen["message"] or ""), gen
    shown = next(x for x in render_status(status).splitlines() if x.startswith("gen "))
    assert "failed" in shown and "running" not in shown, shown
