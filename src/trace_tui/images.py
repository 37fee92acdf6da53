"""The stage images: build, lock, push and pull (docker SDK).

`make appliance` builds the three images of a flavour and writes the generated
lock ``appliance/images.lock.json`` (not committed: builds are not
bit-reproducible across machines). The lock is what the hardware check, the
runner and bundles compare against.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field

from trace_tui import __version__
from trace_tui.common.digest import sha256_file
from trace_tui.errors import CheckFailed, RequirementsError, UsageError

IMAGE_NAMES: tuple[str, ...] = ("train", "infer", "score")
Flavor = Literal["cpu", "gpu"]
LABEL_PREFIX = "org.trace-tui"


def repo_root() -> Path:
    """The checkout this package runs from (images are built from a checkout)."""
    return Path(__file__).resolve().parents[2]


def images_lock_path(home: Path | None = None) -> Path:
    """The generated image lock: $TRACE_TUI_IMAGES_LOCK; in a checkout, its appliance/images.lock.json
    (where `make appliance` writes it); in an installed trace-tui (an air-gapped site that installed
    from a bundle's wheelhouse), HOME/images.lock.json, where `bundle import` writes it."""
    env = os.environ.get("TRACE_TUI_IMAGES_LOCK")
    if env:
        return Path(env)
    appliance = repo_root() / "appliance"
    if appliance.is_dir():
        return appliance / "images.lock.json"
    from trace_tui.paths import home as trace_home

    return (home or trace_home()) / "images.lock.json"


class LockedImage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    tag: str
    id: str
    repo_digests: list[str] = Field(default_factory=list)
    base_image: str
    base_id: str
    base_digest: str | None = None
    build_args: dict[str, str]
    requirement_locks: dict[str, str]  # lock file name -> sha256
    sources: dict[str, dict[str, str]] = Field(default_factory=dict)  # gpu: trace / vlmevalkit commit+tree


class ImagesLock(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: Literal["trace-tui-images-lock-v1"] = "trace-tui-images-lock-v1"
    flavor: Flavor
    version: str
    images: dict[str, LockedImage]


def read_images_lock(path: Path | None = None) -> ImagesLock | None:
    """The generated lock, or None when images were never built here (a status, not an error)."""
    path = path or images_lock_path()
    if not path.exists():
        return None
    try:
        return ImagesLock.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise UsageError(f"{path}: not a valid image lock ({str(exc).splitlines()[0]})",
                         hint="rebuild it with `make appliance`") from exc


def write_images_lock(lock: ImagesLock, path: Path | None = None) -> Path:
    from trace_tui.common.atomic import atomic_write_bytes

    path = path or images_lock_path()
    atomic_write_bytes(path, (lock.model_dump_json(indent=2) + "\n").encode())
    return path


def load_pins(root: Path | None = None) -> dict[str, Any]:
    return json.loads(((root or repo_root()) / "appliance" / "pins.json").read_text(encoding="utf-8"))


def image_tag(name: str, flavor: str) -> str:
    return f"trace-tui/{name}:{__version__}-{flavor}"


def docker_client() -> Any:
    import docker
    from docker.errors import DockerException

    try:
        client = docker.from_env()
        client.ping()
        return client
    except DockerException as exc:
        raise RequirementsError(f"the Docker daemon is not reachable ({exc.__class__.__name__})",
                                hint="start dockerd, or use --runtime local") from exc


def resolve_base(client: Any, flavor: str, pins: dict[str, Any], say: Callable[[str], None]) -> tuple[str, str, str | None]:
    """(reference to build FROM, base image id, base repo digest or None).

    By digest when pinned; else the tag, pulled if absent; where nothing can be
    pulled and the flavour has a local base, build that with debootstrap.
    """
    from docker.errors import APIError, ImageNotFound

    pin = pins["flavors"][flavor]
    ref = f"{pin['base_image']}@{pin['base_digest']}" if pin.get("base_digest") else pin["base_image"]
    try:
        image = client.images.get(ref)
    except ImageNotFound:
        try:
            say(f"pulling {ref}")
            image = client.images.pull(ref)
        except APIError as exc:
            local = pin.get("local_base")
            if not local:
                raise RequirementsError(f"cannot pull the {flavor} base image {ref} ({exc.explanation})",
                                        hint="connect this machine to a registry, or `docker load` the base") from exc
            say(f"Docker cannot pull {ref} here; building the local base {local} with debootstrap")
            script = repo_root() / "appliance" / "make-base-image.sh"
            subprocess.run([str(script), local], check=True)
            ref = local
            image = client.images.get(local)
    digests = image.attrs.get("RepoDigests") or []
    return ref, image.id, (digests[0].split("@", 1)[1] if digests else None)


def build_wheel(root: Path) -> Path:
    """The project's own wheel in dist/ (installed into every image, --no-deps)."""
    import sys

    dist = root / "dist"
    for old in dist.glob("trace_tui-*.whl"):
        old.unlink()
    # A fixed zip timestamp makes the wheel a function of the sources alone, so an
    # unchanged tree rebuilds to the same layer (and the same image ids) from cache.
    env = {**os.environ, "SOURCE_DATE_EPOCH": "315532800"}
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           "-w", str(dist), str(root)], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise CheckFailed(f"building the trace-tui wheel failed: {tail}")
    return next(dist.glob("trace_tui-*.whl"))


def build_images(flavor: Flavor, *, names: tuple[str, ...] = IMAGE_NAMES, root: Path | None = None,
                 client: Any = None, say: Callable[[str], None] = print) -> ImagesLock:
    from trace_tui.release import release_lock

    root = root or repo_root()
    client = client or docker_client()
    pins = load_pins(root)
    house = root / "appliance" / "wheelhouse" / flavor
    if not house.is_dir() or not any(house.iterdir()):
        raise RequirementsError(f"no wheelhouse for the {flavor} flavour at {house}",
                                hint=f"run `python appliance/lock.py wheelhouse {flavor}` (or `make appliance`)")
    base_ref, base_id, base_digest = resolve_base(client, flavor, pins, say)
    build_wheel(root)
    rel = release_lock()
    locks_dir = root / "appliance" / "requirements"
    images: dict[str, LockedImage] = {}
    for name in names:
        lock_files = [locks_dir / f"common-{flavor}.lock.txt", locks_dir / f"{name}-{flavor}.lock.txt"]
        for f in lock_files:
            if not f.exists():
                raise RequirementsError(f"{f} is missing", hint=f"run `make lock FLAVOR={flavor}` on a connected machine")
        lock_sha = {f.name: sha256_file(f) for f in lock_files}
        args = {
            "BASE_IMAGE": base_ref, "FLAVOR": flavor, "VERSION": __version__,
            "LOCK_SHA256": hashlib.sha256(json.dumps(lock_sha, sort_keys=True).encode()).hexdigest(),
            "TRACE_REPOSITORY": f"https://github.com/{rel.upstream.repository}.git",
            "TRACE_COMMIT": rel.upstream.commit,
            "VLMEVALKIT_REPOSITORY": f"https://github.com/{rel.vlmevalkit.repository}.git",
            "VLMEVALKIT_COMMIT": rel.vlmevalkit.commit,
        }
        tag = image_tag(name, flavor)
        say(f"building {tag}")
        image = _build_one(client, root, name, tag, args, say)
        images[name] = LockedImage(
            name=name, tag=tag, id=image.id, repo_digests=image.attrs.get("RepoDigests") or [],
            base_image=base_ref, base_id=base_id, base_digest=base_digest, build_args=args,
            requirement_locks=lock_sha, sources=_image_sources(client, image.id, flavor, name))
        say(f"built {tag} {image.id[:19]}")
    return ImagesLock(flavor=flavor, version=__version__, images=images)


def _build_one(client: Any, root: Path, name: str, tag: str, args: dict[str, str], say: Callable[[str], None]) -> Any:
    from docker.errors import BuildError

    try:
        image, logs = client.images.build(path=str(root), dockerfile=f"containers/{name}/Dockerfile", tag=tag,
                                          buildargs=args, rm=True, forcerm=True)
    except BuildError as exc:
        tail = [str(c.get("stream", c.get("error", ""))).rstrip() for c in exc.build_log][-8:]
        raise CheckFailed(f"building {tag} failed: {exc.msg}; last lines: " + " | ".join(t for t in tail if t)) from exc
    return image


def _image_sources(client: Any, image_id: str, flavor: str, name: str) -> dict[str, dict[str, str]]:
    """GPU infer/score images record the evaluator's commits and tree hashes inside the image."""
    if flavor != "gpu" or name == "train":
        return {}
    out = client.containers.run(image_id, ["cat", "/opt/trace/.sources.json"], remove=True, network_mode="none")
    return json.loads(out)


def image_status(client: Any, lock: ImagesLock | None) -> dict[str, str]:
    """Per image: 'ok', 'different' (tag points elsewhere), 'missing', or 'not built' (no lock)."""
    from docker.errors import ImageNotFound

    if lock is None:
        return {n: "not built" for n in IMAGE_NAMES}
    status = {}
    for name in IMAGE_NAMES:
        locked = lock.images.get(name)
        if locked is None:
            status[name] = "not built"
            continue
        try:
            status[name] = "ok" if client.images.get(locked.id).id == locked.id else "different"
        except ImageNotFound:
            try:
                client.images.get(locked.tag)
                status[name] = "different"
            except ImageNotFound:
                status[name] = "missing"
    return status


def push_images(lock: ImagesLock, registry: str, *, client: Any = None, say: Callable[[str], None] = print) -> ImagesLock:
    """Push the locked images to REGISTRY (host:port/ns) and record their repo digests."""
    client = client or docker_client()
    registry = registry.rstrip("/")
    updated = {}
    for name, img in lock.images.items():
        repo = f"{registry}/trace-tui-{name}"
        tag = f"{lock.version}-{lock.flavor}"
        client.images.get(img.id).tag(repo, tag)
        say(f"pushing {repo}:{tag}")
        for line in client.images.push(repo, tag, stream=True, decode=True):
            if "error" in line:
                raise CheckFailed(f"push of {repo}:{tag} failed: {line['error']}")
        digests = client.images.get(img.id).attrs.get("RepoDigests") or []
        mine = [d for d in digests if d.startswith(repo + "@")]
        if not mine:
            raise CheckFailed(f"push of {repo}:{tag} left no repo digest")
        updated[name] = img.model_copy(update={"repo_digests": sorted(set(img.repo_digests) | set(mine))})
    return lock.model_copy(update={"images": updated})


def pull_images(lock: ImagesLock, registry: str, *, client: Any = None, say: Callable[[str], None] = print) -> None:
    """Pull each locked image BY DIGEST from REGISTRY, check its id against the lock, tag it locally."""
    client = client or docker_client()
    registry = registry.rstrip("/")
    for name, img in lock.images.items():
        repo = f"{registry}/trace-tui-{name}"
        digest = next((d.split("@", 1)[1] for d in img.repo_digests if d.startswith(repo + "@")), None)
        if digest is None:
            raise UsageError(f"the image lock has no digest for {name} in {registry}",
                             hint=f"run `make push REGISTRY={registry}` where the images were built")
        say(f"pulling {repo}@{digest}")
        pulled = client.images.pull(f"{repo}@{digest}")
        if pulled.id != img.id:
            raise CheckFailed(f"{repo}@{digest} has id {pulled.id}, the lock says {img.id}")
        pulled.tag(*img.tag.split(":", 1))
