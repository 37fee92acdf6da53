"""Air-gapped bundles: everything a recipe needs to run with no network, in one directory.

Layout::

    DIR/manifest.json        sha256 and size of every other file (written last)
    DIR/images.lock.json     the image lock the images were built under
    DIR/images/stages.tar    one `docker save` of every stage image: layers the
                             images share (infer and score share nearly all) once
    DIR/store/<kind>/<dir>/  the store entries the recipe needs (record + files)
    DIR/wheelhouse/          trace-tui's own wheel and its host dependencies

Import checks the manifest before anything else (a missing, extra or altered
file is refused by name), then loads the image archives (bundles from before
the shared archive hold one per image; both load) and checks their ids against
the lock (a registry digest does not survive save/load; the id does), then
fills the store through its verifying staging.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterable

from pydantic import BaseModel, ConfigDict

from trace_tui import __version__
from trace_tui.common.digest import sha256_text
from trace_tui.errors import CheckFailed, UsageError, out_of_space

MANIFEST = "manifest.json"
CHUNK = 8 << 20
Say = Callable[[str], None]


class BundleFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sha256: str
    bytes: int


class BundleManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: str = "trace-tui-bundle-v1"
    trace_tui_version: str
    recipe: str
    entries: list[str]
    images: dict[str, str]  # name -> image id
    files: dict[str, BundleFile]


IMAGES_TAR = "images/stages.tar"
UNSIZED_STEP = 512 << 20


class _Progress:
    """One line per ~10% of a large file (per 512 MiB when its size is not known ahead);
    large files are what a user waits on."""

    def __init__(self, label: str, total: int | None, say: Say) -> None:
        self.label, self.total, self.say, self.done = label, total, say, 0
        self.next_mark = 0.1 if total else UNSIZED_STEP

    def add(self, n: int) -> None:
        self.done += n
        if not self.total:
            if self.done >= self.next_mark:
                self.say(f"  {self.label}: {self.done >> 20} MiB")
                self.next_mark += UNSIZED_STEP
        elif self.total > (64 << 20) and self.done / self.total >= self.next_mark:
            self.say(f"  {self.label}: {self.done >> 20} / {self.total >> 20} MiB")
            self.next_mark += 0.1


def _write_stream(chunks: Iterable[bytes], dest: Path, label: str, say: Say, total: int | None = None) -> BundleFile:
    h = hashlib.sha256()
    size = 0
    progress = _Progress(label, total, say)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        with open(dest, "wb") as out:
            for chunk in chunks:
                out.write(chunk)
                h.update(chunk)
                size += len(chunk)
                progress.add(len(chunk))
    except OSError as exc:
        exc.filename = exc.filename or str(dest)  # a failed write() names no file; this is the one
        raise
    return BundleFile(sha256=h.hexdigest(), bytes=size)


def _copy(src: Path, dest: Path, say: Say) -> BundleFile:
    def chunks() -> Iterable[bytes]:
        with open(src, "rb") as fh:
            while chunk := fh.read(CHUNK):
                yield chunk

    return _write_stream(chunks(), dest, src.name, say, src.stat().st_size)


def export_bundle(dest: Path, *, recipe: str, entries: list[str], store: Any, images_lock: Any,
                  client: Any, say: Say = print, wheelhouse: bool = True) -> BundleManifest:
    """Write the bundle for ``recipe`` into ``dest`` (created; must be empty or absent)."""
    if dest.exists() and any(dest.iterdir()):
        raise UsageError(f"{dest} is not empty", hint="export into a new directory")
    missing = [e for e in entries if not store.has(e)]
    if missing:
        raise UsageError(f"the store lacks {', '.join(missing)}",
                         hint=f"run `trace-tui store fetch --recipe {recipe}` before exporting")
    existed = dest.exists()
    dest.mkdir(parents=True, exist_ok=True)
    try:
        return _export(dest, recipe, entries, store, images_lock, client, say, wheelhouse)
    except OSError as exc:
        if not out_of_space(exc):
            raise
        # A bundle without its manifest is refused on import anyway; what was written goes, so the
        # disk has its space back (the directory was empty or absent before).
        written = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())
        shutil.rmtree(dest, ignore_errors=True)
        if existed:
            dest.mkdir(exist_ok=True)
        raise CheckFailed(f"bundle export: no space left on device writing {exc.filename or dest} "
                          f"(after {written >> 20} MiB of the bundle; the partial bundle was removed)",
                          hint=f"free space under {dest} or export to a larger disk") from None


def _export(dest: Path, recipe: str, entries: list[str], store: Any, images_lock: Any, client: Any, say: Say,
            wheelhouse: bool) -> BundleManifest:
    files: dict[str, BundleFile] = {}

    lock_text = images_lock.model_dump_json(indent=2) + "\n"
    (dest / "images.lock.json").write_text(lock_text, encoding="utf-8")
    files["images.lock.json"] = BundleFile(sha256=sha256_text(lock_text),
                                           bytes=len(lock_text.encode()))
    names = []
    for name, img in sorted(images_lock.images.items()):
        image = client.images.get(img.id)
        say(f"saving image {name} ({img.id[:19]}, {image.attrs.get('Size', 0) >> 20} MiB)")
        # by tag where the tag still names the locked image, so the archive carries it; else by id
        names.append(img.tag if img.tag in image.tags else img.id)
    files[IMAGES_TAR] = _write_stream(_save_images(client, names), dest / IMAGES_TAR, IMAGES_TAR, say)

    for entry in entries:
        src = store.entry_dir(entry)
        rel_root = src.relative_to(store.entries_dir).as_posix()
        say(f"copying store entry {entry}")
        for path in sorted(p for p in src.rglob("*") if p.is_file()):
            rel = f"store/{rel_root}/{path.relative_to(src).as_posix()}"
            files[rel] = _copy(path, dest / rel, say)

    if wheelhouse:
        say("collecting trace-tui's own wheelhouse")
        for path in _make_wheelhouse(dest / "wheelhouse"):
            rel = f"wheelhouse/{path.name}"
            files[rel] = BundleFile(sha256=_sha256(path), bytes=path.stat().st_size)

    manifest = BundleManifest(trace_tui_version=__version__, recipe=recipe, entries=entries,
                              images={n: i.id for n, i in images_lock.images.items()}, files=files)
    (dest / MANIFEST).write_text(manifest.model_dump_json(indent=1) + "\n", encoding="utf-8")
    say(f"bundle written: {len(files)} files, {sum(f.bytes for f in files.values()) >> 20} MiB")
    return manifest


def _save_images(client: Any, names: list[str]) -> Iterable[bytes]:
    """`docker save NAME...` through the Engine API: docker-py's Image.save takes one image, and
    saving them one by one would write every shared layer once per image."""
    api = client.api
    res = api._get(api._url("/images/get"), params={"names": names}, stream=True)
    api._raise_for_status(res)
    return api._stream_raw_result(res, CHUNK, False)


def _sha256(path: Path) -> str:
    from trace_tui.common.digest import sha256_file

    return sha256_file(path)


def _make_wheelhouse(out: Path) -> list[Path]:
    """trace-tui's wheel plus its host dependencies, installable with `pip install --no-index`."""
    from trace_tui.images import repo_root

    out.mkdir(parents=True, exist_ok=True)
    root = repo_root()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(out), str(root)], check=True)
    wheel = next(out.glob("trace_tui-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(out),
                    str(wheel)], check=True)
    return sorted(out.iterdir())


def read_manifest(src: Path) -> BundleManifest:
    path = src / MANIFEST
    if not src.is_dir():
        raise UsageError(f"{src} is not a directory", hint="name the folder `trace-tui bundle export` wrote")
    if not path.exists():
        raise CheckFailed(f"{path}: missing; this is not a trace-tui bundle (or it is incomplete)")
    try:
        return BundleManifest.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise CheckFailed(f"{path}: not a valid bundle manifest ({str(exc).splitlines()[0]})") from exc


def check_bundle(src: Path, manifest: BundleManifest, say: Say = print) -> list[str]:
    """Every problem with the bundle's files, one line each, naming the file. Empty: intact."""
    from trace_tui.store.hashing import sha256_files

    on_disk = {p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file()} - {MANIFEST}
    problems = [f"{rel}: missing from the bundle" for rel in sorted(set(manifest.files) - on_disk)]
    problems += [f"{rel}: extra file, not in the bundle manifest" for rel in sorted(on_disk - set(manifest.files))]
    present = [src / rel for rel in sorted(on_disk & set(manifest.files))]
    for path in present:
        expected = manifest.files[path.relative_to(src).as_posix()]
        if path.stat().st_size != expected.bytes:
            problems.append(f"{path.relative_to(src).as_posix()}: {path.stat().st_size} bytes, "
                            f"the manifest says {expected.bytes}")
    sized_ok = [p for p in present if p.stat().st_size == manifest.files[p.relative_to(src).as_posix()].bytes]
    say(f"checking {len(sized_ok)} files ({sum(p.stat().st_size for p in sized_ok) >> 20} MiB)")
    for path, digest in sha256_files(sized_ok).items():
        rel = path.relative_to(src).as_posix()
        if digest != manifest.files[rel].sha256:
            problems.append(f"{rel}: sha256 {digest} differs from the manifest's {manifest.files[rel].sha256}")
    return sorted(problems)


def import_bundle(src: Path, *, store: Any, client: Any, images_lock_path: Path, say: Say = print) -> BundleManifest:
    from trace_tui.images import ImagesLock, write_images_lock

    manifest = read_manifest(src)
    problems = check_bundle(src, manifest, say)
    if problems:
        raise CheckFailed(f"bundle refused: {problems[0]}"
                          + (f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""))
    lock = ImagesLock.model_validate_json((src / "images.lock.json").read_text(encoding="utf-8"))
    loaded: dict[str, str] = {}  # image id -> the archive it came from
    for rel in sorted(f for f in manifest.files if f.startswith("images/") and f.endswith(".tar")):
        say(f"loading {rel}")
        with open(src / rel, "rb") as fh:
            loaded |= {i.id: rel for i in client.images.load(fh)}
    for name, img in sorted(lock.images.items()):
        if img.id not in loaded:
            raise CheckFailed(f"the bundle's images hold no image {img.id} for {name} (they loaded as "
                              f"{sorted(loaded) or 'nothing'}); export the bundle again from the built appliance")
        client.images.get(img.id).tag(*img.tag.split(":", 1))
    write_images_lock(lock, images_lock_path)
    # benchmarks last: they are checked against the provenance matrix of the release imported before them
    for entry in sorted(manifest.entries, key=lambda name: name.startswith("benchmark:")):
        _import_entry(store, entry, src, say)
    return manifest


def _import_entry(store: Any, entry: str, src: Path, say: Say) -> None:
    """Fill the store through its verifying staging, from the bundled copy of the entry."""
    from trace_tui.store.importer import import_entry_dir

    entry_dir = src / "store" / store.entry_dir(entry).relative_to(store.entries_dir)
    named = json.loads((entry_dir / "manifest.json").read_text(encoding="utf-8")).get("name")
    if named != entry:
        raise CheckFailed(f"{entry_dir / 'manifest.json'} names {named}, the bundle manifest says {entry}")
    say(f"importing store entry {entry}")
    import_entry_dir(store, entry_dir)
