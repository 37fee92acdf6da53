"""`trace-tui images export --runtime R`: the locked stage images written where another runtime reads them.

- podman: one `docker save` archive of the stage images (shared layers once), for `podman load -i`;
- apptainer: one SIF per stage, `apptainer build KIND.sif docker-archive:ARCHIVE`, ARCHIVE that image alone
  (`docker save TAG`, or cut from a bundle's archive with `--from`, so a cluster without Docker builds them
  itself: Apptainer 1.4 reads only single-image docker-archives);
- charliecloud: one directory image per stage, flattened from Docker's or Podman's storage as
  `ch-convert -i docker|podman TAG DIR` does (:func:`flatten_image`), with the stage contract's mount
  points (/job, /campaign, /store: ch-run binds only onto what exists in a read-only image), a marker
  naming the image id it came from, and, with `--nvidia`, `ch-fromhost --nvidia`.

Each export is recorded in the image lock under ``exports[runtime][kind]`` with its digest (a file's
sha256; a directory's :func:`tree_digest`) and the Docker image id it was written from.
"""

from __future__ import annotations

import io
import json
import os
import posixpath
import shutil
import stat
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path

from trace_tui.common.digest import sha256_file, sha256set
from trace_tui.errors import CheckFailed, RequirementsError, UsageError
from trace_tui.images import ExportedImage, ImagesLock
from trace_tui.runtime.base import CAMPAIGN_MOUNT, JOB_MOUNT, STORE_MOUNT
from trace_tui.runtime.charliecloud import MARKER, charliecloud_env
from trace_tui.store.hashing import sha256_files

Say = Callable[[str], None]
EXPORT_RUNTIMES = ("podman", "apptainer", "charliecloud")
PODMAN_ARCHIVE = "stages.tar"


def tree_digest(root: Path) -> str:
    """A directory image's identity: the sha256set of every file's content, every link's target and every
    entry's type and permission bits (what ch-run would see), by path. Owners are left out: they are the
    exporting user's. Files are hashed in parallel (hashlib releases the GIL): the stage images hold 7 GB."""
    entries: dict[str, str] = {}
    files: dict[Path, str] = {}
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted([*dirs, *names]):
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            st = path.lstat()
            mode = f"{stat.S_IMODE(st.st_mode):04o}"
            if stat.S_ISLNK(st.st_mode):
                entries[rel] = f"link:{os.readlink(path)}"
            elif stat.S_ISREG(st.st_mode):
                entries[rel] = f"file:{mode}:?"  # unreadable here (a 0000 file): its mode alone
                if os.access(path, os.R_OK):
                    files[path] = rel
            elif stat.S_ISDIR(st.st_mode):
                entries[rel] = f"dir:{mode}"
            else:
                entries[rel] = f"other:{stat.S_IFMT(st.st_mode):o}:{mode}"
    for path, digest in sha256_files(list(files)).items():
        rel = files[path]
        entries[rel] = entries[rel].removesuffix("?") + digest
    return sha256set(entries)


def _run(argv: list[str], what: str, *, env: dict[str, str] | None = None) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=env)
    except FileNotFoundError:
        raise RequirementsError(f"{argv[0]} is not installed: needed to {what}") from None
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise CheckFailed(f"{what} failed (`{' '.join(argv[:4])} ...`, exit {done.returncode}): {tail}")


def image_is_locked(engine: str, tag: str, image_id: str) -> None:
    """TAG (a name, or the id itself) names the locked image in ENGINE's storage (docker or podman), or the
    refusal says what it names."""
    try:
        done = subprocess.run([engine, "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True,
                              text=True)
    except FileNotFoundError:
        other = "podman" if engine == "docker" else "docker"
        raise RequirementsError(f"{engine} is not installed: the images are read from its storage",
                                hint=f"export where {engine} has them, or from {other}'s: `--source {other}`") from None
    found = done.stdout.strip()
    if done.returncode != 0 or found.removeprefix("sha256:") != image_id.removeprefix("sha256:"):
        what = f"is {found[:19]}" if done.returncode == 0 else "is not there"
        raise CheckFailed(f"{tag} in {engine}'s storage {what}, the image lock names {image_id[:19]}",
                          hint="load the locked images (`bundle import`, `podman load -i`) or rebuild with "
                               "`make appliance`")


def _save(refs: list[str], dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    _run(["docker", "save", "-o", str(dest), *refs], f"write {dest}")


def _exported(fmt: str, path: Path, source_id: str, digest: str | None = None) -> ExportedImage:
    size = path.stat().st_size if path.is_file() else sum(p.lstat().st_size for p in path.rglob("*"))
    return ExportedImage(format=fmt, path=str(path.resolve()), sha256=digest or sha256_file(path),
                         source_id=source_id, bytes=size)


def export_podman(lock: ImagesLock, kinds: list[str], out: Path, say: Say) -> dict[str, ExportedImage]:
    archive = out / PODMAN_ARCHIVE
    say(f"docker save {', '.join(kinds)} -> {archive}")
    _save([lock.images[k].tag for k in kinds], archive)
    digest = sha256_file(archive)
    return {k: _exported("docker-archive", archive, lock.images[k].id, digest) for k in kinds}


def single_image_archive(archive: Path, tag: str, dest: Path) -> None:
    """From a `docker save` archive of several images (a bundle's), the one of TAG as an archive of its own:
    Apptainer 1.4 builds only from a docker-archive that holds one image. Its config, its layers (and
    what a layer's link `../<id>/layer.tar` names) and a manifest.json of that one image are copied."""
    with tarfile.open(archive, "r:") as tar:
        members = {m.name.removeprefix("./"): m for m in tar.getmembers()}
        manifest_member = members.get("manifest.json")
        if manifest_member is None:
            raise CheckFailed(f"{archive} has no manifest.json: not an archive `docker save` writes")
        fh = tar.extractfile(manifest_member)
        assert fh is not None
        entries = [e for e in json.loads(fh.read()) if tag in (e.get("RepoTags") or [])]
        if len(entries) != 1:
            raise CheckFailed(f"{archive} holds {len(entries)} images tagged {tag}, not one")
        entry = entries[0]
        wanted = {entry["Config"]}
        folders = {posixpath.dirname(layer) for layer in entry["Layers"]}
        for name, member in members.items():
            if posixpath.dirname(name) in folders and member.issym():
                folders.add(posixpath.dirname(posixpath.normpath(posixpath.join(posixpath.dirname(name),
                                                                                 member.linkname))))
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(dest, "w:") as out:
            for name, member in members.items():
                if name in wanted or (name.split("/", 1)[0] in folders and name != "manifest.json"):
                    out.addfile(member, tar.extractfile(member) if member.isreg() else None)
            data = json.dumps([entry]).encode()
            info = tarfile.TarInfo("manifest.json")
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))


def export_apptainer(lock: ImagesLock, kinds: list[str], out: Path, say: Say, *,
                     archive: Path | None = None) -> dict[str, ExportedImage]:
    """One SIF per kind, each built from an archive of that image alone: `docker save TAG`, or cut from
    ARCHIVE (a docker-archive holding the locked tags, e.g. a bundle's) where there is no Docker."""
    exe = shutil.which("apptainer") or shutil.which("singularity")
    if exe is None:
        raise RequirementsError("neither apptainer nor singularity is installed: a SIF is built by Apptainer",
                                hint="install Apptainer (https://apptainer.org/docs/admin/main/installation.html), "
                                     "or export for podman and build the SIFs where Apptainer is")
    out.mkdir(parents=True, exist_ok=True)
    result = {}
    for kind in kinds:
        tag = lock.images[kind].tag
        single = out / f"{kind}.docker-archive.tar"
        try:
            if archive is None:
                _save([tag], single)
            else:
                say(f"taking {tag} out of {archive}")
                single_image_archive(archive, tag, single)
            sif = out / f"{kind}.sif"
            say(f"{Path(exe).name} build {sif}")
            _run(apptainer_build_command(exe, sif, single), f"build {sif}")
        finally:
            single.unlink(missing_ok=True)
        result[kind] = _exported("sif", sif, lock.images[kind].id)
    return result


def apptainer_build_command(exe: str, sif: Path, archive: Path) -> list[str]:
    """`apptainer build --force KIND.sif docker-archive:ARCHIVE` (pure), ARCHIVE holding that one image."""
    return [exe, "build", "--force", str(sif), f"docker-archive:{archive}"]


# What ch-convert (0.31) leaves in every directory image, which ch-run binds onto (its mount_points_ensure).
CH_MOUNT_DIRS = ("bin", "dev", "etc", "mnt", "proc", "usr", *(f"mnt/{i}" for i in range(10)))
CH_MOUNT_FILES = ("etc/hosts", "etc/resolv.conf")


def flatten_image(engine: str, tag: str, dest: Path) -> None:
    """TAG's root filesystem, flattened, as a Charliecloud directory image at DEST.

    What `ch-convert -i docker|podman TAG DEST` does, streamed: it writes the export to a tarball, gzips it
    and unpacks it again (its own source: "FIXME: needlessly compresses"), which for the 7.7 GB stage images
    took more than six minutes here against about two for the stream. The steps are ch-convert's: the
    export, /dev left empty, the image's environment in ch/environment (what `ch-run --set-env` reads),
    folders made user-writable (so the image can be removed), and the mount points ch-run binds onto.
    """
    created = subprocess.run([engine, "create", "--read-only", tag, "/bin/true"], capture_output=True, text=True)
    if created.returncode != 0:
        raise CheckFailed(f"{engine} create {tag} failed: {created.stderr.strip()[-300:]}")
    container = created.stdout.strip().splitlines()[-1]
    dest.mkdir(parents=True)
    try:
        export = subprocess.Popen([engine, "export", container], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        untar = subprocess.run(["tar", "-x", "-p", "--no-same-owner", "-C", str(dest), "-f", "-", "--anchored",
                                "--no-wildcards-match-slash", "--exclude=dev/*", "--exclude=./dev/*"],
                               stdin=export.stdout, capture_output=True, text=True)
        assert export.stdout is not None
        export.stdout.close()
        exported = export.wait()
        if exported != 0 or untar.returncode != 0:
            err = (export.stderr.read().decode(errors="replace") if export.stderr else "") + untar.stderr
            raise CheckFailed(f"flattening {tag} into {dest} failed: {err.strip()[-300:]}")
    finally:
        subprocess.run([engine, "rm", "--force", container], capture_output=True)
    env = subprocess.run([engine, "image", "inspect", "--format", "{{range .Config.Env}}{{println .}}{{end}}", tag],
                         capture_output=True, text=True, check=True).stdout
    (dest / "ch").mkdir(exist_ok=True)
    (dest / "ch" / "environment").write_text("".join(line + "\n" for line in env.splitlines() if line))
    for folder, _, _ in os.walk(dest):
        mode = os.lstat(folder).st_mode
        if mode & 0o700 != 0o700:
            os.chmod(folder, stat.S_IMODE(mode) | 0o700)
    for rel in CH_MOUNT_DIRS:
        if not os.path.lexists(dest / rel):
            (dest / rel).mkdir()
    for rel in CH_MOUNT_FILES:
        if not os.path.lexists(dest / rel):
            (dest / rel).touch()


def export_charliecloud(lock: ImagesLock, kinds: list[str], out: Path, say: Say, *, nvidia: bool = False,
                        source: str = "docker") -> dict[str, ExportedImage]:
    """One directory image per kind, flattened from Docker's (or the user's Podman) storage."""
    out.mkdir(parents=True, exist_ok=True)
    env = charliecloud_env()
    result = {}
    for kind in kinds:
        locked = lock.images[kind]
        image = out / kind
        if image.exists():
            shutil.rmtree(image)
        image_is_locked(source, locked.tag, locked.id)
        say(f"{source} export {locked.tag} -> {image}")
        flatten_image(source, locked.tag, image)
        for mount in (JOB_MOUNT, CAMPAIGN_MOUNT, STORE_MOUNT):
            (image / mount.lstrip("/")).mkdir(exist_ok=True)
        if nvidia:
            say(f"ch-fromhost --nvidia {image}")
            _run(["ch-fromhost", "--nvidia", str(image)], f"add the host's NVIDIA libraries to {image}", env=env)
        marker = image / MARKER
        marker.write_text(json.dumps({"source_id": locked.id, "kind": kind, "flavor": lock.flavor,
                                      "tag": locked.tag, "nvidia": nvidia}, indent=2) + "\n", encoding="utf-8")
        say(f"hashing {image}")
        result[kind] = _exported("ch-dir", image, locked.id, tree_digest(image))
    return result


def export_images(lock: ImagesLock, runtime: str, out: Path, *, kinds: list[str] | None = None, say: Say = print,
                  archive: Path | None = None, nvidia: bool = False, source: str = "docker") -> ImagesLock:
    """Write the locked images for RUNTIME under OUT; the lock with their exports recorded."""
    if runtime not in EXPORT_RUNTIMES:
        raise UsageError(f"--runtime {runtime}: images are exported for {', '.join(EXPORT_RUNTIMES)}",
                         hint="docker runs the images it built as they are")
    kinds = kinds or sorted(lock.images)
    missing = [k for k in kinds if k not in lock.images]
    if missing:
        raise UsageError(f"the image lock has no {', '.join(missing)} image", hint="build it: `make appliance`")
    if archive is not None and runtime != "apptainer":
        raise UsageError("--from ARCHIVE builds Apptainer's SIFs from a docker-archive",
                         hint="podman loads an archive itself: `podman load -i ARCHIVE`")
    if runtime == "podman":
        done = export_podman(lock, kinds, out, say)
    elif runtime == "apptainer":
        done = export_apptainer(lock, kinds, out, say, archive=archive)
    else:
        done = export_charliecloud(lock, kinds, out, say, nvidia=nvidia, source=source)
    exports = {**lock.exports, runtime: {**lock.exports.get(runtime, {}), **done}}
    return lock.model_copy(update={"exports": exports})
