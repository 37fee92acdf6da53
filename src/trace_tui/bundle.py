"""Air-gapped bundles: everything a recipe needs to run with no network, in one directory.

Layout::

    DIR/manifest.json        sha256 and size of every other file (written last)
    DIR/images.lock.json     the image lock the images were built under
    DIR/images/stages.tar    one `docker save` of every stage image: layers the
                             images share (infer and score share nearly all) once
    DIR/store/<kind>/<dir>/  the store entries the recipe needs (record + files)
    DIR/wheelhouse/          trace-tui's own wheel and its host dependencies

A bundle comes from elsewhere and is input, not trusted. Import first checks all that can be
checked without changing the host: no symbolic link or special file anywhere in it, the
manifest (a missing, extra or altered file is refused by name), the image lock (one image per
stage, each under a trace-tui stage tag), the image archives' own index (the images they hold and
the tags `docker load` would apply), and every store entry's record. Only then does it change the
host, in this order: the store entries (through the store's verifying import), the images (loaded
untagged, their ids checked against the lock: a registry digest does not survive save/load, the id
does), the lock's tags, and the image lock last. A failure on the way takes back what this import
added, and its one line says what was and was not changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Callable, Iterable, Iterator, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trace_tui import __version__
from trace_tui.common.digest import sha256_text
from trace_tui.errors import CheckFailed, TraceTuiError, UsageError, out_of_space
from trace_tui.recipe_schema import Recipe

MANIFEST = "manifest.json"
CHUNK = 8 << 20
Say = Callable[[str], None]


class BundleFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    bytes: int = Field(ge=0)


# A bundle names its recipe by the recipe's own `name:` (recipe_schema.Recipe.name: lower-case
# letters, digits and dashes), never a path: the import prints it inside a command to run.
RecipeName = Annotated[(str, *Recipe.model_fields["name"].metadata)]  # (a tuple: Python 3.10)


class BundleManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: Literal["trace-tui-bundle-v1"] = "trace-tui-bundle-v1"
    trace_tui_version: str = Field(pattern=r"^[0-9A-Za-z][0-9A-Za-z.+!-]{0,63}$")  # a PEP 440 version
    recipe: RecipeName
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


# ---------------------------------------------------------------------------------------------
# import, part 1: what can be checked without changing the host

LOCK_FILE = "images.lock.json"
MANIFEST_LIMIT = 256 << 20  # a manifest of a million files is well under this
RECORD_LIMIT = 64 << 20  # an image lock, a store entry's record
INDEX_LIMIT = 16 << 20  # an archive's manifest.json, repositories, index.json, or one image config
IMAGE_ID = re.compile(r"sha256:[0-9a-f]{64}")  # used with fullmatch: `$` would let a newline through
REEXPORT = "export the bundle again with `trace-tui bundle export` where the appliance was built"


def shown(text: Any, limit: int = 160) -> str:
    """Text from a bundle as a message may show it: unprintable characters escaped (a name in a
    bundle must not start a second line, move the cursor or colour the terminal), long text cut."""
    safe = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in str(text))
    return safe if len(safe) <= limit else safe[:limit - 3] + "..."


def _first_error(exc: ValidationError) -> str:
    """A pydantic error in one line: the first bad field, what is wrong with it, the value found."""
    errors = exc.errors(include_url=False)
    err = errors[0]
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    if err["type"] == "json_invalid":
        return f"not valid JSON ({shown(err['msg'])})"
    where = ".".join(str(part) for part in err["loc"]) or "(the whole file)"
    found = "" if err["type"] == "missing" else f", found {shown(repr(err['input']), 80)}"
    return f"field '{shown(where)}': {err['msg']}{found}{more}"


def bundle_files(src: Path) -> set[str]:
    """The bundle's files (paths relative to SRC), from directory listings alone. A symbolic link
    anywhere (a file or a folder, manifest.json included), or anything but a plain file or folder,
    refuses the bundle by name before any content is read: a link would be hashed and imported from
    wherever it points, outside the bundle, and reading a FIFO would block for ever."""
    files: set[str] = set()
    folders = [src]
    while folders:
        folder = folders.pop()
        for item in _listing(folder):
            rel = Path(item.path).relative_to(src).as_posix()
            kind = _kind(item)
            if kind == "dir":
                folders.append(Path(item.path))
            elif kind == "file":
                files.add(rel)
            else:
                raise CheckFailed(f"bundle refused: {shown(rel)} is {kind}",
                                  hint=f"a bundle holds plain files and folders only; {REEXPORT}")
    return files


def _listing(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as items:
            return sorted(items, key=lambda item: item.name)
    except OSError as exc:
        raise CheckFailed(f"{shown(folder)}: cannot be listed ({exc.strerror or exc})",
                          hint="make the whole bundle readable by this user") from None


def _kind(item: os.DirEntry) -> str:
    try:
        if item.is_symlink():
            return "a symbolic link"
        if item.is_dir(follow_symlinks=False):
            return "dir"
        return "file" if item.is_file(follow_symlinks=False) else "not a plain file or folder"
    except OSError as exc:
        raise CheckFailed(f"{shown(item.path)}: cannot be examined ({exc.strerror or exc})") from None


def _read_bundle_file(src: Path, rel: str, *, limit: int) -> bytes:
    """A small file of the bundle, refused by name if it is missing, a link, not a plain file, larger
    than LIMIT or unreadable. Opened without following links or waiting on a FIFO."""
    path = src / rel
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise CheckFailed(f"{shown(path)}: missing from the bundle", hint=REEXPORT) from None
    except OSError as exc:
        what = "is a symbolic link" if os.path.islink(path) else f"cannot be read ({exc.strerror or exc})"
        raise CheckFailed(f"{shown(path)}: {what}", hint=f"make the bundle's files readable; or {REEXPORT}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise CheckFailed(f"{shown(path)}: not a plain file", hint=REEXPORT)
    with open(fd, "rb") as fh:
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise CheckFailed(f"{shown(path)}: cannot be read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise CheckFailed(f"{shown(path)}: larger than {limit >> 20} MiB, far more than such a file holds",
                          hint=REEXPORT)
    return data


def read_manifest(src: Path) -> BundleManifest:
    if not src.is_dir():
        raise UsageError(f"{src} is not a directory", hint="name the folder `trace-tui bundle export` wrote")
    path = src / MANIFEST
    if not os.path.lexists(path):
        # a folder with no manifest is not a bundle at all: bad input, like a file or a missing path
        raise UsageError(f"{path}: missing; {src} is not a trace-tui bundle (or an incomplete one)",
                         hint="name the folder `trace-tui bundle export` wrote, manifest.json and all")
    data = _read_bundle_file(src, MANIFEST, limit=MANIFEST_LIMIT)
    try:
        return BundleManifest.model_validate_json(data)
    except ValidationError as exc:
        raise CheckFailed(f"{path}: not a valid bundle manifest: {_first_error(exc)}", hint=REEXPORT) from None


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError as exc:
        raise CheckFailed(f"{shown(path)}: cannot be examined ({exc.strerror or exc})") from None


def check_bundle(src: Path, manifest: BundleManifest, say: Say = print, on_disk: set[str] | None = None) -> list[str]:
    """Every problem with the bundle's files, one line each, naming the file. Empty: intact.
    ON_DISK: the bundle's files as `bundle_files` found them (listed here when not given)."""
    from trace_tui.store.hashing import sha256_files

    found = (bundle_files(src) if on_disk is None else on_disk) - {MANIFEST}
    listed = set(manifest.files)
    problems = [f"{shown(rel)}: missing from the bundle" for rel in sorted(listed - found)]
    problems += [f"{shown(rel)}: extra file, not in the bundle manifest" for rel in sorted(found - listed)]
    sizes = {rel: _size(src / rel) for rel in sorted(found & listed)}
    problems += [f"{shown(rel)}: {size} bytes, the manifest says {manifest.files[rel].bytes}"
                 for rel, size in sizes.items() if size != manifest.files[rel].bytes]
    sized_ok = [rel for rel, size in sizes.items() if size == manifest.files[rel].bytes]
    say(f"checking {len(sized_ok)} files ({sum(sizes[rel] for rel in sized_ok) >> 20} MiB)")
    unreadable: dict[Path, OSError] = {}
    digests = sha256_files([src / rel for rel in sized_ok], errors=unreadable)
    problems += [f"{shown(path.relative_to(src).as_posix())}: cannot be read ({exc.strerror or exc})"
                 for path, exc in unreadable.items()]
    for path, digest in digests.items():
        rel = path.relative_to(src).as_posix()
        if digest != manifest.files[rel].sha256:
            problems.append(f"{shown(rel)}: sha256 {digest} differs from the manifest's {manifest.files[rel].sha256}")
    return sorted(problems)


# -- the image lock: one image per stage, each under a trace-tui stage tag ---------------------

# Docker's reference grammar (distribution/reference), the parts a stage tag may use.
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_DOMAIN = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_REGISTRY_HOST = rf"(?:localhost(?::[0-9]+)?|{_DOMAIN}(?:\.{_DOMAIN})+(?::[0-9]+)?|{_DOMAIN}:[0-9]+)"
_PATH = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"


def stage_tag_rule(stage: str, version: str, flavor: str) -> str:
    """In words: the tags trace-tui gives the STAGE image of a VERSION-FLAVOR build."""
    return (f"trace-tui/{stage}:{version}-{flavor} (images.image_tag), or "
            f"REGISTRY/trace-tui-{stage}:{version}-{flavor} from a site registry (`make push REGISTRY=host:port/ns`)")


def is_stage_tag(tag: str, stage: str, version: str, flavor: str) -> bool:
    """TAG is one trace-tui gives the STAGE image of a VERSION-FLAVOR build: `trace-tui/STAGE:VERSION-FLAVOR`
    (images.image_tag) or `host[:port][/ns...]/trace-tui-STAGE:VERSION-FLAVOR` (a site registry, as
    images.push_images names it). Nothing else: a bundle must not re-point any other tag on the host,
    and a tag with no `:VERSION-FLAVOR` would silently become `:latest`."""
    suffix = f"{version}-{flavor}"
    if len(tag) > 255 or not _TAG.fullmatch(suffix):
        return False
    repo = rf"(?:trace-tui/{re.escape(stage)}|{_REGISTRY_HOST}(?:/{_PATH})*/trace-tui-{re.escape(stage)})"
    return re.fullmatch(rf"{repo}:{re.escape(suffix)}", tag) is not None


def _read_bundle_lock(src: Path, manifest: BundleManifest) -> Any:
    from trace_tui.images import ImagesLock

    path = src / LOCK_FILE
    if LOCK_FILE not in manifest.files:
        raise CheckFailed(f"{path}: the bundle has no image lock", hint=REEXPORT)
    try:
        lock = ImagesLock.model_validate_json(_read_bundle_file(src, LOCK_FILE, limit=RECORD_LIMIT))
    except ValidationError as exc:
        raise CheckFailed(f"{path}: not a valid image lock: {_first_error(exc)}", hint=REEXPORT) from None
    _check_lock(lock, path)
    _check_manifest_images(manifest, lock, src / MANIFEST)
    return lock


def _check_lock(lock: Any, path: Path) -> None:
    from trace_tui.images import IMAGE_NAMES

    if sorted(lock.images) != sorted(IMAGE_NAMES):
        raise CheckFailed(f"{path}: images {', '.join(shown(n) for n in sorted(lock.images)) or '(none)'}; a bundle's "
                          f"image lock holds one image for each stage, {', '.join(IMAGE_NAMES)}", hint=REEXPORT)
    for stage in IMAGE_NAMES:
        img = lock.images[stage]
        if img.name != stage:
            raise CheckFailed(f"{path}: images.{stage}.name is '{shown(img.name)}', not {stage}", hint=REEXPORT)
        if not IMAGE_ID.fullmatch(img.id):
            raise CheckFailed(f"{path}: images.{stage}.id '{shown(img.id)}' is not an image id (sha256:<64 hex>)",
                              hint=REEXPORT)
        if not is_stage_tag(img.tag, stage, lock.version, lock.flavor):
            raise CheckFailed(f"{path}: images.{stage}.tag '{shown(img.tag)}' is not a trace-tui {stage} image tag",
                              hint=f"a bundle may tag only {shown(stage_tag_rule(stage, lock.version, lock.flavor))}")


def _check_manifest_images(manifest: BundleManifest, lock: Any, path: Path) -> None:
    locked = {name: img.id for name, img in lock.images.items()}
    for name in sorted(set(manifest.images) | set(locked)):
        if manifest.images.get(name) != locked.get(name):
            raise CheckFailed(f"{path}: images.{shown(name)} is {shown(manifest.images.get(name, 'absent'))}, the "
                              f"bundle's image lock says {locked.get(name, 'absent')}", hint=REEXPORT)


# -- the image archives' own index: the images they hold and the tags `docker load` applies ----

DOCKER_MANIFEST, REPOSITORIES, OCI_INDEX = "manifest.json", "repositories", "index.json"


@dataclass
class ArchiveIndex:
    """What `docker load` of one archive would do: the images it holds (image id -> the tags its
    manifest.json gives it) and the names its `repositories` and OCI index.json would apply."""

    tags: dict[str, list[str]]
    other_names: list[str]


def _archive_member(member: tarfile.TarInfo) -> str:
    """A member's path as Docker's untar resolves it: cleaned, relative to the archive's root."""
    return posixpath.normpath("/" + member.name).lstrip("/")


def read_archive_index(path: Path, rel: str) -> ArchiveIndex:
    """The index of one image archive, read with tarfile, loading nothing. Only a plain tar is
    accepted (export never compresses), and the import later streams Docker the very members read
    here, so what Docker loads is what was checked."""
    try:
        with tarfile.open(path, "r:") as tar:
            members = _archive_members(tar, rel)
            manifest = _member_json(tar, members, DOCKER_MANIFEST, rel, required=True)
            tags = _archive_images(tar, members, manifest, rel)
            names = _repositories_names(_member_json(tar, members, REPOSITORIES, rel), rel)
            names += _oci_names(_member_json(tar, members, OCI_INDEX, rel), rel)
            return ArchiveIndex(tags, names)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise CheckFailed(f"bundle refused: {shown(rel)}: not an image archive `docker save` writes ({shown(exc)})",
                          hint=REEXPORT) from None


def _not_docker_save(rel: str, why: str) -> CheckFailed:
    return CheckFailed(f"bundle refused: {shown(rel)}: {why}; not an image archive `docker save` writes", hint=REEXPORT)


def _archive_members(tar: tarfile.TarFile, rel: str) -> dict[str, tarfile.TarInfo]:
    members: dict[str, tarfile.TarInfo] = {}
    for member in tar:
        name = _archive_member(member)
        if name in members:  # the later copy would overwrite the one checked here
            raise _not_docker_save(rel, f"it holds {shown(name)} twice")
        members[name] = member
    return members


def _member_bytes(tar: tarfile.TarFile, member: tarfile.TarInfo, rel: str) -> bytes:
    if not member.isreg() or member.size > INDEX_LIMIT:
        raise _not_docker_save(rel, f"its {shown(member.name)} is not a plain file of at most {INDEX_LIMIT >> 20} MiB")
    fh = tar.extractfile(member)
    assert fh is not None  # a regular member always has data
    return fh.read()


def _member_json(tar: tarfile.TarFile, members: dict[str, tarfile.TarInfo], name: str, rel: str,
                 required: bool = False) -> Any:
    member = members.get(name)
    if member is None:
        if required:
            raise _not_docker_save(rel, f"it has no {name}")
        return None
    try:
        return json.loads(_member_bytes(tar, member, rel))
    except (ValueError, RecursionError):
        raise _not_docker_save(rel, f"its {name} is not valid JSON") from None


def _archive_images(tar: tarfile.TarFile, members: dict[str, tarfile.TarInfo], manifest: Any,
                    rel: str) -> dict[str, list[str]]:
    """image id -> RepoTags, from manifest.json. The id is the sha256 of the image's config as the
    archive holds it (what Docker computes), not the config's file name."""
    if not isinstance(manifest, list) or not all(isinstance(item, dict) for item in manifest):
        raise _not_docker_save(rel, "its manifest.json is not a list of images")
    tags: dict[str, list[str]] = {}
    for item in manifest:
        config, repo_tags = item.get("Config"), item.get("RepoTags") or []
        if not isinstance(config, str) or not isinstance(repo_tags, list) \
                or not all(isinstance(tag, str) for tag in repo_tags):
            raise _not_docker_save(rel, "its manifest.json has an image with no Config or with RepoTags not a list")
        member = members.get(posixpath.normpath("/" + config).lstrip("/"))
        if member is None:
            raise _not_docker_save(rel, f"its manifest.json names a config {shown(config)} it does not hold")
        image_id = "sha256:" + hashlib.sha256(_member_bytes(tar, member, rel)).hexdigest()
        tags.setdefault(image_id, []).extend(repo_tags)
    return tags


def _repositories_names(data: Any, rel: str) -> list[str]:
    """`repositories` ({repo: {tag: layer id}}): the tags an older `docker load` applies."""
    if data is None:
        return []
    if not isinstance(data, dict) or not all(isinstance(tags, dict) for tags in data.values()):
        raise _not_docker_save(rel, "its repositories is not {repository: {tag: id}}")
    return [f"{repo}:{tag}" for repo, tags in data.items() for tag in tags]


def _oci_names(data: Any, rel: str) -> list[str]:
    """An OCI index.json's image names (`io.containerd.image.name`, which a containerd image store
    applies), written as Docker shows them (docker.io/ and library/ left out)."""
    if data is None:
        return []
    manifests = data.get("manifests") if isinstance(data, dict) else None
    if not isinstance(manifests, list) or not all(isinstance(m, dict) for m in manifests):
        raise _not_docker_save(rel, "its index.json has no list of manifests")
    names = []
    for item in manifests:
        annotations = item.get("annotations") or {}
        name = annotations.get("io.containerd.image.name") if isinstance(annotations, dict) else None
        if name is not None:
            names.append(str(name).removeprefix("docker.io/").removeprefix("library/"))
    return names


def _check_archives(indexes: dict[str, ArchiveIndex], lock: Any) -> None:
    """Every image the archives hold is one the lock names, under none but the lock's tag for it, and
    they hold every image the lock names."""
    allowed: dict[str, set[str]] = {}
    for img in lock.images.values():
        allowed.setdefault(img.id, set()).add(img.tag)
    lock_tags = {img.tag for img in lock.images.values()}
    held: set[str] = set()
    for rel, index in sorted(indexes.items()):
        for image_id, tags in sorted(index.tags.items()):
            if image_id not in allowed:
                raise CheckFailed(f"bundle refused: {shown(rel)} holds image {image_id}, which the bundle's image "
                                  "lock does not name", hint=REEXPORT)
            for tag in tags:
                if tag not in allowed[image_id]:
                    raise CheckFailed(f"bundle refused: {shown(rel)} would tag image {image_id[:19]} as "
                                      f"'{shown(tag)}'; the image lock tags it "
                                      f"{', '.join(sorted(allowed[image_id]))} only",
                                      hint=f"a bundle never re-points another tag on this host; {REEXPORT}")
            held.add(image_id)
        for name in index.other_names:
            if name not in lock_tags:
                raise CheckFailed(f"bundle refused: {shown(rel)} would tag an image '{shown(name)}', which is not a "
                                  "tag of the bundle's image lock",
                                  hint=f"a bundle never re-points another tag on this host; {REEXPORT}")
    for stage, img in sorted(lock.images.items()):
        if img.id not in held:
            raise CheckFailed(f"bundle refused: its image archives hold no image {img.id} for {stage} (they hold "
                              f"{', '.join(sorted(held)) or 'none'})", hint=REEXPORT)


# -- store entries: each with a folder and a readable record naming it -----------------------

def _entry_folder(store: Any, entry: str, src: Path) -> Path:
    try:
        return src / "store" / store.entry_dir(entry).relative_to(store.entries_dir)
    except UsageError as exc:  # not an entry name at all
        raise CheckFailed(f"{src / MANIFEST}: entries: '{shown(entry)}' is not a store entry name "
                          f"({shown(exc.message)})",
                          hint=REEXPORT) from None


def _check_entry_record(src: Path, folder: Path, entry: str) -> None:
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


def _checked_entries(src: Path, store: Any, manifest: BundleManifest, files: set[str]) -> list[str]:
    """The bundle's entries in import order: benchmarks last, as they are checked against the
    provenance matrix of the release imported before them."""
    if len(set(manifest.entries)) != len(manifest.entries):
        twice = next(e for e in manifest.entries if manifest.entries.count(e) > 1)
        raise CheckFailed(f"{src / MANIFEST}: entries lists {shown(twice)} twice", hint=REEXPORT)
    for entry in manifest.entries:
        folder = _entry_folder(store, entry, src)
        rel = folder.relative_to(src).as_posix()
        if not any(f.startswith(rel + "/") for f in files):
            raise CheckFailed(f"{src / MANIFEST}: entry {shown(entry)} has no folder {shown(rel)} in the bundle",
                              hint=REEXPORT)
        _check_entry_record(src, folder, entry)
    return sorted(manifest.entries, key=lambda name: name.startswith("benchmark:"))


@dataclass
class CheckedBundle:
    """A bundle that passed every check that leaves the host as it was."""

    manifest: BundleManifest
    lock: Any  # images.ImagesLock
    archives: list[str]  # its image archives, relative to the bundle
    entries: list[str]  # its store entries, in import order


def check_before_import(src: Path, store: Any, say: Say = print) -> CheckedBundle:
    """Everything about the bundle that can be checked without changing this host; the first
    problem is raised, naming the file."""
    if not src.is_dir():
        raise UsageError(f"{src} is not a directory", hint="name the folder `trace-tui bundle export` wrote")
    files = bundle_files(src)
    manifest = read_manifest(src)
    problems = check_bundle(src, manifest, say, on_disk=files)
    if problems:
        raise CheckFailed(f"bundle refused: {problems[0]}"
                          + (f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""))
    lock = _read_bundle_lock(src, manifest)
    archives = sorted(rel for rel in manifest.files if rel.startswith("images/") and rel.endswith(".tar"))
    _check_archives({rel: read_archive_index(src / rel, rel) for rel in archives}, lock)
    return CheckedBundle(manifest, lock, archives, _checked_entries(src, store, manifest, files))


# ---------------------------------------------------------------------------------------------
# import, part 2: changing the host, and taking a failed import back

def import_bundle(src: Path, *, store: Any, client: Any, images_lock_path: Path, say: Say = print) -> BundleManifest:
    """Check the bundle at SRC whole, then fill the store, load the images, tag them and write the image
    lock, in that order; a failure on the way takes back what this import added (see module doc)."""
    checked = check_before_import(src, store, say)
    changes = HostChanges(store, client)
    step = "before changing anything"
    try:
        for entry in checked.entries:
            step = f"importing store entry {entry}"
            changes.import_entry(entry, src, say)
        changes.note_images_present(checked.lock)
        for rel in checked.archives:
            step = f"loading {rel}"
            changes.load(src / rel, rel, say)
        step = "checking the loaded images"
        changes.check_loaded(checked.lock)
        step = "tagging the images"
        changes.tag(checked.lock)
        step = f"writing the image lock {images_lock_path}"
        _write_lock(checked.lock, images_lock_path)
    except KeyboardInterrupt:
        changes.undo()
        raise
    except Exception as exc:  # noqa: BLE001 - whatever stopped it, what this import added is taken back
        raise _import_failed(exc, step, changes.undo(), images_lock_path) from None
    return checked.manifest


def _write_lock(lock: Any, path: Path) -> None:
    from trace_tui.images import write_images_lock

    write_images_lock(lock, path)  # atomic: the site's lock is either the old one or this one


def _import_failed(exc: Exception, step: str, undone: str, lock_path: Path) -> TraceTuiError:
    reason = exc.message if isinstance(exc, TraceTuiError) else f"{type(exc).__name__}: {exc}"
    kind = type(exc) if isinstance(exc, TraceTuiError) else CheckFailed
    return kind(f"bundle import failed {shown(step, 300)}: {shown(reason, 400)}; {undone}; the image lock "
                f"{lock_path} was not written",
                hint="fix what is named, or export the bundle again; then import it again")


def _note_loaded(responses: Iterable[dict], rel: str, ids: set[str]) -> None:
    """Add to IDS the image ids `docker load` reports, as it reports them (a failure later in the
    stream leaves those noted, to be taken back). docker-py's own parser misses all but one when several
    come in one message; a load that tags anything is a failure (the archive was sent untagged)."""
    for item in responses:
        if "errorDetail" in item or "error" in item:
            detail = item.get("errorDetail", {}).get("message") or item.get("error")
            raise CheckFailed(f"docker load of {shown(rel)} failed: {shown(detail)}")
        text = str(item.get("stream", ""))
        ids |= set(re.findall(r"^Loaded image ID: (sha256:[0-9a-f]{64})\s*$", text, re.M))
        tagged = re.findall(r"^Loaded image: (.+)$", text, re.M)
        if tagged:
            raise CheckFailed(f"docker load of {shown(rel)} tagged {shown(tagged[0])}, which was sent untagged")


def _untagged_manifest(data: bytes) -> bytes:
    manifest = json.loads(data)
    for item in manifest:
        item["RepoTags"] = None
    return json.dumps(manifest).encode()


def _write_untagged(path: Path, out: Any) -> None:
    """ARCHIVE as a tar stream with no tags: manifest.json's RepoTags emptied, `repositories` and the
    OCI index.json (the other places tags come from) left out. Tags are applied from the lock once
    everything passed; and Docker gets exactly the members the index check read."""
    import copy
    import io

    with tarfile.open(path, "r:") as tar, \
            tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT, bufsize=CHUNK, copybufsize=CHUNK) as stream:
        for member in tar:
            name = _archive_member(member)
            if name in (REPOSITORIES, OCI_INDEX):
                continue
            data = tar.extractfile(member) if member.isreg() else None
            if name == DOCKER_MANIFEST and data is not None:
                body = _untagged_manifest(data.read())
                member = copy.copy(member)
                member.size = len(body)
                member.pax_headers = {k: v for k, v in member.pax_headers.items() if k != "size"}
                data = io.BytesIO(body)
            stream.addfile(member, data)


def load_untagged(client: Any, path: Path, rel: str, say: Say, loaded: set[str]) -> None:
    """`docker load` of one image archive with no tags (see _write_untagged), streamed through a pipe:
    a multi-GiB archive is never copied. The image ids Docker reports are added to LOADED."""
    read_fd, write_fd = os.pipe()
    failed: list[BaseException] = []

    def write() -> None:
        try:
            with open(write_fd, "wb") as out:
                _write_untagged(path, out)
        except BaseException as exc:  # noqa: BLE001 - reported below, in the caller's thread
            failed.append(exc)

    writer = threading.Thread(target=write, name="bundle-load", daemon=True)
    writer.start()
    progress = _Progress(rel, path.stat().st_size, say)
    load_error: Exception | None = None
    try:
        with open(read_fd, "rb") as stream:
            def chunks() -> Iterator[bytes]:
                while chunk := stream.read(CHUNK):
                    progress.add(len(chunk))
                    yield chunk

            _note_loaded(client.api.load_image(chunks()), rel, loaded)
    except Exception as exc:  # noqa: BLE001 - raised below, unless the archive could not be read (the cause)
        load_error = exc
    finally:
        writer.join()  # the read end is closed: a writer Docker stopped reading ends on a broken pipe
    if failed and not isinstance(failed[0], BrokenPipeError):
        raise CheckFailed(f"{shown(rel)}: cannot be read for loading ({shown(failed[0])})")
    if load_error is not None:
        raise load_error


@dataclass
class HostChanges:
    """What an import changed on this host, so that a failure takes back exactly that and says so."""

    store: Any
    client: Any
    entries_added: list[str] = field(default_factory=list)  # not in the store before: removed on a failure
    entries_again: list[str] = field(default_factory=list)  # in the store before, imported again: left
    present: set[str] = field(default_factory=set)  # locked image ids on the host before the load
    loading: bool = False  # a load began: images may have been added
    loaded: set[str] = field(default_factory=set)  # image ids the loads reported
    tags_before: dict[str, str | None] = field(default_factory=dict)  # lock tag -> the id it named (None: none)

    def import_entry(self, entry: str, src: Path, say: Say) -> None:
        was_there = os.path.lexists(self.store.entry_dir(entry))
        _import_entry(self.store, entry, src, say)
        (self.entries_again if was_there else self.entries_added).append(entry)

    def note_images_present(self, lock: Any) -> None:
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

    def check_loaded(self, lock: Any) -> None:
        ids = {img.id for img in lock.images.values()}
        for stage, img in sorted(lock.images.items()):
            if img.id not in self.loaded:
                raise CheckFailed(f"the bundle's images hold no image {img.id} for {stage} (they loaded as "
                                  f"{', '.join(sorted(self.loaded)) or 'nothing'})")
        if self.loaded - ids:
            raise CheckFailed(f"docker loaded {', '.join(sorted(self.loaded - ids))}, which the image lock does "
                              "not name")

    def tag(self, lock: Any) -> None:
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


def _import_entry(store: Any, entry: str, src: Path, say: Say) -> None:
    """Fill the store through its verifying staging, from the bundled copy of the entry."""
    from trace_tui.store.importer import import_entry_dir

    folder = _entry_folder(store, entry, src)
    _check_entry_record(src, folder, entry)
    say(f"importing store entry {entry}")
    import_entry_dir(store, folder)
