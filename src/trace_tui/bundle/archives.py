"""The bundle's images: the image lock's checks (one image per stage, each under a trace-tui stage
tag), the image archives' own index (the images they hold and the tags `docker load` would apply),
and loading an archive untagged."""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
import tarfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Iterable, Iterator

from pydantic import ValidationError

from trace_tui.bundle.export import _Progress
from trace_tui.bundle.files import (
    CHUNK,
    LOCK_FILE,
    MANIFEST,
    RECORD_LIMIT,
    REEXPORT,
    BundleManifest,
    Say,
    _first_error,
    _read_bundle_file,
    shown,
)
from trace_tui.errors import CheckFailed
from trace_tui.images import IMAGE_NAMES, ImagesLock

if TYPE_CHECKING:  # pragma: no cover
    from docker import DockerClient

INDEX_LIMIT = 16 << 20  # an archive's manifest.json, repositories, index.json, or one image config
IMAGE_ID = re.compile(r"sha256:[0-9a-f]{64}")  # used with fullmatch: `$` would let a newline through


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


def _read_bundle_lock(src: Path, manifest: BundleManifest) -> ImagesLock:
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


def _check_lock(lock: ImagesLock, path: Path) -> None:
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


def _check_manifest_images(manifest: BundleManifest, lock: ImagesLock, path: Path) -> None:
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
        parts = member.name.split("/")
        if member.name.startswith("/") or ".." in parts:  # `docker save` never writes one; nothing should read it
            raise _not_docker_save(rel, f"it holds a member named {shown(member.name)}, outside the archive's root")
        if member.issym() or member.islnk():  # `docker save` links a layer saved twice: `../<id>/layer.tar`
            base = posixpath.dirname(member.name) if member.issym() else ""
            target = posixpath.normpath(posixpath.join(base, member.linkname))
            if member.linkname.startswith("/") or target == ".." or target.startswith("../"):
                raise _not_docker_save(rel, f"its {shown(member.name)} links to {shown(member.linkname)}, outside the "
                                            "archive's root")
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
                 required: bool = False) -> object:
    member = members.get(name)
    if member is None:
        if required:
            raise _not_docker_save(rel, f"it has no {name}")
        return None
    try:
        return json.loads(_member_bytes(tar, member, rel))
    except (ValueError, RecursionError):
        raise _not_docker_save(rel, f"its {name} is not valid JSON") from None


def _archive_images(tar: tarfile.TarFile, members: dict[str, tarfile.TarInfo], manifest: object,
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


def _repositories_names(data: object, rel: str) -> list[str]:
    """`repositories` ({repo: {tag: layer id}}): the tags an older `docker load` applies."""
    if data is None:
        return []
    if not isinstance(data, dict) or not all(isinstance(tags, dict) for tags in data.values()):
        raise _not_docker_save(rel, "its repositories is not {repository: {tag: id}}")
    return [f"{repo}:{tag}" for repo, tags in data.items() for tag in tags]


def _oci_names(data: object, rel: str) -> list[str]:
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


def _check_archives(indexes: dict[str, ArchiveIndex], lock: ImagesLock) -> None:
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


# -- loading an archive: untagged, streamed, the ids Docker reports noted ----------------------

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


def _write_untagged(path: Path, out: IO[bytes]) -> None:
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


def load_untagged(client: DockerClient, path: Path, rel: str, say: Say, loaded: set[str]) -> None:
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
