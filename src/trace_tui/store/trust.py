"""How far a store entry is trusted, and why (shown by `store list`, `bundle import`, the preflight and the TUI).

- *published*: the release's own hashes vouch for the files (the release, paper and dataset entries
  enter only through the release lock's hash chain; a benchmark file whose md5 the provenance matrix
  states; a model whose sha256set the lock publishes).
- *hub-stated*: a pinned model, or a benchmark the provenance matrix pins only by a Hugging Face dataset
  revision (EvoChart and CountQA as whole repositories, TreeBench's file without a checksum), whose files
  match the per-file hashes the hub stated at the pinned revision, recorded by `store fetch` here, or
  carried in a bundle whose signature this site verified against a key it trusts.
- *local*: nothing outside the files vouches for them: a `local:` entry, or a pinned model imported
  from a Hugging Face cache or folder whose hashes the release does not publish (its blobs are named by
  the hashes of their own bytes, so a forged model would be just as consistent). An entry never rises
  in trust by being copied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from trace_tui.errors import CheckFailed
from trace_tui.store import names as N
from trace_tui.store.manifest import EntryRecord
from trace_tui.store.sources import PROVENANCE

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.release import ReleaseLock
    from trace_tui.store.store import Store

TrustLevel = Literal["published", "hub-stated", "local"]
PUBLISHED: TrustLevel = "published"
HUB_STATED: TrustLevel = "hub-stated"
LOCAL: TrustLevel = "local"
SIGNED_BY = "hub_stated_signed_by"  # the record's note: the keyid of the bundle signature that carried it here


def published_sets(lock: ReleaseLock, repo_id: str, revision: str) -> set[str]:
    """The sha256sets the release lock publishes for the model REPO_ID@REVISION."""
    return {v for m in lock.models if m.repo_id == repo_id and m.revision == revision
            for v in m.published_revision_sets.values()}


def is_hub_stated(record: EntryRecord) -> bool:
    """Every file of RECORD carries a hash the hub stated for it (LFS sha256 or git blob id)."""
    return bool(record.files) and all(any(x.source.startswith("hub metadata") for x in f.expected)
                                      for f in record.files)


def provenance_checked(record: EntryRecord) -> bool:
    """Every file of RECORD was checked against a hash the provenance matrix states (its md5): the store
    writes a record only once every hash it lists has been checked."""
    return bool(record.files) and all(any(x.source.startswith(PROVENANCE) for x in f.expected)
                                      for f in record.files)


def entry_trust(record: EntryRecord, lock: ReleaseLock) -> TrustLevel:
    entry = N.parse(record.name)
    if not entry.pinned:
        return LOCAL
    if entry.kind == "benchmark":
        if provenance_checked(record):
            return PUBLISHED
    elif entry.kind != "model":
        return PUBLISHED
    elif record.sha256set in published_sets(lock, entry.repo_id or "", entry.revision or ""):
        return PUBLISHED
    fetched = record.source.type == "huggingface" and not record.source.imported_from
    if (fetched or record.notes.get(SIGNED_BY)) and is_hub_stated(record):
        return HUB_STATED
    return LOCAL


def trust_reason(record: EntryRecord, lock: ReleaseLock) -> str:
    """ENTRY's trust level with what earned it, in a few words."""
    level = entry_trust(record, lock)
    if level == PUBLISHED:
        return "published (the release's own hashes)"
    if level == HUB_STATED:
        signed = record.notes.get(SIGNED_BY)
        return (f"hub-stated (the hub's hashes, carried in a bundle signed by key {str(signed)[:16]})" if signed
                else "hub-stated (the hub's hashes at the pinned revision, recorded at fetch)")
    if N.parse(record.name).pinned:
        return "local (imported files that vouch only for themselves; the release publishes no hashes for them)"
    return "local (unpinned)"


def trust_levels(store: Store, names: list[str], lock: ReleaseLock) -> dict[str, str]:
    """{entry: its trust level} for the entries of NAMES the store holds (what a step's receipt records and the
    preview shows). An entry whose record cannot be read is left out: `store verify` says what is wrong with it."""
    levels = {}
    for name in names:
        try:
            record = store.record(name)
        except CheckFailed:
            continue
        if record is not None:
            levels[name] = entry_trust(record, lock)
    return levels
