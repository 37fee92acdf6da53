"""`trace-tui store fetch|import|list|verify`: the local store of models, datasets and release files.

- ``store fetch [--recipe NAME] [--models ...] [--benchmarks ...] [--entry NAME ...] [--all]``:
  download what the recipe needs that the store lacks (default recipe: ``full``), verified.
- ``store import DIR [--entry NAME ...]``: the same entries from a folder (air-gapped path);
  ``store import --local model/NAME PATH``: an unpinned local entry.
- ``store list [--json]``: what is there, and which recipes read it.
- ``store verify [--deep] [--entry NAME ...] [--json]``: sizes and manifests; ``--deep`` rehashes.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from trace_tui import paths
from trace_tui.commands.arguments import add_recipe_selection, non_empty
from trace_tui.errors import CheckFailed, ExitCode, UsageError, out_of_space
from trace_tui.recipe import catalog as recipes
from trace_tui.release import release_lock
from trace_tui.stages import protocol
from trace_tui.stages.protocol import stop_on_sigterm
from trace_tui.store import Store, fix_command, local_entry, parse, pinned_entries
from trace_tui.store.fetch import fetch_missing
from trace_tui.store.importer import import_dir
from trace_tui.store.trust import entry_trust, trust_reason

DEFAULT_RECIPE = "full"


def add_common(p: argparse.ArgumentParser) -> None:
    """--home/--log-format/--log-file after the action too; SUPPRESS keeps values given before it."""
    p.add_argument("--home", metavar="DIR", default=argparse.SUPPRESS, type=non_empty,
                   help="trace-tui home for this command")
    p.add_argument("--log-format", choices=("console", "json"), default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    p.add_argument("--log-file", metavar="FILE", default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="store_command", metavar="ACTION", required=True)
    f = sub.add_parser("fetch", help="download what a recipe needs that the store lacks, verified")
    add_common(f)
    f.add_argument("--recipe", metavar="NAME", help=f"the recipe whose entries to fetch (default: {DEFAULT_RECIPE})")
    add_recipe_selection(f)
    f.add_argument("--entry", nargs="+", metavar="NAME", help="fetch these entries (instead of a recipe's)")
    f.add_argument("--all", action="store_true", help="every pinned entry of the release")
    f.add_argument("--jsonl", action="store_true", help="progress as stage-contract JSON lines on stdout")

    i = sub.add_parser("import", help="entries from a folder you already have (the air-gapped path)")
    add_common(i)
    i.add_argument("path", metavar="DIR", help="a release clone, a dataset folder, hub snapshots, benchmark files, "
                                               "or (with --local) the file or folder to import")
    i.add_argument("--entry", nargs="+", metavar="NAME", help="only these entries (needed for a --local-dir download)")
    i.add_argument("--local", metavar="KIND/NAME", help="import PATH as the unpinned entry local:KIND/NAME "
                                                       "(KIND: model or dataset)")

    ls = sub.add_parser("list", help="what the store holds, and for which recipes")
    add_common(ls)
    ls.add_argument("--json", action="store_true", help="as JSON")

    v = sub.add_parser("verify", help="check every entry: sizes and manifests; --deep also rehashes every file")
    add_common(v)
    v.add_argument("--deep", action="store_true", help="rehash every file (in parallel, large blocks)")
    v.add_argument("--entry", nargs="+", metavar="NAME", help="only these entries")
    v.add_argument("--json", action="store_true", help="as JSON")


def _store(args: argparse.Namespace) -> Any:
    store = Store(paths.store_dir(paths.home(args.home)))
    for folder in (store.root, store.entries_dir, store.blobs_dir.parent, store.tmp_dir):
        if folder.exists() and not folder.is_dir():
            raise UsageError(f"{folder}: a file where the store keeps a folder",
                             hint=f"move it away, or give another --home (the store lives in {store.root})")
    return store


def recipe_entries(recipe: str, *, models: list[str] | None = None, seeds: list[int] | None = None,
                   benchmarks: list[str] | None = None) -> list[str]:
    """Every store entry the recipe's steps read, for the narrowed selection."""
    resolved = recipes.resolve_recipe(recipes.load_recipe(recipe), models=models, seeds=seeds, benchmarks=benchmarks)
    return list(resolved.all_store_entries())


def entries_by_recipe() -> dict[str, list[str]]:
    """entry name -> the recipes (full selection) that read it; recipes that fail to resolve are skipped."""
    out: dict[str, list[str]] = {}
    for name in recipes.known_recipes():
        try:
            for entry in recipe_entries(name):
                out.setdefault(entry, []).append(name)
        except Exception:  # noqa: BLE001 - a listing must not fail because one recipe does not resolve
            continue
    return out


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return str(n)  # pragma: no cover


class _Printer:
    """Per-file progress: a line when a file starts, every few seconds while it runs, and when stored."""

    def __init__(self, jsonl: bool) -> None:
        self.jsonl = jsonl
        self.last: dict[tuple[str, str], float] = {}

    def __call__(self, p: Any) -> None:
        key = (p.entry, p.file)
        now = time.monotonic()
        if p.phase == "download" and now - self.last.get(key, 0.0) < (1.0 if self.jsonl else 5.0):
            return
        self.last[key] = now
        if self.jsonl:
            protocol.progress(phase=f"fetch {p.file}", done=p.done, total=p.total or 0, model=p.entry)
            return
        if p.phase == "download":
            print(f"  {p.entry}  {p.file}  {_size(p.done)} of {_size(p.total)}", flush=True)
        elif p.phase == "stored":
            print(f"  {p.entry}  {p.file}  {_size(p.done)} verified", flush=True)
        else:
            print(f"  {p.entry}  {p.file}  absent upstream (not read by the appliance)", flush=True)

    def log(self, message: str) -> None:
        if self.jsonl:
            protocol.log(message)
        else:
            print(message, flush=True)


def _fetch(args: argparse.Namespace) -> int:
    lock = release_lock()
    if args.all:
        names = pinned_entries(lock)
    elif args.entry:
        names = [parse(n).name for n in args.entry]
    else:
        names = recipe_entries(args.recipe or DEFAULT_RECIPE, models=args.models, seeds=args.seeds,
                               benchmarks=args.benchmarks)
    store = _store(args)
    printer = _Printer(args.jsonl)
    local = [n for n in names if n.startswith("local:") and not store.has(n)]
    pinned = [n for n in names if not n.startswith("local:")]
    result = fetch_missing(store, lock, pinned, on_progress=printer, on_log=printer.log)
    for rec in result.fetched:
        printer.log(f"stored {rec.name} ({len(rec.files)} files, {_size(rec.bytes)}, {rec.sha256set})")
    printer.log(f"{len(result.fetched)} fetched, {len(result.present)} already in the store ({store.root})"
                + (f", {len(result.failed)} failed" if result.failed else ""))

    for name, exc in result.failed:
        print(f"trace-tui: error: {exc.line()}", file=sys.stderr)
    if any(isinstance(exc, CheckFailed) for _n, exc in result.failed):
        return ExitCode.FAILED  # a file that does not verify
    if local or result.failed:
        for n in local:
            printer.log(f"missing local entry {n}: {fix_command(n)}")
        return ExitCode.REQUIREMENTS  # no network, no access, or an entry only the user can provide
    return ExitCode.OK


def _import(args: argparse.Namespace) -> int:
    from pathlib import Path

    store = _store(args)
    src = Path(args.path).expanduser()
    if args.local:
        kind, _, name = args.local.partition("/")
        if kind not in ("model", "dataset") or not name:
            raise UsageError(f"--local {args.local!r}: expected model/NAME or dataset/NAME")
        rec = store.import_local(local_entry(kind, name), src)  # type: ignore[arg-type]
        print(f"stored {rec.name} (unpinned; {len(rec.files)} files, {_size(rec.bytes)}, {rec.sha256set})")
        return 0
    result = import_dir(store, release_lock(), src, only=args.entry, report=print)
    for rec in result.imported:
        extra = f"; {len(rec.absent)} files absent from the source" if rec.absent else ""
        print(f"stored {rec.name} ({len(rec.files)} files, {_size(rec.bytes)}{extra})")
    for name, reason in result.refused:
        print(f"refused {name}: {reason}", file=sys.stderr)
    if not result.imported and not result.refused:
        raise UsageError(f"{src}: nothing recognisable to import",
                         hint="a release clone (rlvr/), dataset files, hub snapshots, benchmark files, "
                              "or --local model/NAME")
    return 1 if result.refused else 0


def _list(args: argparse.Namespace) -> int:
    import json

    store = _store(args)
    records = store.records()
    broken = store.broken()
    state = {c.name: c for c in store.verify([r.name for r in records])}  # sizes and manifest, no rehash
    try:
        users = entries_by_recipe()
    except Exception:  # noqa: BLE001 - recipes unavailable: list the store anyway
        users = {}
    lock = release_lock()
    if args.json:
        out = [{"name": r.name, "kind": r.kind, "pinned": r.pinned, "trust": entry_trust(r, lock),
                "revision": r.revision,
                "files": len(r.files), "bytes": r.bytes, "absent": r.absent, "sha256set": r.sha256set,
                "source": r.source.model_dump(exclude_none=True), "path": store.relpath_of(r.name),
                "recipes": users.get(r.name, []), "added_at": r.added_at, "ok": state[r.name].ok,
                "problems": state[r.name].problems} for r in records]
        out += [{"name": None, "path": f"entries/{folder}", "ok": False, "problems": [reason]}
                for folder, reason in broken.items()]
        print(json.dumps(out, indent=2))
        return 0
    for folder, reason in broken.items():
        print(f"entries/{folder}\n    unreadable entry; FAILED: {reason}")
    if not records and not broken:
        print(f"the store at {store.root} is empty (trace-tui store fetch --recipe NAME, or store import DIR)")
        return 0
    for r in records:
        pin = "pinned" if r.pinned else "local, unpinned"
        absent = f", {len(r.absent)} absent" if r.absent else ""
        used = ", ".join(users.get(r.name, [])) or "-"
        chk = state[r.name]
        status = "ok" if chk.ok else f"FAILED: {chk.problems[0]}" + (
            f" (+{len(chk.problems) - 1} more; run `trace-tui store verify`)" if len(chk.problems) > 1 else "")
        print(f"{r.name}\n    {pin}; {len(r.files)} files{absent}, {_size(r.bytes)}; recipes: {used}\n"
              f"    trust: {trust_reason(r, lock)}\n    {r.sha256set}; {status}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    import json

    store = _store(args)
    checks = store.verify(args.entry, deep=args.deep)
    if args.json:
        print(json.dumps([{"name": c.name, "ok": c.ok, "files": c.files, "bytes": c.bytes, "problems": c.problems}
                          for c in checks], indent=2))
    else:
        mode = "rehashed" if args.deep else "sizes and manifest"
        for c in checks:
            if c.ok:
                print(f"ok      {c.name} ({c.files} files, {_size(c.bytes)}, {mode})")
            else:
                print(f"FAILED  {c.name}")
                for problem in c.problems:
                    print(f"        {problem}")
        if not checks:
            print(f"the store at {store.root} is empty")
    return 0 if all(c.ok for c in checks) else 1


def run(args: argparse.Namespace) -> int:
    # A stopped fetch or import (kill, a scheduler's timeout) removes its staging folder on the way
    # out, as Ctrl-C does, instead of leaving GBs for the next import to clear.
    stop_on_sigterm()
    try:
        return {"fetch": _fetch, "import": _import, "list": _list, "verify": _verify}[args.store_command](args)
    except OSError as exc:
        # What the store could not read or write (permissions, a read-only or full disk) is one line
        # naming the path; a refused file's own errors are already CheckFailed with their reasons.
        where = exc.filename or "the store"
        if out_of_space(exc):
            raise CheckFailed(f"{where}: no space left on device", hint="free space and run the same command again; "
                              "nothing half-written enters the store") from None
        raise CheckFailed(f"{where}: {exc.strerror or exc}",
                          hint="check that the store's folders are yours and writable (--home, $TRACE_TUI_HOME)"
                          ) from None
