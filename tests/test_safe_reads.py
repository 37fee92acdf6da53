"""What verify, report and the recipe reader read: only regular files inside the folder given, only so much.

A link out of the release (the whole rlvr/ folder, or one file pointing at /etc/passwd), a FIFO, a link
to /dev/zero, a document past the size cap, an unreadable file or folder: each is a failed check (or
one line), never read, never hashed, never a hang. Links that stay inside keep working. Real files,
real links, real FIFOs; the unreadable cases run the CLI as root without its DAC capabilities
(setpriv), since root reads any file otherwise.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_verify_release import RESULTS, SUITE, copy_release

from trace_tui.common.safe_read import MAX_DOCUMENT_BYTES, Folder, NotRead
from trace_tui.verify.release import verify_release, view_tables

CONFIG_3B = "rlvr/configs/trace-qwen2.5-vl-3b.yaml"
CONFIG_7B = "rlvr/configs/trace-qwen2.5-vl-7b.yaml"
EXAMPLES = "rlvr/examples"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
LINK_OUT = "a link out of the release directory; not read"
NO_DAC = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-dac_override,-dac_read_search", "--"]


@pytest.fixture
def release_copy(tmp_path: Path) -> Path:
    return copy_release(tmp_path / "release")


def _limit_memory() -> None:  # a read that never ends must not take the machine with it
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def cli(*args: str, as_user_without_dac: bool = False, timeout: int = 60) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRACE_TUI_DEBUG"}
    cmd = [sys.executable, "-m", "trace_tui", *args]
    return subprocess.run(NO_DAC + cmd if as_user_without_dac else cmd, capture_output=True, text=True,
                          timeout=timeout, env=env, preexec_fn=_limit_memory)


def one_error_line(out: subprocess.CompletedProcess, code: int, *must: str) -> str:
    assert out.returncode == code, (out.returncode, out.stdout[-2000:], out.stderr)
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    for text in must:
        assert text in lines[0], (text, lines[0])
    return lines[0]


def needs_setpriv() -> None:
    if shutil.which("setpriv") is None or os.geteuid() != 0:
        pytest.skip("needs setpriv and root: root without CAP_DAC_OVERRIDE is what makes 0000 unreadable here")


# ---- the reader ---------------------------------------------------------------------------------------------

def test_the_reader_reads_regular_files_inside_and_refuses_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub/doc.json").write_bytes(b"{}")
    (root / "inside.json").symlink_to("sub/doc.json")
    (root / "linked-sub").symlink_to("sub")
    (tmp_path / "outside.json").write_bytes(b"{}")
    (root / "out.json").symlink_to(tmp_path / "outside.json")
    (root / "zero.json").symlink_to("/dev/zero")
    (root / "dangling.json").symlink_to("nowhere.json")
    os.mkfifo(root / "fifo.json")
    big = root / "big.json"
    with big.open("wb") as fh:  # sparse: 64 MiB and one byte, no disk
        fh.truncate(MAX_DOCUMENT_BYTES + 1)
    folder = Folder(root, "the release directory")
    assert folder.read("sub/doc.json") == b"{}" and folder.read("inside.json") == b"{}"
    assert folder.read("linked-sub/doc.json") == b"{}"
    assert folder.sha256("inside.json") == hashlib.sha256(b"{}").hexdigest()
    assert folder.read("absent.json") is None and folder.sha256("sub/doc.json/x") is None
    for rel, reason in [("out.json", LINK_OUT), ("zero.json", LINK_OUT), ("fifo.json", "not a regular file (a FIFO)"),
                        ("sub", "not a regular file (a directory)"), ("dangling.json", "does not exist"),
                        ("big.json", "larger than 64 MiB")]:
        with pytest.raises(NotRead) as exc:
            folder.read(rel)
        assert reason in exc.value.reason, (rel, exc.value.reason)
    # Hashing streams: a file too large to parse is still hashed.
    assert folder.sha256("big.json") == hashlib.sha256(b"\0" * (MAX_DOCUMENT_BYTES + 1)).hexdigest()


def test_a_device_node_inside_the_release_is_never_opened(tmp_path: Path) -> None:
    try:
        os.mknod(tmp_path / "zero", 0o600 | 0o020000, os.makedev(1, 5))  # /dev/zero's numbers
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")
    with pytest.raises(NotRead, match=r"not a regular file \(a character device\)"):
        Folder(tmp_path).read("zero")


# ---- links out of the release (defect 1) ------------------------------------------------------------------

def test_rlvr_a_link_out_of_the_release_fails_every_file_in_it(tmp_path: Path) -> None:
    release = copy_release(tmp_path / "release")
    shutil.move(release / "rlvr", tmp_path / "elsewhere")
    (release / "rlvr").symlink_to(tmp_path / "elsewhere")
    result = verify_release(release)
    assert not result.ok() and result.exit_code() == 1
    assert result.files_in("verified") == []
    lock = next(c for c in result.checks if c.id == f"lock:{RESULTS}")
    assert (lock.status, lock.message, lock.actual) == ("failed", LINK_OUT, "not read")
    assert {f.path for f in result.files_in("failed")} >= {RESULTS, SUITE, CONFIG_3B}


def test_a_link_to_etc_passwd_is_not_read_and_no_hash_of_it_is_printed(release_copy: Path) -> None:
    (release_copy / SUITE).unlink()
    (release_copy / SUITE).symlink_to("/etc/passwd")
    out = cli("verify", "--release-dir", str(release_copy), "--json")
    assert out.returncode == 1, out.stderr
    passwd_sha = hashlib.sha256(Path("/etc/passwd").read_bytes()).hexdigest()
    assert passwd_sha not in out.stdout + out.stderr
    data = json.loads(out.stdout)
    lock = next(c for c in data["checks"] if c["id"] == f"lock:{SUITE}")
    assert (lock["status"], lock["message"], lock["actual"]) == ("failed", LINK_OUT, "not read")
    assert next(f for f in data["files"] if f["path"] == SUITE)["state"] == "failed"


def test_links_that_stay_inside_the_release_keep_working(tmp_path: Path) -> None:
    release = copy_release(tmp_path / "release")
    shutil.move(release / "rlvr", release / "kept-rlvr")
    (release / "rlvr").symlink_to("kept-rlvr")
    shutil.move(release / RESULTS, release / "results-copy.json")
    (release / RESULTS).symlink_to(release / "results-copy.json")
    result = verify_release(release)
    assert result.failed == [] and result.ok(), [c.message for c in result.failed]
    assert len(result.files_in("verified")) == 20


def test_report_reads_no_results_json_through_a_link_out(tmp_path: Path) -> None:
    release = copy_release(tmp_path / "release")
    shutil.copy(release / RESULTS, tmp_path / "res.json")
    (release / RESULTS).unlink()
    (release / RESULTS).symlink_to(tmp_path / "res.json")
    one_error_line(cli("report", "--release-dir", str(release)), 1, RESULTS, LINK_OUT)


# ---- FIFOs, devices, size (defect 2) ---------------------------------------------------------------------

def test_a_fifo_config_fails_instead_of_hanging_verify(release_copy: Path) -> None:
    """A fresh interpreter: the YAML is parsed in a forked child there, which must not open the FIFO either."""
    (release_copy / CONFIG_3B).unlink()
    os.mkfifo(release_copy / CONFIG_3B)
    out = cli("verify", "--release-dir", str(release_copy), timeout=30)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert f"FAIL {CONFIG_3B}: document:{CONFIG_3B}: not a regular file (a FIFO); not read" in out.stdout
    assert f"PASS   {CONFIG_7B}  [readable document]" in out.stdout  # the other config still parsed


def test_a_config_linked_to_dev_zero_fails_instead_of_filling_memory(release_copy: Path) -> None:
    (release_copy / CONFIG_3B).unlink()
    (release_copy / CONFIG_3B).symlink_to("/dev/zero")
    out = cli("verify", "--release-dir", str(release_copy), timeout=30)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert f"FAIL {CONFIG_3B}: document:{CONFIG_3B}: {LINK_OUT}" in out.stdout


def test_a_document_past_the_size_cap_is_not_read(release_copy: Path) -> None:
    with (release_copy / RESULTS).open("r+b") as fh:
        fh.truncate(MAX_DOCUMENT_BYTES + 1)
    result = verify_release(release_copy)
    doc = next(c for c in result.checks if c.id == f"document:{RESULTS}")
    assert doc.status == "failed" and "larger than 64 MiB" in doc.message, doc.message
    one_error_line(cli("report", "--release-dir", str(release_copy)), 1, RESULTS, "larger than 64 MiB")


YAML_CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from trace_tui.verify import yaml_docs

    ahead = yaml_docs.BackgroundParse(Path(sys.argv[1]), sys.argv[2:])
    print(json.dumps({"forked": bool(ahead._pid), "parsed": sorted(ahead._collect())}))
""")


def test_the_yaml_child_reads_as_the_verifier_does(tmp_path: Path) -> None:
    """The forked child reads the configs itself: a FIFO, a link out and a link to /dev/zero are left alone."""
    (tmp_path / "rlvr").mkdir()
    (tmp_path / "rlvr/ok.yaml").write_text("a: 1\n")
    os.mkfifo(tmp_path / "rlvr/fifo.yaml")
    (tmp_path / "secret.yaml").write_text("b: 2\n")
    (tmp_path / "release").mkdir()
    shutil.move(tmp_path / "rlvr", tmp_path / "release/rlvr")
    (tmp_path / "release/rlvr/out.yaml").symlink_to(tmp_path / "secret.yaml")
    (tmp_path / "release/rlvr/zero.yaml").symlink_to("/dev/zero")
    paths = ["rlvr/ok.yaml", "rlvr/fifo.yaml", "rlvr/out.yaml", "rlvr/zero.yaml"]
    out = subprocess.run([sys.executable, "-c", YAML_CHILD, str(tmp_path / "release"), *paths], capture_output=True,
                         text=True, timeout=30, check=True, preexec_fn=_limit_memory)
    assert json.loads(out.stdout) == {"forked": True, "parsed": ["rlvr/ok.yaml"]}


RECIPE_READER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from trace_tui.campaign_files.recipe_file import read_campaign_recipe

    try:
        read_campaign_recipe(Path(sys.argv[1]))
    except Exception as exc:
        print(type(exc).__name__, exc.line())
""")


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "too-large"])
def test_a_recipe_json_that_is_not_a_regular_document_is_one_line(tmp_path: Path, kind: str) -> None:
    recipe = tmp_path / "recipe.json"
    if kind == "fifo":
        os.mkfifo(recipe)
    elif kind == "dev-zero":
        recipe.symlink_to("/dev/zero")
    else:
        with recipe.open("wb") as fh:
            fh.truncate(MAX_DOCUMENT_BYTES + 1)
    out = subprocess.run([sys.executable, "-c", RECIPE_READER, str(tmp_path)], capture_output=True, text=True,
                         timeout=30, preexec_fn=_limit_memory)
    want = {"fifo": "not a regular file (a FIFO)", "dev-zero": "not a regular file (a character device)",
            "too-large": "larger than 64 MiB"}[kind]
    assert out.stdout.startswith(f"CheckFailed {recipe}: {want}"), (out.stdout, out.stderr)


# ---- unreadable is not absent (defects 3, 4) -------------------------------------------------------------

def test_an_unreadable_folder_fails_its_files_instead_of_absent(release_copy: Path) -> None:
    needs_setpriv()
    (release_copy / EXAMPLES).chmod(0)
    try:
        out = cli("verify", "--release-dir", str(release_copy), "--json", as_user_without_dac=True)
    finally:
        (release_copy / EXAMPLES).chmod(0o755)
    assert out.returncode == 1, out.stderr
    data = json.loads(out.stdout)
    inside = [f for f in data["files"] if f["path"].startswith(EXAMPLES + "/")]
    assert inside and {f["state"] for f in inside} == {"failed"}, inside
    assert any(c["file"] == EXAMPLES + "/" and c["status"] == "failed" and "cannot be listed" in c["message"]
               for c in data["checks"])
    declared = [c for c in data["checks"] if c["group"] == "declared" and c["file"].startswith(EXAMPLES + "/")]
    assert declared and all(c["status"] == "failed" and "cannot be read (Permission denied)" in c["message"]
                            and c["actual"] == "not read" for c in declared)


def test_an_unreadable_file_says_so_and_prints_no_empty_hash(release_copy: Path) -> None:
    needs_setpriv()
    (release_copy / CONFIG_3B).chmod(0)
    (release_copy / SUITE).chmod(0)
    out = cli("verify", "--release-dir", str(release_copy), "--json", as_user_without_dac=True)
    assert out.returncode == 1, out.stderr
    assert EMPTY_SHA256 not in out.stdout
    checks = {c["id"]: c for c in json.loads(out.stdout)["checks"]}
    doc = checks[f"document:{CONFIG_3B}"]
    assert doc["message"] == "cannot be read (Permission denied)" and doc["actual"] == "not read"
    lock = checks[f"lock:{SUITE}"]
    assert (lock["status"], lock["message"], lock["actual"]) == ("failed", "cannot be read (Permission denied)",
                                                                  "not read")


def test_an_unreadable_release_root_or_rlvr_is_one_line_or_failed_checks(release_copy: Path) -> None:
    needs_setpriv()
    release_copy.chmod(0)
    try:
        one_error_line(cli("verify", "--release-dir", str(release_copy), as_user_without_dac=True), 2,
                       str(release_copy), "cannot be read (Permission denied)")
        one_error_line(cli("report", "--release-dir", str(release_copy), as_user_without_dac=True), 2,
                       str(release_copy), "cannot be read (Permission denied)")
    finally:
        release_copy.chmod(0o755)
    (release_copy / "rlvr").chmod(0)
    try:
        out = cli("verify", "--release-dir", str(release_copy), as_user_without_dac=True)
        report = cli("report", "--release-dir", str(release_copy), as_user_without_dac=True)
    finally:
        (release_copy / "rlvr").chmod(0o755)
    assert out.returncode == 1 and "Traceback" not in out.stderr and "internal error" not in out.stderr, out.stderr
    assert f"FAIL {RESULTS}: lock:{RESULTS}: cannot be read (Permission denied)" in out.stdout
    assert "FAIL rlvr/: readable:rlvr/: cannot be listed (Permission denied)" in out.stdout
    one_error_line(report, 1, RESULTS, "cannot be read (Permission denied)")


def test_a_log_file_that_is_a_fifo_is_one_line_at_once(tmp_path, trace_release_dir):
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "trace_tui", "verify", "--release-dir", str(trace_release_dir),
                           "--log-file", str(fifo)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and f"--log-file {fifo}: a FIFO" in proc.stderr


def test_the_tables_tab_reads_no_results_through_a_link_out(tmp_path, trace_release_dir):
    """The TUI's Tables tab (trace_tui.verify.release.view_tables) reads as verify reads."""
    release = copy_release(tmp_path / "release")
    outside = tmp_path / "outside-validation.json"
    target = release / "rlvr/evaluation/trace_validation/results.v1.json"
    outside.write_bytes(target.read_bytes())
    target.unlink()
    target.symlink_to(outside)
    result = verify_release(release)
    original = [c for c in result.checks if c.group in ("results", "aggregates")]
    assert original and all(c.status == "passed" for c in original)  # the results themselves are fine
    assert view_tables(result) == []
