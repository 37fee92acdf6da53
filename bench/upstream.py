"""The release's own code, run unchanged as the benchmarks' baselines, out of the pinned evaluator archive.

The archive (``trace-rlvr-af32fe0.tar.gz``, ``git archive`` of the rlvr/ tree of maveryn/trace at the
release commit; ../shared/evaluator/README.md) is unpacked into a temporary directory, never into
this repository: one file where a baseline is one module (the extractors), the whole rlvr/ tree
where the baseline checks the repository it sits in (the validator). The rlvr/ tree hash of the
archive is checked by the evaluator tests; here each file a baseline runs has its sha256 pinned
(the values the release's rlvr/release_files.v1.json declares), so a different script can never be
timed as "the upstream" one.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tarfile
import tempfile
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
ARCHIVE = "trace-rlvr-af32fe0.tar.gz"
# The upstream files the benchmarks run, and their sha256 at af32fe0e668eb878e909daef7322ac1c4ae20f64.
VALIDATOR = "rlvr/evaluation/scripts/validate_release_inputs.py"
EXTRACTOR = "rlvr/evaluation/scripts/trace_benchmark_answer_parsing.py"
# The original implementation of the answer-extraction contract (CONTRACTS.md §1,
# trace-validation-answer-extraction-v1), run as a black box: timed and compared, never read or ported.
CONTRACT_EXTRACTOR = "rlvr/evaluation/trace_validation/answer_extraction.py"
# What the validator loads to check the TRACE validation release (its trace_validation step).
VALIDATION_VERIFIER = "rlvr/evaluation/trace_validation/verify.py"
VALIDATION_DATASET = "rlvr/evaluation/trace_validation/prepare_dataset.py"
PINNED = {
    VALIDATOR: "81f431cae5a5e369039bfadd35cf3e058c9453d910112ac1519fb4ab9a1f20f5",
    EXTRACTOR: "ad95cceacbf0d68188b5e03e7f38a8a1c5b52fb790dac1db2e31724c1e1d2ac1",
    CONTRACT_EXTRACTOR: "20239d57d5550ec23fd590f345a4413792e7b0870f7e5dc8e503f91705757363",
    VALIDATION_VERIFIER: "660d77f76cfe05a3799e37d06001a1945d7e4da768e7129a725a233497881a14",
    VALIDATION_DATASET: "c515c3b87114b90927862c738ee0640e1928c286af1c151a377a6aced1a0f940",
}


def archive() -> Path:
    sources = Path(os.environ.get("TRACE_EVALUATOR_SOURCES", REPO.parent / "shared" / "evaluator"))
    path = sources / ARCHIVE
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: set TRACE_EVALUATOR_SOURCES to the folder holding {ARCHIVE}")
    return path


_DIR: tempfile.TemporaryDirectory[str] | None = None


def _tmp() -> Path:
    """This process's temporary directory for upstream files (removed when it exits)."""
    global _DIR
    if _DIR is None:
        _DIR = tempfile.TemporaryDirectory(prefix="trace-upstream-")
    return Path(_DIR.name)


def script(member: str) -> Path:
    """The upstream file MEMBER, unpacked alone into a temporary directory (kept for the process)."""
    dest = _tmp() / member
    if not dest.is_file():
        with tarfile.open(archive()) as tar:
            data = tar.extractfile(member)
            if data is None:
                raise FileNotFoundError(f"{archive()}: no {member}")
            body = data.read()
        digest = hashlib.sha256(body).hexdigest()
        if digest != PINNED[member]:
            raise ValueError(f"{archive()}: {member} has sha256 {digest}, pinned {PINNED[member]}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(body)
    return dest


def release_tree(release: Path) -> Path:
    """The archive's whole rlvr/ tree in a temporary directory, with RELEASE's files laid over it.

    The release's validator checks the repository it sits in (its own path gives REPO_ROOT), so
    this is where it runs unchanged on the release copy's files: the copy's 20 files are the
    archive's own at the release commit, and a copy that differs is what the validator then sees.
    """
    root = _tmp() / "tree"
    if not root.is_dir():
        with tarfile.open(archive()) as tar:
            tar.extractall(root, filter="data")
        for member, pinned in PINNED.items():
            digest = hashlib.sha256((root / member).read_bytes()).hexdigest()
            if digest != pinned:
                raise ValueError(f"{archive()}: {member} has sha256 {digest}, pinned {pinned}")
        for path in release.rglob("*"):
            if path.is_file():
                dest = root / path.relative_to(release)
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(path.read_bytes())
    return root


def load(member: str, name: str) -> ModuleType:
    """The upstream file MEMBER imported as module NAME, unchanged (registered in sys.modules,
    where its dataclasses look their module up)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, script(member))
    if spec is None or spec.loader is None:
        raise ImportError(f"{member}: cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
