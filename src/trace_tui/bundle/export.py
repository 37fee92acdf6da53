"""Writing a bundle: the image archive, the store entries, trace-tui's own wheelhouse, the manifest last."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from trace_tui import __version__
from trace_tui.bundle.files import CHARLIECLOUD_DIR, CHUNK, MANIFEST, BundleFile, BundleManifest, Say
from trace_tui.bundle.signature import PUBLIC_KEY_FILE, SIGNATURE, write_signature
from trace_tui.common.digest import sha256_bytes, sha256_file, sha256_text
from trace_tui.errors import CheckFailed, UsageError, out_of_space
from trace_tui.images import ImagesLock, build_wheel, repo_root
from trace_tui.recipe.schema import ResolvedRecipe
from trace_tui.release import release_lock
from trace_tui.signing.keys import public_key_json, short
from trace_tui.store.store import Store
from trace_tui.store.trust import entry_trust

if TYPE_CHECKING:  # pragma: no cover
    from docker import DockerClient
    from securesystemslib.signer import Signer

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


def _write_stream(chunks: Iterable[bytes], dest: Path, label: str, say: Say, total: int | None = None,
                  mode: int = 0o666) -> BundleFile:
    """Write CHUNKS to DEST, created with MODE (less the umask) so its bytes are never readable by
    more people than MODE allows, not even for a moment."""
    h = hashlib.sha256()
    size = 0
    progress = _Progress(label, total, say)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        with open(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "wb") as out:
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

    return _write_stream(chunks(), dest, src.name, say, src.stat().st_size, mode=_copy_mode(src))


def _copy_mode(src: Path) -> int:
    """A bundle copy is readable by whom the store copy is readable by, never more (a private 0400
    file stays private); its owner may write it, so the bundle can be removed or replaced."""
    return (stat.S_IMODE(src.stat().st_mode) & 0o444) | 0o200


def entries_to_carry(resolved: ResolvedRecipe) -> tuple[list[str], list[str]]:
    """(the store entries a bundle of RESOLVED carries, those it leaves out): an entry one of the recipe's own
    steps makes (the demo's tiny model and tasks, made by its first step) is made again at the site, as it
    is here; carrying it would ask the exporting host to run the recipe first, and no fetch makes it."""
    made = {o for step in resolved.recipe.steps for o in step.outputs}
    entries = resolved.all_store_entries()
    return [e for e in entries if e not in made], [e for e in entries if e in made]


def export_bundle(dest: Path, *, recipe: str, entries: list[str], store: Store, images_lock: ImagesLock,
                  client: DockerClient, say: Say = print, wheelhouse: bool = True,
                  signer: Signer | None = None, charliecloud: dict[str, Path] | None = None) -> BundleManifest:
    """Write the bundle for ``recipe`` into ``dest`` (created; must be empty or absent), signed by SIGNER
    (signature.py; a site refuses an unsigned bundle's images, so only tests of the refusal leave it out).
    CHARLIECLOUD: KIND -> the Charliecloud directory image the lock records for it, carried as a tar too
    (checked against the lock by the caller: service.bundle_images.charliecloud_tars)."""
    if dest.exists() and any(dest.iterdir()):
        raise UsageError(f"{dest} is not empty", hint="export into a new directory")
    ch_images = charliecloud or {}
    missing = [e for e in entries if not store.has(e)]
    if missing:
        raise UsageError(f"the store lacks {', '.join(missing)}",
                         hint=f"run `trace-tui store fetch --recipe {recipe}` before exporting")
    existed = dest.exists()
    dest.mkdir(parents=True, exist_ok=True)
    from docker.errors import APIError

    def give_back() -> int:
        # A bundle without its manifest is refused on import anyway; what was written goes, so the
        # disk has its space back (the directory was empty or absent before).
        written = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())
        shutil.rmtree(dest, ignore_errors=True)
        if existed:
            dest.mkdir(exist_ok=True)
        return written

    try:
        return _export(dest, recipe, entries, store, images_lock, client, say, wheelhouse, signer, ch_images)
    except APIError as exc:  # an OSError too (requests' HTTPError): first
        # `docker save` stages each layer under the daemon's own data root before it streams the archive:
        # that disk, not the bundle's, can be the one that fills.
        if "no space left on device" not in str(exc.explanation or exc):
            raise
        written = give_back()
        root = (client.info() or {}).get("DockerRootDir", "its data root")
        raise CheckFailed(f"bundle export: the Docker daemon ran out of space under {root} saving the images "
                          f"(after {written >> 20} MiB of the bundle; the partial bundle was removed)",
                          hint=f"free space under {root} (e.g. `docker image prune`) and export again") from None
    except OSError as exc:
        if not out_of_space(exc):
            raise
        written = give_back()
        raise CheckFailed(f"bundle export: no space left on device writing {exc.filename or dest} "
                          f"(after {written >> 20} MiB of the bundle; the partial bundle was removed)",
                          hint=f"free space under {dest} or export to a larger disk") from None


def _export(dest: Path, recipe: str, entries: list[str], store: Store, images_lock: ImagesLock,
            client: DockerClient, say: Say, wheelhouse: bool, signer: Signer | None,
            ch_images: dict[str, Path]) -> BundleManifest:
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
    files.update(_charliecloud_tars(dest, ch_images, say))

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

    if signer is not None:
        public = public_key_json(signer.public_key)
        (dest / PUBLIC_KEY_FILE).write_bytes(public)
        files[PUBLIC_KEY_FILE] = BundleFile(sha256=sha256_bytes(public), bytes=len(public))
    manifest = BundleManifest(trace_tui_version=__version__, recipe=recipe, entries=entries,
                              images={n: i.id for n, i in images_lock.images.items()}, files=files)
    manifest_bytes = (manifest.model_dump_json(indent=1) + "\n").encode()
    (dest / MANIFEST).write_bytes(manifest_bytes)
    if signer is not None:
        records = {e: store.record(e) for e in entries}
        lock = release_lock()
        write_signature(dest, manifest_bytes, manifest, {e: r.sha256set for e, r in records.items() if r},
                        {e: entry_trust(r, lock) for e, r in records.items() if r}, signer)
        say(f"signed with key {short(signer.public_key.keyid)} ({SIGNATURE})")
    say(f"bundle written: {len(files)} files, {sum(f.bytes for f in files.values()) >> 20} MiB")
    return manifest


def _charliecloud_tars(dest: Path, folders: dict[str, Path], say: Say) -> dict[str, BundleFile]:
    """Each directory image as a plain tar under DEST/images/charliecloud, hashed as it is written."""
    files = {}
    for kind, folder in sorted(folders.items()):
        rel = f"{CHARLIECLOUD_DIR}/{kind}.tar"
        say(f"writing {rel} (the Charliecloud image {folder})")
        proc = subprocess.Popen(["tar", "-c", "-C", str(folder), "--numeric-owner", "."], stdout=subprocess.PIPE)
        assert proc.stdout is not None
        out = proc.stdout
        files[rel] = _write_stream(iter(lambda: out.read(CHUNK), b""), dest / rel, rel, say)
        if proc.wait() != 0:
            raise CheckFailed(f"tar of {folder} failed (exit {proc.returncode})")
    return files


def _save_images(client: DockerClient, names: list[str]) -> Iterable[bytes]:
    """`docker save NAME...` through the Engine API: docker-py's Image.save takes one image, and
    saving them one by one would write every shared layer once per image."""
    api = client.api
    res = api._get(api._url("/images/get"), params={"names": names}, stream=True)
    api._raise_for_status(res)
    return api._stream_raw_result(res, CHUNK, False)


def _sha256(path: Path) -> str:
    return sha256_file(path)


def _make_wheelhouse(out: Path) -> list[Path]:
    """trace-tui's wheel (built as the images build it: the same sources give the same wheel) plus its host
    dependencies, installable with `pip install --no-index`."""
    out.mkdir(parents=True, exist_ok=True)
    wheel = build_wheel(repo_root(), out)
    done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(out),
                           str(wheel)], capture_output=True, text=True)
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-2:])
        raise CheckFailed(f"bundle export: collecting trace-tui's host dependencies into {out} failed: {tail}",
                          hint="export on a machine that reaches the package index, or pass --no-wheelhouse")
    return sorted(out.iterdir())
