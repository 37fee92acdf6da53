"""A bundle for a cluster without Docker: the stage images where Podman, Apptainer or Charliecloud read them
(the bundle package moves files and checks signatures; which runtime reads what is decided here).

Export (``--with-charliecloud``): beside `images/stages.tar` (which Podman loads and Apptainer builds SIFs from
as it is), each stage's Charliecloud directory image, as `images/charliecloud/KIND.tar`, a plain tar of the
directory `images export --runtime charliecloud` wrote and recorded (its tree digest is checked first, so
the bundle carries exactly what the lock records). The bundle's image lock keeps that record.

Import (``--runtime podman|apptainer|charliecloud``), after the same checks of the whole bundle (its
signature first), with no Docker anywhere:

- podman: `podman load -i images/stages.tar`, then each locked id must be in Podman's storage;
- apptainer: one SIF per stage, `apptainer build KIND.sif docker-archive:images/stages.tar:TAG`;
- charliecloud: `ch-convert -i tar images/charliecloud/KIND.tar DIR` per stage, whose tree digest must be
  the one the bundle's lock records, and whose marker must name the locked image id.

The site's image lock gets the exports this import made (its own paths), never the exporter's.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from trace_tui.bundle.files import CHARLIECLOUD_DIR, Say
from trace_tui.errors import CheckFailed, RequirementsError, UsageError
from trace_tui.images import ExportedImage, ImagesLock
from trace_tui.runtime.charliecloud import charliecloud_env, image_marker
from trace_tui.runtime.exports import export_apptainer, image_is_locked, tree_digest

IMPORT_RUNTIMES = ("docker", "podman", "apptainer", "charliecloud")


def charliecloud_tars(lock: ImagesLock) -> dict[str, Path]:
    """KIND -> the directory image to carry, each checked against the lock's record of it."""
    exported = lock.exports.get("charliecloud") or {}
    missing = sorted(set(lock.images) - set(exported))
    if missing:
        raise UsageError(f"the image lock records no Charliecloud image for {', '.join(missing)}",
                         hint="write them first: `trace-tui images export --runtime charliecloud`")
    out = {}
    for kind, record in sorted(exported.items()):
        folder = Path(record.path)
        if record.source_id != lock.images[kind].id:
            raise UsageError(f"{folder} was exported from {record.source_id[:19]}, the lock's {kind} image is "
                             f"{lock.images[kind].id[:19]}", hint="export it again: `trace-tui images export "
                                                                   "--runtime charliecloud`")
        if not folder.is_dir() or tree_digest(folder) != record.sha256:
            raise UsageError(f"{folder} is not the {kind} image the lock records (missing or changed)",
                             hint="export it again: `trace-tui images export --runtime charliecloud`")
        out[kind] = folder
    return out


def _podman_load(archive: Path, lock: ImagesLock, say: Say) -> None:
    say(f"podman load -i {archive}")
    if shutil.which("podman") is None:
        raise RequirementsError("podman is not installed", hint="install Podman (Debian: `apt install podman uidmap`)")
    done = subprocess.run(["podman", "load", "-i", str(archive)], capture_output=True, text=True)
    if done.returncode != 0:
        raise CheckFailed(f"podman load of {archive} failed: {done.stderr.strip()[-300:]}")
    for img in lock.images.values():
        image_is_locked("podman", img.id, img.id)


def _charliecloud_unpack(src: Path, lock: ImagesLock, out: Path, say: Say) -> dict[str, ExportedImage]:
    recorded = lock.exports.get("charliecloud") or {}
    made = {}
    env = charliecloud_env()
    for kind, img in sorted(lock.images.items()):
        tar = src / CHARLIECLOUD_DIR / f"{kind}.tar"
        if kind not in recorded or not tar.is_file():
            raise CheckFailed(f"the bundle carries no Charliecloud image for {kind} ({tar})",
                              hint="export the bundle with `--with-charliecloud` where the images were exported "
                                   "for Charliecloud")
        folder = out / kind
        if folder.exists():
            shutil.rmtree(folder)
        say(f"ch-convert -i tar {tar} {folder}")
        try:
            done = subprocess.run(["ch-convert", "-i", "tar", str(tar), str(folder)], capture_output=True,
                                  text=True, env=env)
        except FileNotFoundError:
            raise RequirementsError("ch-convert is not installed",
                                    hint="install Charliecloud (Debian: `apt install charliecloud-builders`)") from None
        if done.returncode != 0:
            raise CheckFailed(f"ch-convert of {tar} failed: {(done.stderr or done.stdout).strip()[-300:]}")
        digest = tree_digest(folder)
        if digest != recorded[kind].sha256:
            raise CheckFailed(f"{folder}, unpacked from {tar}, is not the image the bundle's lock records "
                              f"({digest[:30]} against {recorded[kind].sha256[:30]})")
        if (image_marker(folder) or {}).get("source_id") != img.id:
            raise CheckFailed(f"{folder} does not name the locked {kind} image {img.id[:19]} in its marker")
        made[kind] = recorded[kind].model_copy(update={"path": str(folder.resolve())})
    return made


def import_images_for(runtime: str, src: Path, lock: ImagesLock, out: Path, say: Say) -> ImagesLock:
    """The bundle's images where RUNTIME reads them (podman, apptainer, charliecloud); the site's lock."""
    archive = src / "images" / "stages.tar"
    exports: dict[str, dict[str, ExportedImage]] = {}
    made_dir = not out.exists()
    try:
        if runtime == "podman":
            _podman_load(archive, lock, say)
        elif runtime == "apptainer":
            exports["apptainer"] = export_apptainer(lock, sorted(lock.images), out, say, archive=archive)
        elif runtime == "charliecloud":
            out.mkdir(parents=True, exist_ok=True)
            exports["charliecloud"] = _charliecloud_unpack(src, lock, out, say)
        else:
            raise UsageError(f"--runtime {runtime}: choose {', '.join(IMPORT_RUNTIMES)}")
    except BaseException:
        if made_dir:
            shutil.rmtree(out, ignore_errors=True)
        raise
    return lock.model_copy(update={"exports": exports})
