"""Importing a bundle: the checks of its store entries and of the whole bundle that leave the host as
it was, then the changes (store entries, images, tags, the image lock last) and, on a failure,
taking back what this import added."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from trace_tui.bundle.archives import _check_archives, _read_bundle_lock, load_untagged, read_archive_index
from trace_tui.bundle.files import (
    CHARLIECLOUD_DIR,
    MANIFEST,
    RECORD_LIMIT,
    REEXPORT,
    BundleManifest,
    Say,
    _read_bundle_file,
    bundle_files,
    check_bundle,
    parse_manifest,
    read_manifest,
    read_manifest_bytes,
    shown,
)
from trace_tui.bundle.signature import SIGNATURE, check_entry_set, hold_to_signature, signed_by, verify_signature
from trace_tui.errors import CheckFailed, TraceTuiError, UsageError
from trace_tui.images import ImagesLock, write_images_lock
from trace_tui.store.importer import import_entry_dir
from trace_tui.store.names import dependency_order
from trace_tui.store.store import Store

if TYPE_CHECKING:  # pragma: no cover
    from docker import DockerClient
    from securesystemslib.signer import SSlibKey

    from trace_tui.signing.envelopes import VerifiedStatement

# ---------------------------------------------------------------------------------------------
# import, part 1: what can be checked without changing the host

# -- store entries: each with a folder and a readable record naming it -----------------------

def _entry_folder(store: Store, entry: str, src: Path) -> Path:
    try:
        return src / "store" / store.entry_dir(entry).relative_to(store.entries_dir)
    except UsageError as exc:  # not an entry name at all
        raise CheckFailed(f"{src / MANIFEST}: entries: '{shown(entry)}' is not a store entry name "
                          f"({shown(exc.message)})",
                          hint=REEXPORT) from None


def _check_entry_record(src: Path, folder: Path, entry: str) -> str:
    """The entry record's sha256set, once the record is readable and names ENTRY."""
    path = folder / "manifest.json"
    data = _read_bundle_file(src, path.relative_to(src).as_posix(), limit=RECORD_LIMIT)
    try:
        record = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise CheckFailed(f"{shown(path)}: not a store entry record (not valid JSON: {type(exc).__name__})",
                          hint=REEXPORT) from None
    named = record.get("name") if isinstance(record, dict) else None
    if not isinstance(record, dict):
        raise CheckFailed(f"{shown(path)}: not a store entry record (a JSON object)", hint=REEXPORT)
    if named != entry:
        raise CheckFailed(f"{shown(path)} names '{shown(named)}', the bundle manifest says {shown(entry)}",
                          hint=REEXPORT)
    return str(record.get("sha256set", ""))


def _checked_entries(src: Path, store: Store, manifest: BundleManifest, files: set[str],
                     verified: VerifiedStatement) -> list[str]:
    """The bundle's entries in import order: the release first, as the dataset's files are checked against
    its equivalence receipt and benchmark files against its provenance matrix (names.dependency_order)."""
    if len(set(manifest.entries)) != len(manifest.entries):
        twice = next(e for e in manifest.entries if manifest.entries.count(e) > 1)
        raise CheckFailed(f"{src / MANIFEST}: entries lists {shown(twice)} twice", hint=REEXPORT)
    for entry in manifest.entries:
        folder = _entry_folder(store, entry, src)
        rel = folder.relative_to(src).as_posix()
        if not any(f.startswith(rel + "/") for f in files):
            raise CheckFailed(f"{src / MANIFEST}: entry {shown(entry)} has no folder {shown(rel)} in the bundle",
                              hint=REEXPORT)
        check_entry_set(src, verified, entry, _check_entry_record(src, folder, entry))
    return dependency_order(manifest.entries)


@dataclass
class CheckedBundle:
    """A bundle that passed every check that leaves the host as it was."""

    manifest: BundleManifest
    lock: ImagesLock
    archives: list[str]  # its image archives, relative to the bundle
    entries: list[str]  # its store entries, in import order
    signed_by: str  # the keyid of the trusted key its signature verified against


def check_before_import(src: Path, store: Store, say: Say = print,
                        keys: list[SSlibKey] | tuple[SSlibKey, ...] = ()) -> CheckedBundle:
    """Everything about the bundle that can be checked without changing this host; the first
    problem is raised, naming the file. The signature first (against KEYS, the keys this site
    trusts), then everything it vouches for."""
    if not src.is_dir():
        raise UsageError(f"{src} is not a directory", hint="name the folder `trace-tui bundle export` wrote")
    files = bundle_files(src)
    if SIGNATURE not in files:
        read_manifest(src)  # not a bundle at all is said as such, before its missing signature
        raise CheckFailed(f"bundle refused: {src / SIGNATURE} is missing; images and hub-stated models enter a site "
                          "only as subjects of a bundle signed by a key it trusts",
                          hint="export it again where `trace-tui keys init` made a signing key")
    verified = verify_signature(src, list(keys))
    say(f"signature verified: key {signed_by(verified)}")
    manifest_bytes = read_manifest_bytes(src)
    manifest = parse_manifest(manifest_bytes, src / MANIFEST)
    hold_to_signature(src, verified, manifest_bytes, manifest)
    problems = check_bundle(src, manifest, say, on_disk=files - {SIGNATURE})
    if problems:
        raise CheckFailed(f"bundle refused: {problems[0]}"
                          + (f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""))
    lock = _read_bundle_lock(src, manifest)
    archives = sorted(rel for rel in manifest.files if rel.startswith("images/") and rel.endswith(".tar")
                      and not rel.startswith(CHARLIECLOUD_DIR + "/"))  # root filesystems, not image archives
    _check_archives({rel: read_archive_index(src / rel, rel) for rel in archives}, lock)
    return CheckedBundle(manifest, lock, archives, _checked_entries(src, store, manifest, files, verified),
                         verified.keyid)


# ---------------------------------------------------------------------------------------------
# import, part 2: changing the host, and taking a failed import back

def import_bundle(src: Path, *, store: Store, client: DockerClient | None, images_lock_path: Path,
                  say: Say = print, keys: list[SSlibKey] | tuple[SSlibKey, ...] = (),
                  place_images: Callable[[Path, ImagesLock], ImagesLock] | None = None) -> CheckedBundle:
    """Check the bundle at SRC whole (its signature against KEYS first), then fill the store, load the
    images, tag them and write the image lock, in that order; a failure on the way takes back what this
    import added (see module doc). PLACE_IMAGES: instead of Docker, (the bundle, its lock) -> the site's lock,
    having put the images where another runtime reads them (service.bundle_images)."""
    checked = check_before_import(src, store, say, keys)
    changes = HostChanges(store, client, signed_by=checked.signed_by)  # type: ignore[arg-type]
    step = "before changing anything"
    try:
        for entry in checked.entries:
            step = f"importing store entry {entry}"
            changes.import_entry(entry, src, say)
        if place_images is not None:
            step = "putting the images where the runtime reads them"
            site = place_images(src, checked.lock)
            step = f"writing the image lock {images_lock_path}"
            _write_lock(site, images_lock_path)
            return checked
        changes.note_images_present(checked.lock)
        for rel in checked.archives:
            step = f"loading {rel}"
            changes.load(src / rel, rel, say)
        step = "checking the loaded images"
        changes.check_loaded(checked.lock)
        step = "tagging the images"
        changes.tag(checked.lock)
        step = f"writing the image lock {images_lock_path}"
        # the exporter's other runtimes' images lie on its disk, not here
        _write_lock(checked.lock.model_copy(update={"exports": {}}), images_lock_path)
    except KeyboardInterrupt:
        changes.undo()
        raise
    except Exception as exc:  # noqa: BLE001 - whatever stopped it, what this import added is taken back
        raise _import_failed(exc, step, changes.undo(), images_lock_path) from None
    return checked


def _write_lock(lock: ImagesLock, path: Path) -> None:
    write_images_lock(lock, path)  # atomic: the site's lock is either the old one or this one


def _import_failed(exc: Exception, step: str, undone: str, lock_path: Path) -> TraceTuiError:
    reason = exc.message if isinstance(exc, TraceTuiError) else f"{type(exc).__name__}: {exc}"
    kind = type(exc) if isinstance(exc, TraceTuiError) else CheckFailed
    return kind(f"bundle import failed {shown(step, 300)}: {shown(reason, 400)}; {undone}; the image lock "
                f"{lock_path} was not written",
                hint="fix what is named, or export the bundle again; then import it again")


@dataclass
class HostChanges:
    """What an import changed on this host, so that a failure takes back exactly that and says so."""

    store: Store
    client: DockerClient
    signed_by: str | None = None  # the keyid the bundle's signature verified against
    entries_added: list[str] = field(default_factory=list)  # not in the store before: removed on a failure
    entries_again: list[str] = field(default_factory=list)  # in the store before, imported again: left
    present: set[str] = field(default_factory=set)  # locked image ids on the host before the load
    loading: bool = False  # a load began: images may have been added
    loaded: set[str] = field(default_factory=set)  # image ids the loads reported
    tags_before: dict[str, str | None] = field(default_factory=dict)  # lock tag -> the id it named (None: none)

    def import_entry(self, entry: str, src: Path, say: Say) -> None:
        was_there = os.path.lexists(self.store.entry_dir(entry))
        _import_entry(self.store, entry, src, say, self.signed_by)
        (self.entries_again if was_there else self.entries_added).append(entry)

    def note_images_present(self, lock: ImagesLock) -> None:
        self.present = {img.id for img in lock.images.values() if self._image_id(img.id) is not None}

    def load(self, path: Path, rel: str, say: Say) -> None:
        say(f"loading {rel}")
        self.loading = True
        try:
            load_untagged(self.client, path, rel, say, self.loaded)
        except TraceTuiError:
            raise
        except Exception as exc:  # noqa: BLE001 - the engine's own errors (ImageLoadError, APIError, ...)
            raise CheckFailed(f"docker load of {shown(rel)} failed: {shown(getattr(exc, 'explanation', None) or exc)}"
                              ) from None

    @property
    def images_added(self) -> list[str]:
        return sorted(self.loaded - self.present)

    def check_loaded(self, lock: ImagesLock) -> None:
        ids = {img.id for img in lock.images.values()}
        for stage, img in sorted(lock.images.items()):
            if img.id not in self.loaded:
                raise CheckFailed(f"the bundle's images hold no image {img.id} for {stage} (they loaded as "
                                  f"{', '.join(sorted(self.loaded)) or 'nothing'})")
        if self.loaded - ids:
            raise CheckFailed(f"docker loaded {', '.join(sorted(self.loaded - ids))}, which the image lock does "
                              "not name")

    def tag(self, lock: ImagesLock) -> None:
        from docker.errors import APIError

        for _stage, img in sorted(lock.images.items()):
            self.tags_before.setdefault(img.tag, self._image_id(img.tag))
            repo, tag = img.tag.rsplit(":", 1)  # a registry host's port has a ':' too
            try:
                self.client.api.tag(img.id, repo, tag)
            except APIError as exc:
                raise CheckFailed(f"docker refused the tag {img.tag} for {img.id}: "
                                  f"{shown(exc.explanation or exc)}") from None

    def _image_id(self, ref: str) -> str | None:
        from docker.errors import ImageNotFound

        try:
            return self.client.api.inspect_image(ref)["Id"]
        except ImageNotFound:
            return None

    def undo(self) -> str:
        """Take back what this import added; say what was and was not."""
        done: list[str] = []
        left: list[str] = []
        self._restore_tags(done, left)
        self._remove_images(done, left)
        self._remove_entries(done, left)
        if self.entries_again:
            left.append(f"store entries that were already here, imported again ({', '.join(self.entries_again)})")
        said = f"undone: {'; '.join(done)}" if done else "nothing on this host had been changed yet"
        said += "" if self.loading else "; no image was loaded or tagged"
        return said + (f"; left as they are: {'; '.join(left)}" if left else "")

    def _restore_tags(self, done: list[str], left: list[str]) -> None:
        for ref, before in sorted(self.tags_before.items()):
            try:
                now = self._image_id(ref)
                if now == before:
                    continue
                if before is not None:
                    self.client.api.tag(before, *ref.rsplit(":", 1))
                elif now in self.images_added or len(self.client.api.inspect_image(now)["RepoTags"] or []) > 1:
                    self.client.api.remove_image(ref)  # only the tag goes (or the image this import added)
                else:  # its last tag: removing it would delete an image that was here before
                    left.append(f"tag {ref} (on {now})")
                    continue
                done.append(f"tag {ref} {'restored' if before is not None else 'removed'}")
            except Exception as exc:  # noqa: BLE001 - say it and go on taking the rest back
                left.append(f"tag {ref} ({shown(exc, 120)})")

    def _remove_images(self, done: list[str], left: list[str]) -> None:
        from docker.errors import ImageNotFound

        removed = []
        for image_id in self.images_added:
            try:
                self.client.api.remove_image(image_id)
                removed.append(image_id[:19])
            except ImageNotFound:
                removed.append(image_id[:19])
            except Exception as exc:  # noqa: BLE001
                left.append(f"image {image_id} ({shown(exc, 120)})")
        if removed:
            done.append(f"removed the images it had loaded ({', '.join(removed)})")

    def _remove_entries(self, done: list[str], left: list[str]) -> None:
        removed = []
        for entry in reversed(self.entries_added):
            try:
                self.store.remove(entry)
                removed.append(entry)
            except Exception as exc:  # noqa: BLE001
                left.append(f"store entry {entry} ({shown(exc, 120)})")
        if removed:
            done.append(f"removed the store entries it had added ({', '.join(reversed(removed))})")


def _import_entry(store: Store, entry: str, src: Path, say: Say, signed_by: str | None = None) -> None:
    """Fill the store through its verifying staging, from the bundled copy of the entry."""
    folder = _entry_folder(store, entry, src)
    _check_entry_record(src, folder, entry)
    say(f"importing store entry {entry}")
    import_entry_dir(store, folder, signed_by=signed_by)
