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
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Iterator, Literal

from pydantic import BaseModel, ConfigDict, Field

from trace_tui import __version__
from trace_tui.clients import docker_client
from trace_tui.common.atomic import atomic_write_bytes
from trace_tui.common.digest import sha256_file
from trace_tui.errors import CheckFailed, RequirementsError, UsageError
from trace_tui.evaluator.source import stage_evaluator
from trace_tui.paths import home as trace_home
from trace_tui.release import ReleaseLock, release_lock

if TYPE_CHECKING:  # pragma: no cover
    from tarfile import TarInfo

    from docker import DockerClient
    from docker.models.containers import Container
    from docker.models.images import Image

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


ExportFormat = Literal["docker-archive", "sif", "ch-dir", "squashfs"]


class ExportedImage(BaseModel):
    """A locked image written where another runtime reads it (`trace-tui images export`)."""

    model_config = ConfigDict(extra="forbid")
    format: ExportFormat
    path: str  # absolute, on the host that exported (or imported) it
    sha256: str  # the file's; a ch-dir's is the sha256set of its files, links and modes (runtime.exports.tree_digest)
    source_id: str  # the Docker image id it was written from: the lock's id for its kind
    bytes: int = 0


class ImagesLock(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: Literal["trace-tui-images-lock-v1"] = "trace-tui-images-lock-v1"
    flavor: Flavor
    version: str
    images: dict[str, LockedImage]
    # runtime (podman, apptainer, charliecloud) -> image kind -> where that runtime reads it
    exports: dict[str, dict[str, ExportedImage]] = Field(default_factory=dict)


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
    path = path or images_lock_path()
    atomic_write_bytes(path, (lock.model_dump_json(indent=2) + "\n").encode())
    return path


def load_pins(root: Path | None = None) -> dict[str, Any]:
    return json.loads(((root or repo_root()) / "appliance" / "pins.json").read_text(encoding="utf-8"))


def image_tag(name: str, flavor: str) -> str:
    return f"trace-tui/{name}:{__version__}-{flavor}"


# Saving or loading the images of a bundle (the cpu vLLM images are 7.3 GB) keeps the daemon silent for
# longer than docker-py's default read timeout of 60 s before the first bytes of the archive.
BULK_TIMEOUT_S = 3600


def image_pin(pins: dict[str, Any], flavor: str, name: str) -> dict[str, Any]:
    """The base pin of one image: the cpu flavour's infer and score images run its vLLM stack (vLLM 0.10.2's
    CPU build, which needs Debian trixie's libstdc++) on a base of their own; every other image its flavour's."""
    pin = pins["flavors"][flavor]
    stack = pin.get("vllm")
    return stack if stack and name in stack["images"] else pin


def image_stack(pins: dict[str, Any], flavor: str, name: str) -> tuple[str, str]:
    """(the lock of the layer the image shares with the others of its base, its wheelhouse folder)."""
    if image_pin(pins, flavor, name) is not pins["flavors"][flavor]:
        return f"vllm-{flavor}", f"{flavor}-vllm"
    return f"common-{flavor}", flavor


def resolve_base(client: DockerClient, flavor: str, pin: dict[str, Any],
                 say: Callable[[str], None]) -> tuple[str, str, str | None]:
    """(reference to build FROM, base image id, base repo digest or None) for one image's base PIN.

    By digest when pinned; else the tag, pulled if absent; where nothing can be
    pulled and the pin has a local base, build that with debootstrap.
    """
    from docker.errors import APIError, ImageNotFound

    ref = f"{pin['base_image']}@{pin['base_digest']}" if pin.get("base_digest") else pin["base_image"]
    local = pin.get("local_base")
    try:
        image = client.images.get(ref)
        if ref == local and pin.get("local_base_packages"):  # made here earlier: has it every package pinned now?
            image = _make_local_base(client, local, pin["local_base_packages"], say)
    except ImageNotFound:
        try:
            if ref == local:  # a base made only with debootstrap (the gpu flavour's, everywhere)
                raise APIError(f"{ref} is built locally, never pulled")
            say(f"pulling {ref}")
            image = client.images.pull(ref)
        except APIError as exc:
            if not local:
                raise RequirementsError(f"cannot pull the {flavor} base image {ref} ({exc.explanation})",
                                        hint="connect this machine to a registry, or `docker load` the base") from exc
            say(f"building the local base {local} with debootstrap ({ref} cannot be pulled here)")
            ref = local
            image = _make_local_base(client, local, pin.get("local_base_packages", []), say)
    digests = image.attrs.get("RepoDigests") or []
    return ref, image.id, (digests[0].split("@", 1)[1] if digests else None)


def _make_local_base(client: DockerClient, local: str, packages: list[str], say: Callable[[str], None]) -> Image:
    """appliance/make-base-image.sh for LOCAL with PACKAGES: builds it with debootstrap when it is absent or
    lacks one of them, else leaves it; what it did is said, except that it found the base complete."""
    script = repo_root() / "appliance" / "make-base-image.sh"
    made = subprocess.run([str(script), local, ",".join(packages)], check=True, stdout=subprocess.PIPE, text=True)
    for line in made.stdout.splitlines():
        if line != f"base image {local} present":
            say(line)
    return client.images.get(local)


def build_wheel(root: Path, dist: Path | None = None) -> Path:
    """The project's own wheel in DIST (default the checkout's dist/: installed into every image, --no-deps;
    a bundle's wheelhouse also takes it from here)."""
    import sys

    dist = dist or root / "dist"
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
                 client: DockerClient | None = None, say: Callable[[str], None] = print,
                 evaluator_source: Path | None = None) -> ImagesLock:
    """Build NAMES of FLAVOR. The gpu infer/score images take the release evaluator from
    EVALUATOR_SOURCE (a local bundle or checkout), or from the network at the pinned commits when None;
    either is verified against the release lock before and during the build."""
    import tempfile

    root = root or repo_root()
    client = client or docker_client()
    pins = load_pins(root)
    for name in names:
        house = root / "appliance" / "wheelhouse" / image_stack(pins, flavor, name)[1]
        if not house.is_dir() or not any(house.iterdir()):
            raise RequirementsError(f"no wheelhouse for the {flavor} {name} image at {house}",
                                    hint=f"run `python appliance/lock.py wheelhouse {flavor}` (or `make appliance`)")
    bases: dict[str, tuple[str, str, str | None]] = {}
    for name in names:
        pin = image_pin(pins, flavor, name)
        if pin["base_image"] not in bases:
            bases[pin["base_image"]] = resolve_base(client, flavor, pin, say)
    build_wheel(root)
    rel = release_lock()
    locks_dir = root / "appliance" / "requirements"
    images: dict[str, LockedImage] = {}
    staging = Path(tempfile.mkdtemp(prefix="trace-tui-evaluator-"))
    try:
        sources = {}
        if flavor == "gpu" and set(names) & set(EVALUATOR_IMAGES):
            say(f"evaluator from {evaluator_source or 'the network (pinned commits)'}")
            sources = stage_evaluator(evaluator_source, rel, staging)
            say("evaluator verified: rlvr tree {trace[tree]}, VLMEvalKit {vlmevalkit[commit]} tree {vlmevalkit[tree]}"
                .format(**sources))
        server_image = next(iter(bases.values()))[0]
        with serving_wheelhouses(client, root / "appliance" / "wheelhouse", server_image) as network:
            for name in names:
                images[name] = _build_image(client, root, name, flavor, locks_dir, rel, staging,
                                            bases[image_pin(pins, flavor, name)["base_image"]],
                                            image_stack(pins, flavor, name), network, say)
    finally:
        import shutil

        shutil.rmtree(staging, ignore_errors=True)
    return ImagesLock(flavor=flavor, version=__version__, images=images)


# The images that carry the release evaluator (gpu flavour).
EVALUATOR_IMAGES = ("infer", "score")


def _build_image(client: DockerClient, root: Path, name: str, flavor: str, locks_dir: Path, rel: ReleaseLock,
                 staging: Path,
                 base: tuple[str, str, str | None], stack: tuple[str, str], network: str,
                 say: Callable[[str], None]) -> LockedImage:
    base_ref, base_id, base_digest = base
    common_lock, house = stack
    lock_files = [locks_dir / f"{common_lock}.lock.txt", locks_dir / f"{name}-{flavor}.lock.txt"]
    if flavor == "gpu" and name in EVALUATOR_IMAGES:
        lock_files.append(locks_dir / f"eval-deps-{flavor}.lock.txt")
    for f in lock_files:
        if not f.exists():
            raise RequirementsError(f"{f} is missing", hint=f"run `make lock FLAVOR={flavor}` on a connected machine")
    lock_sha = {f.name: sha256_file(f) for f in lock_files}
    args = {
        "BASE_IMAGE": base_ref, "FLAVOR": flavor, "COMMON_LOCK": common_lock, "WHEELHOUSE": house,
        "VERSION": __version__,
        "LOCK_SHA256": hashlib.sha256(json.dumps(lock_sha, sort_keys=True).encode()).hexdigest(),
        "TRACE_REPOSITORY": f"https://github.com/{rel.upstream.repository}.git",
        "TRACE_COMMIT": rel.upstream.commit,
        "VLMEVALKIT_REPOSITORY": f"https://github.com/{rel.vlmevalkit.repository}.git",
        "VLMEVALKIT_COMMIT": rel.vlmevalkit.commit,
        "VLMEVALKIT_TREE": rel.vlmevalkit.tree,
        "RLVR_TREE": rel.upstream.rlvr_tree,
    }
    tag = image_tag(name, flavor)
    say(f"building {tag}")
    image = _build_one(client, root, name, flavor, staging, tag, args, network)
    say(f"built {tag} {image.id[:19]}")
    return LockedImage(
        name=name, tag=tag, id=image.id, repo_digests=image.attrs.get("RepoDigests") or [],
        base_image=base_ref, base_id=base_id, base_digest=base_digest, build_args=args,
        requirement_locks=lock_sha, sources=_image_sources(client, image.id, flavor, name))


# The name the Dockerfiles' pip reaches the wheelhouse by (--find-links http://wheelhouse:8000/FOLDER/).
WHEELHOUSE_HOST = "wheelhouse"
WHEELHOUSE_PORT = 8000


def _plain(info: TarInfo) -> TarInfo:
    """A tar member without its owner: the same sources give the same context."""
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


@contextmanager
def serving_wheelhouses(client: DockerClient, folder: Path, image: str) -> Iterator[str]:
    """The wheelhouses under FOLDER (appliance/wheelhouse), served read-only over HTTP by a container of
    IMAGE (any base with python3) as http://wheelhouse:8000/, on an internal network of their own that
    has no route out; yields the network's name, which the builds' RUN steps join (network_mode).

    The classic builder has no build mounts: wheels copied into a build stage stay on disk in that
    stage's layer (3.4 GB for the cpu vLLM stack), and an environment installed in a build stage is a
    second copy once the final image copies it out. Served, the wheels are read in place and each
    environment is installed once, in the final image's own layer. pip checks every wheel against the
    lock's hashes, so the server is trusted for nothing but availability."""
    from docker.errors import APIError, NotFound

    name = f"trace-tui-build-{uuid.uuid4().hex[:12]}"
    network = client.networks.create(name, driver="bridge", internal=True,
                                     labels={f"{LABEL_PREFIX}.build-network": "1"})
    server = None
    try:
        server = client.containers.create(
            image, ["python3", "-u", "-m", "http.server", str(WHEELHOUSE_PORT), "--directory", "/wheelhouse"],
            name=f"{name}-wheelhouse", network=name, user="65534:65534", read_only=True,
            volumes={str(folder.resolve()): {"bind": "/wheelhouse", "mode": "ro"}},
            labels={f"{LABEL_PREFIX}.build-network": name})
        network.disconnect(server)
        network.connect(server, aliases=[WHEELHOUSE_HOST])
        try:
            server.start()
        except APIError as exc:
            raise CheckFailed(f"the wheelhouse server for the image build did not start from {image}: "
                              f"{exc.explanation or exc}") from exc
        _wait_serving(server)
        yield name
    finally:
        if server is not None:
            try:
                server.remove(force=True)
            except (APIError, NotFound):
                pass
        network.remove()


def _wait_serving(server: Container, timeout_s: float = 60.0) -> None:
    """Until the wheelhouse server says it listens (http.server prints 'Serving HTTP on')."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if b"Serving HTTP" in server.logs():
            return
        server.reload()
        if server.status == "exited":
            break
        time.sleep(0.2)
    tail = server.logs().decode(errors="replace").strip().splitlines()[-3:]
    raise CheckFailed("the wheelhouse server for the image build did not start: " + (" | ".join(tail) or "no output"))


def write_context(root: Path, name: str, flavor: str, evaluator: Path, out: IO[bytes]) -> None:
    """The build context of one image as a tar: its Dockerfile, its flavour's locks, the project wheel and
    (gpu infer/score) the verified evaluator sources; nothing else of the checkout (its wheels are served
    to the build: serving_wheelhouses)."""
    import tarfile

    with tarfile.open(fileobj=out, mode="w") as tar:
        tar.add(root / "containers" / name / "Dockerfile", arcname=f"containers/{name}/Dockerfile", filter=_plain)
        for f in sorted((root / "appliance" / "requirements").glob(f"*-{flavor}.lock.txt")):
            tar.add(f, arcname=f"appliance/requirements/{f.name}", filter=_plain)
        for f in sorted((root / "dist").glob("trace_tui-*.whl")):
            tar.add(f, arcname=f"dist/{f.name}", filter=_plain)
        if flavor == "gpu" and name in EVALUATOR_IMAGES:
            tar.add(evaluator, arcname="evaluator", filter=_plain)
        else:
            info = tarfile.TarInfo("evaluator")
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)


def _build_one(client: DockerClient, root: Path, name: str, flavor: str, evaluator: Path, tag: str,
               args: dict[str, str], network: str) -> Image:
    import tempfile

    from docker.errors import BuildError

    with tempfile.TemporaryFile() as context:
        write_context(root, name, flavor, evaluator, context)
        context.seek(0)
        try:
            # An hour: the gpu environment's pip steps and the evaluator check can be silent for minutes.
            image, _logs = client.images.build(fileobj=context, custom_context=True,
                                               dockerfile=f"containers/{name}/Dockerfile", tag=tag, buildargs=args,
                                               rm=True, forcerm=True, timeout=3600, network_mode=network)
        except BuildError as exc:
            tail = [str(c.get("stream", c.get("error", ""))).rstrip() for c in exc.build_log][-8:]
            raise CheckFailed(f"building {tag} failed: {exc.msg}; last lines: " + " | ".join(t for t in tail if t)) from exc
    return image


def _image_sources(client: DockerClient, image_id: str, flavor: str, name: str) -> dict[str, dict[str, str]]:
    """GPU infer/score images record the evaluator's commits and tree hashes inside the image."""
    if flavor != "gpu" or name == "train":
        return {}
    out = client.containers.run(image_id, ["cat", "/opt/trace/.sources.json"], remove=True, network_mode="none")
    return json.loads(out)


def image_status(client: DockerClient, lock: ImagesLock | None) -> dict[str, str]:
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


def push_images(lock: ImagesLock, registry: str, *, client: DockerClient | None = None,
                say: Callable[[str], None] = print) -> ImagesLock:
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


def pull_images(lock: ImagesLock, registry: str, *, client: DockerClient | None = None,
                say: Callable[[str], None] = print) -> None:
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
        repository, _, tag = img.tag.rpartition(":")  # the last colon: a registry's port has one too
        pulled.tag(repository, tag)
