"""Store entry names: one string per thing a recipe reads, derived from the release lock.

Names (the recipes list them per step in ``needs.store``):

- ``release:maveryn/trace@<commit>`` — the files of ``rlvr/`` at the pinned upstream commit
  (the tree under the entry is laid out as the repository: ``rlvr/...``).
- ``paper:maveryn/trace`` — ``paper.pdf`` from the paper branch, pinned by its published sha256.
- ``model:<owner/repo>@<revision>`` — a Hugging Face model repository at a commit (the eight
  evaluated models, the two training base models, the judge).
- ``dataset:maveryn/trace@<revision>:<split>`` — the TRACE parquet files of one split
  (``train`` or ``validation``) at the dataset-v1 revision.
- ``benchmark:<key>`` — one external benchmark's evaluation file(s), key as in the suite.
- ``local:model/<name>``, ``local:dataset/<name>`` — unpinned entries imported from local files
  (the demo model, a dataset a user brings); their hashes are computed on import.

Recipes may also use short symbolic names that :func:`expand_needs` turns into full ones
for a resolved selection: ``release``, ``paper``, ``models`` (the selected models),
``judge``, ``base-models`` (the two training bases), ``base-model:3B``/``base-model:7B``,
``dataset:train``, ``dataset:validation``, ``benchmarks`` (the selected benchmarks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Literal

from trace_tui.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.release import ReleaseLock

Kind = Literal["release", "paper", "model", "dataset", "benchmark", "local"]
KINDS: tuple[str, ...] = ("release", "paper", "model", "dataset", "benchmark", "local")
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
_LOCAL_RE = re.compile(r"^(model|dataset)/[A-Za-z0-9][A-Za-z0-9._-]*$")
_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class EntryName:
    """A parsed entry name."""

    name: str
    kind: str
    repo_id: str | None = None
    revision: str | None = None
    split: str | None = None
    key: str | None = None  # benchmark key, or "model/<name>" for local entries

    @property
    def pinned(self) -> bool:
        return self.kind != "local"

    @property
    def dirname(self) -> str:
        """The entry's folder under ``store/entries/<kind>/``: readable, one path segment."""
        rest = self.name.split(":", 1)[1]
        return re.sub(r"[^A-Za-z0-9._@+-]", "--", rest.replace(":", "+"))


def parse(name: str) -> EntryName:
    """Parse and validate an entry name; UsageError naming what is wrong."""
    kind, sep, rest = name.partition(":")
    if not sep or kind not in KINDS:
        raise UsageError(f"store entry {name!r}: unknown kind {kind!r}", hint=f"kinds: {', '.join(KINDS)}")
    if kind == "local":
        if not _LOCAL_RE.match(rest):
            raise UsageError(f"store entry {name!r}: local entries are local:model/NAME or local:dataset/NAME")
        return EntryName(name, kind, key=rest)
    if kind == "benchmark":
        if not re.match(r"^[a-z0-9][a-z0-9_.-]*$", rest):
            raise UsageError(f"store entry {name!r}: benchmark key must be a suite key, e.g. benchmark:mmstar")
        return EntryName(name, kind, key=rest)
    if kind == "paper":
        if not _REPO_RE.match(rest):
            raise UsageError(f"store entry {name!r}: expected paper:OWNER/REPO")
        return EntryName(name, kind, repo_id=rest)
    split = None
    if kind == "dataset":
        rest, sep, split = rest.rpartition(":")
        if not sep or split not in ("train", "validation"):
            raise UsageError(f"store entry {name!r}: expected dataset:OWNER/REPO@REVISION:train|validation")
    repo_id, sep, revision = rest.partition("@")
    if not sep or not _REPO_RE.match(repo_id):
        raise UsageError(f"store entry {name!r}: expected {kind}:OWNER/REPO@REVISION")
    if not COMMIT_RE.match(revision):
        # A branch or tag moves; the store only holds immutable revisions.
        raise UsageError(f"store entry {name!r}: revision {revision!r} is not a 40-hex commit",
                         hint="pin a commit, never a branch or tag name")
    return EntryName(name, kind, repo_id=repo_id, revision=revision, split=split)


# -- names derived from the lock (never retyped) ------------------------------------------------

def release_entry(lock: "ReleaseLock") -> str:
    return f"release:{lock.upstream.repository}@{lock.upstream.commit}"


def paper_entry(lock: "ReleaseLock") -> str:
    return f"paper:{lock.upstream.repository}"


def model_entry(repo_id: str, revision: str) -> str:
    return f"model:{repo_id}@{revision}"


def dataset_entry(lock: "ReleaseLock", split: str) -> str:
    return f"dataset:{lock.dataset.repo_id}@{lock.dataset.revision}:{split}"


def benchmark_entry(key: str) -> str:
    return f"benchmark:{key}"


def local_entry(kind: Literal["model", "dataset"], name: str) -> str:
    entry = f"local:{kind}/{name}"
    parse(entry)
    return entry


def pinned_entries(lock: "ReleaseLock") -> list[str]:
    """Every pinned entry of the release, in a stable order."""
    out = [release_entry(lock), paper_entry(lock)]
    refs: list[str] = [model_entry(m.repo_id, m.revision) for m in lock.models]
    refs += [model_entry(p.repo_id, p.revision) for p in lock.training_base_models.values()]
    refs.append(model_entry(lock.judge.repo_id, lock.judge.revision))
    out += list(dict.fromkeys(refs))
    out += [dataset_entry(lock, s) for s in ("validation", "train")]
    out += [benchmark_entry(b.key) for b in lock.trace_eval.benchmarks]
    return out


def dependency_order(names: Iterable[str]) -> list[str]:
    """NAMES (once each) in the order they are fetched or imported: the release first, as the dataset's
    hashes are checked against its equivalence receipt and benchmark files against its provenance matrix."""
    rank = {"release": 0, "paper": 1, "dataset": 2, "benchmark": 3, "model": 4, "local": 5}
    return sorted(dict.fromkeys(names), key=lambda n: rank.get(n.split(":", 1)[0], 9))


def expand_needs(needs: Iterable[str], lock: "ReleaseLock", *, models: Iterable[str] | None = None,
                 benchmarks: Iterable[str] | None = None) -> list[str]:
    """Turn a step's ``needs.store`` (full or symbolic names) into full entry names.

    ``models`` are release model ids (or ``local:model/...`` names) of the resolved selection;
    ``benchmarks`` suite keys. Symbolic names that depend on them expand to nothing when the
    selection has none. Unknown symbolic names are a UsageError.
    """
    out: list[str] = []
    for need in needs:
        if need == "release":
            out.append(release_entry(lock))
        elif need == "paper":
            out.append(paper_entry(lock))
        elif need == "judge":
            out.append(model_entry(lock.judge.repo_id, lock.judge.revision))
        elif need == "models":
            for m in models or ():
                if m.startswith("local:"):
                    out.append(m)
                else:
                    pin = lock.model(m)
                    out.append(model_entry(pin.repo_id, pin.revision))
        elif need == "base-models":
            out += [model_entry(p.repo_id, p.revision) for p in lock.training_base_models.values()]
        elif need.startswith("base-model:"):
            scale = need.split(":", 1)[1]
            pin = lock.training_base_models.get(scale)
            if pin is None:
                raise UsageError(f"store need {need!r}: no training base model for scale {scale!r}",
                                 hint=f"scales: {', '.join(lock.training_base_models)}")
            out.append(model_entry(pin.repo_id, pin.revision))
        elif need in ("dataset:train", "dataset:validation"):
            out.append(dataset_entry(lock, need.split(":", 1)[1]))
        elif need == "benchmarks":
            out += [benchmark_entry(k) for k in benchmarks or ()]
        else:
            parse(need)
            out.append(need)
    return list(dict.fromkeys(out))
