"""The release's own evaluator, laid out from its pinned sources as the GPU images lay it out.

The images fetch maveryn/trace at af32fe0 into /opt/trace and open-compass/VLMEvalKit at
a8b12bf into /opt/trace/external/VLMEvalKit (both git checkouts: the launcher asks git for
both HEADs and fingerprints the VLMEvalKit worktree with `git ls-files`), then run the
release's setup, which applies the TRACE extensions to VLMEvalKit and fills
rlvr/evaluation/.work/eval_deps. Offline, the same sources come from the archives in
../shared/evaluator (its README): the rlvr/ tree is checked by its tree hash, VLMEvalKit
by its commit and tree. Nothing from them is copied into this repository; the layout is
built under pytest's temporary directory once per session.

`release_evaluator` is that checkout, shared and never written by tests (scripts that
write are pointed at a test's own directories; the worker writes only into the campaign);
`evaluator_checkout` is a private copy for a test that changes the checkout (the stand-in
launcher). `release_judge_source` holds only the release's judge module, where the extract
worker reads the judge's system prompt.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TRACE_ARCHIVE = "trace-rlvr-af32fe0.tar.gz"
VLMEVALKIT_ARCHIVE = "vlmevalkit-a8b12bf.git.tar.gz"
RLVR_TREE = "2f12a1fd7f861dbbe8296cff7094cad1bfe590d8"
VLMEVALKIT_COMMIT = "a8b12bf1c3737a33fc1de967c202f9c592b22e86"
VLMEVALKIT_TREE = "836a6cde23c878f111ff01a595f6cff8c0ffe69e"
SCRIPTS = "rlvr/evaluation/scripts"
# A fixed identity and date, so the stand-in commit of the rlvr/ tree is the same on every machine.
_GIT_ENV = {"GIT_AUTHOR_NAME": "release", "GIT_AUTHOR_EMAIL": "release@invalid", "GIT_COMMITTER_NAME": "release",
            "GIT_COMMITTER_EMAIL": "release@invalid", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
            "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def evaluator_sources() -> Path:
    return Path(os.environ.get("TRACE_EVALUATOR_SOURCES", REPO.parent / "shared" / "evaluator")).resolve()


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **_GIT_ENV}
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def lay_out(sources: Path, root: Path) -> Path:
    """The checkout at ROOT (the images' /opt/trace), verified against the pins; returns ROOT."""
    root.mkdir(parents=True)
    with tarfile.open(sources / TRACE_ARCHIVE) as tar:
        tar.extractall(root, filter="data")
    _git(root, "init", "-q")
    _git(root, "add", "-A", "rlvr")
    tree = _git(root, "rev-parse", f"{_git(root, 'write-tree')}:rlvr")
    assert tree == RLVR_TREE, f"{sources / TRACE_ARCHIVE}: rlvr/ tree {tree}, pinned {RLVR_TREE}"
    _git(root, "commit", "-q", "-m", "rlvr at af32fe0e668eb878e909daef7322ac1c4ae20f64")
    vlm = root / "external" / "VLMEvalKit"
    vlm.mkdir(parents=True)
    with tarfile.open(sources / VLMEVALKIT_ARCHIVE) as tar:
        tar.extractall(vlm, filter="data")
    _git(vlm, "reset", "-q", "--hard")
    head, vtree = _git(vlm, "rev-parse", "HEAD"), _git(vlm, "rev-parse", "HEAD^{tree}")
    assert (head, vtree) == (VLMEVALKIT_COMMIT, VLMEVALKIT_TREE), \
        f"{sources / VLMEVALKIT_ARCHIVE}: HEAD {head} tree {vtree}, pinned {VLMEVALKIT_COMMIT} {VLMEVALKIT_TREE}"
    # What setup_trace_eval_env.sh does at image build after the checkout: the TRACE extensions
    # applied to VLMEvalKit, and the dependency target (the test venv has the packages).
    subprocess.run([sys.executable, f"{SCRIPTS}/apply_vlmevalkit_trace_extensions.py"], cwd=root, check=True,
                   capture_output=True)
    (root / "rlvr" / "evaluation" / ".work" / "eval_deps").mkdir(parents=True)
    return root


def script_env(**extra: str) -> dict[str, str]:
    """The environment the scripts run in: this venv's python first, as the images put theirs."""
    bindir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", ""), "PYTHON_BIN": sys.executable,
            **extra}


def run_script(checkout: Path, script: str, *args: str, env: dict[str, str] | None = None,
               timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """One of the release's scripts, run from the checkout root as its guide does."""
    path = f"{SCRIPTS}/{script}"
    argv = ["bash", path, *args] if script.endswith(".sh") else [sys.executable, path, *args]
    return subprocess.run(argv, cwd=checkout, env=env or script_env(), capture_output=True, text=True,
                          timeout=timeout, check=False)


STAND_IN = Path(__file__).parent / "fake_evaluator"


def copy_checkout(checkout: Path, dest: Path) -> Path:
    shutil.copytree(checkout, dest, symlinks=True)
    return dest


def install_stand_in(checkout: Path) -> Path:
    """The launcher's GPU part replaced by the stand-in (tests/fake_evaluator); `--print-config`, every
    other script and VLMEvalKit stay the release's. The stand-in's environment: stand_in_env()."""
    launcher = checkout / SCRIPTS / "run_trace_eval.sh"
    launcher.rename(launcher.with_name("run_trace_eval.real.sh"))
    shutil.copy(STAND_IN / "run_trace_eval.sh", launcher)
    return checkout


def stand_in_env(spec: Path) -> dict[str, str]:
    return {"FAKE_EVAL_SPEC": str(spec), "FAKE_EVAL_LAUNCHER": str(STAND_IN / "fake_launcher.py"),
            "FAKE_EVAL_TESTS": str(Path(__file__).parent), "PYTHON_BIN": sys.executable}


JUDGE_SOURCE = "rlvr/evaluation/trace_validation/judge_extract.py"


@pytest.fixture(scope="session")
def release_judge_source(tmp_path_factory) -> Path:
    """A folder holding only the release's judge module (judge_extract.py, read from the rlvr/ archive at its
    pinned path): where the extract worker reads the judge's system prompt (TRACE_TUI_EVALUATOR)."""
    root = tmp_path_factory.mktemp("release-judge")
    with tarfile.open(evaluator_sources() / TRACE_ARCHIVE) as tar:
        tar.extractall(root, members=[tar.getmember(JUDGE_SOURCE)], filter="data")
    return root


@pytest.fixture()
def release_judge(release_judge_source, monkeypatch) -> Path:
    """TRACE_TUI_EVALUATOR at the release's judge source, for this test."""
    monkeypatch.setenv("TRACE_TUI_EVALUATOR", str(release_judge_source))
    return release_judge_source


@pytest.fixture(scope="session")
def release_evaluator(tmp_path_factory) -> Path:
    sources = evaluator_sources()
    for name in (TRACE_ARCHIVE, VLMEVALKIT_ARCHIVE):
        assert (sources / name).is_file(), f"{sources / name}: missing (TRACE_EVALUATOR_SOURCES)"
    return lay_out(sources, tmp_path_factory.mktemp("release-evaluator") / "trace")


@pytest.fixture()
def evaluator_checkout(release_evaluator, tmp_path) -> Path:
    """A private copy of the laid-out checkout (a worker writes links into its `.work`)."""
    return copy_checkout(release_evaluator, tmp_path / "trace")
