"""The local, content-addressed store of everything a recipe reads (SPEC §3).

Public API (what other parts of trace-tui call):

- ``Store(root)`` with ``root = paths.store_dir(home)``: ``has(name)``, ``record(name)``,
  ``path_of(name)``, ``root_of(name)``, ``relpath_of(name)``, ``records()``,
  ``verify(names, deep=...)``, ``import_local(name, path)``.
- ``store_status(home, names) -> {name: bool}`` and ``missing_entries(home, names) ->
  [(name, fix command)]`` (the engine stops a recipe with exit 3 on a non-empty list).
- Entry names: see :mod:`trace_tui.store.names` (``model_entry``, ``dataset_entry``,
  ``release_entry``, ``benchmark_entry``, ``local_entry``, ``expand_needs``).
"""

from trace_tui.store.names import (
    benchmark_entry,
    dataset_entry,
    expand_needs,
    local_entry,
    model_entry,
    paper_entry,
    parse,
    pinned_entries,
    release_entry,
)
from trace_tui.store.store import EntryCheck, Store, fix_command, missing_entries, open_store, store_status

__all__ = [
    "EntryCheck", "Store", "benchmark_entry", "dataset_entry", "expand_needs", "fix_command", "local_entry",
    "missing_entries", "model_entry", "open_store", "paper_entry", "parse", "pinned_entries", "release_entry",
    "store_status",
]
