"""The release evaluator's sources for the gpu infer/score images, verified against the release lock.

The images run the release's own evaluator (the rlvr/ tree of maveryn/trace and VLMEvalKit) at the
pinned commits. It comes from one of:

- a local source the user names (``--evaluator-source DIR``): the two archives of an evaluator bundle
  (``trace-rlvr-*.tar.gz``: ``git archive COMMIT rlvr``; ``vlmevalkit-*.git.tar.gz``: a shallow ``.git``
  at the commit), or a checkout holding ``rlvr/`` and ``external/VLMEvalKit/.git``;
- the network (no source named): a shallow fetch of each repository at its pinned commit.

Either way the result is verified the same way before it enters a build context: the tree of rlvr/
equals the lock's ``upstream.rlvr_tree``, VLMEvalKit's HEAD and tree equal ``vlmevalkit.commit/tree``.
The image build checks both again inside the image. Nothing of the evaluator is copied into this
repository: it is staged in a temporary build context only.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from trace_tui.errors import CheckFailed, UsageError
from trace_tui.release import ReleaseLock

RLVR_TAR = "rlvr.tar"
VLMEVALKIT_GIT_TAR = "vlmevalkit-git.tar"


def _git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", "-c", "safe.directory=*", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise CheckFailed(f"git {' '.join(args)} in {cwd} failed: {done.stderr.strip().splitlines()[-1:]}")
    return done.stdout.strip()


def rlvr_tree(root: Path) -> str:
    """The git tree hash of ROOT/rlvr, computed from the files (no history needed)."""
    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / "index"
        subprocess.run(["git", "init", "-q", str(Path(tmp) / "git")], check=True, capture_output=True)
        env_args = ("--git-dir", str(Path(tmp) / "git" / ".git"), "--work-tree", str(root))
        done = subprocess.run(["git", *env_args, "add", "-A", "rlvr"], cwd=root, capture_output=True, text=True,
                              env={"GIT_INDEX_FILE": str(index), "PATH": "/usr/bin:/bin"})
        if done.returncode != 0:
            raise CheckFailed(f"hashing {root / 'rlvr'} failed: {done.stderr.strip()}")
        tree = subprocess.run(["git", *env_args, "write-tree"], cwd=root, capture_output=True, text=True,
                              env={"GIT_INDEX_FILE": str(index), "PATH": "/usr/bin:/bin"}).stdout.strip()
        return _git("--git-dir", str(Path(tmp) / "git" / ".git"), "rev-parse", f"{tree}:rlvr", cwd=root)


def _fetch(repository: str, commit: str, dest: Path) -> None:
    dest.mkdir(parents=True)
    _git("init", "-q", cwd=dest)
    _git("fetch", "-q", "--depth", "1", repository, commit, cwd=dest)
    _git("checkout", "-q", "--detach", "FETCH_HEAD", cwd=dest)


def _unpack_source(source: Path | None, rel: ReleaseLock, work: Path) -> tuple[Path, Path]:
    """(a directory holding rlvr/, a VLMEvalKit repository with its .git) under WORK."""
    if source is None:
        trace = work / "trace"
        _fetch(f"https://github.com/{rel.upstream.repository}.git", rel.upstream.commit, trace)
        vlm = work / "VLMEvalKit"
        _fetch(f"https://github.com/{rel.vlmevalkit.repository}.git", rel.vlmevalkit.commit, vlm)
        return trace, vlm
    if not source.is_dir():
        raise UsageError(f"evaluator source {source} is not a directory",
                         hint="name the folder holding the two evaluator archives, or a checkout with rlvr/")
    if (source / "rlvr").is_dir() and (source / "external" / "VLMEvalKit" / ".git").is_dir():
        return source, source / "external" / "VLMEvalKit"
    rlvr_archives = sorted(source.glob("trace-rlvr-*.tar.gz"))
    vlm_archives = sorted(source.glob("vlmevalkit-*.git.tar.gz"))
    if len(rlvr_archives) != 1 or len(vlm_archives) != 1:
        raise UsageError(f"evaluator source {source}: expected one trace-rlvr-*.tar.gz and one "
                         f"vlmevalkit-*.git.tar.gz (found {len(rlvr_archives)} and {len(vlm_archives)}), "
                         "or a checkout with rlvr/ and external/VLMEvalKit/.git",
                         hint="point --evaluator-source (EVALUATOR_SOURCE) at the evaluator bundle")
    trace, vlm = work / "trace", work / "VLMEvalKit"
    for archive, dest in ((rlvr_archives[0], trace), (vlm_archives[0], vlm)):
        dest.mkdir(parents=True)
        with tarfile.open(archive) as tar:
            tar.extractall(dest, filter="data")
    _git("reset", "-q", "--hard", cwd=vlm)
    return trace, vlm


def stage_evaluator(source: Path | None, rel: ReleaseLock, dest: Path) -> dict[str, dict[str, str]]:
    """Verify the evaluator source against the release lock and write DEST/rlvr.tar and
    DEST/vlmevalkit-git.tar for a build context; returns the commits and trees it verified."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        trace, vlm = _unpack_source(source, rel, Path(tmp))
        where = "the network" if source is None else str(source)
        tree = rlvr_tree(trace)
        if tree != rel.upstream.rlvr_tree:
            raise CheckFailed(f"the evaluator's rlvr/ from {where} has tree {tree}, the release lock pins "
                              f"{rel.upstream.rlvr_tree} (upstream.rlvr_tree)")
        head, vtree = _git("rev-parse", "HEAD", cwd=vlm), _git("rev-parse", "HEAD^{tree}", cwd=vlm)
        if (head, vtree) != (rel.vlmevalkit.commit, rel.vlmevalkit.tree):
            raise CheckFailed(f"VLMEvalKit from {where} is at {head} (tree {vtree}); the release lock pins "
                              f"{rel.vlmevalkit.commit} (tree {rel.vlmevalkit.tree})")
        with tarfile.open(dest / RLVR_TAR, "w") as tar:
            tar.add(trace / "rlvr", arcname="rlvr")
        with tarfile.open(dest / VLMEVALKIT_GIT_TAR, "w") as tar:
            tar.add(vlm / ".git", arcname=".git")
    return {"trace": {"commit": rel.upstream.commit, "tree": tree},
            "vlmevalkit": {"commit": head, "tree": vtree}}


def clear(dest: Path) -> None:
    shutil.rmtree(dest, ignore_errors=True)
