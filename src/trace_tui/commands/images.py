"""`trace-tui images build|status|push|pull|pin`: the pinned stage images."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from trace_tui import images
from trace_tui.clients import docker_client
from trace_tui.common.atomic import atomic_write_bytes
from trace_tui.errors import UsageError
from trace_tui.runtime.exports import EXPORT_RUNTIMES, export_images
from trace_tui.paths import home as trace_home


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="images_command", metavar="ACTION", required=True)
    b = sub.add_parser("build", help="build the stage images of a flavour and write appliance/images.lock.json")
    b.add_argument("--flavor", choices=("cpu", "gpu", "auto"), default="auto",
                   help="gpu when an NVIDIA runtime is present (auto), else cpu")
    b.add_argument("--only", nargs="+", choices=("train", "infer", "score"), help="build only these images")
    b.add_argument("--evaluator-source", metavar="DIR",
                   help="gpu: the release evaluator from this local bundle (trace-rlvr-*.tar.gz and "
                        "vlmevalkit-*.git.tar.gz) or checkout, verified against the release lock; "
                        "default: fetched from GitHub at the pinned commits")
    s = sub.add_parser("status", help="each stage image against the lock")
    s.add_argument("--json", action="store_true")
    pu = sub.add_parser("push", help="push the locked images to a site registry and record their digests")
    pu.add_argument("--registry", required=True, metavar="HOST:PORT/NS")
    pl = sub.add_parser("pull", help="pull the locked images from a site registry by digest and check them")
    pl.add_argument("--registry", required=True, metavar="HOST:PORT/NS")
    sub.add_parser("pin", help="write the base image digests the last build resolved into appliance/pins.json")
    ex = sub.add_parser("export", help="write the locked images where another runtime reads them, recorded in the lock")
    ex.add_argument("--runtime", required=True, choices=EXPORT_RUNTIMES, metavar="NAME",
                    help="podman: a docker-archive to `podman load`; apptainer: one SIF per stage; "
                         "charliecloud: one directory image per stage")
    ex.add_argument("--out", metavar="DIR", help="where to write them (default: HOME/images/RUNTIME)")
    ex.add_argument("--only", nargs="+", choices=("train", "infer", "score"), metavar="KIND",
                    help="export only these images: train, infer, score")
    ex.add_argument("--from", dest="archive", metavar="ARCHIVE",
                    help="apptainer: build the SIFs from this docker-archive (a bundle's images/stages.tar) "
                         "instead of Docker's storage")
    ex.add_argument("--source", choices=("docker", "podman"), default="docker",
                    help="charliecloud: convert from Docker's storage or the user's Podman storage")
    ex.add_argument("--nvidia", action="store_true",
                    help="charliecloud: add this GPU node's NVIDIA libraries to each image (ch-fromhost --nvidia)")


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    action = args.images_command
    if action == "build":
        flavor = args.flavor
        if flavor == "auto":
            client = docker_client()
            runtimes = client.info().get("Runtimes") or {}
            flavor = "gpu" if "nvidia" in runtimes else "cpu"
            _say(f"flavour: {flavor} ({'NVIDIA runtime present' if flavor == 'gpu' else 'no NVIDIA runtime'})")
        names = tuple(args.only) if args.only else images.IMAGE_NAMES
        source = Path(args.evaluator_source) if args.evaluator_source else None
        lock = images.build_images(flavor, names=names, say=_say, evaluator_source=source)
        previous = images.read_images_lock()
        if previous is not None and previous.flavor == flavor and args.only:
            lock = lock.model_copy(update={"images": {**previous.images, **lock.images}})
        path = images.write_images_lock(lock)
        _say(f"wrote {path}")
        return 0
    lock = images.read_images_lock()
    if action == "status":
        status = images.image_status(docker_client(), lock)
        if args.json:
            print(json.dumps({"lock": str(images.images_lock_path()), "built": lock is not None, "images": status}, indent=2))
        else:
            if lock is None:
                print("images: not built (run `make appliance`)")
            for name, state in status.items():
                print(f"{name:6} {state}")
        return 0 if all(v == "ok" for v in status.values()) else 1
    if lock is None:
        raise UsageError(f"no image lock at {images.images_lock_path()}", hint="run `make appliance` first")
    if action == "push":
        lock = images.push_images(lock, args.registry, say=_say)
        images.write_images_lock(lock)
        _say(f"recorded repo digests in {images.images_lock_path()}")
        return 0
    if action == "pull":
        images.pull_images(lock, args.registry, say=_say)
        _say("all images pulled by digest; ids match the lock")
        return 0
    if action == "pin":
        return _pin(images, lock)
    if action == "export":
        out = Path(args.out) if args.out else trace_home() / "images" / args.runtime
        archive = Path(args.archive) if args.archive else None
        if archive is not None and not archive.is_file():
            raise UsageError(f"--from {archive}: no such archive", hint="name a bundle's images/stages.tar")
        lock = export_images(lock, args.runtime, out.absolute(), kinds=list(args.only or []) or None, say=_say,
                             archive=archive, nvidia=args.nvidia, source=args.source)
        path = images.write_images_lock(lock)
        for kind, exported in sorted(lock.exports[args.runtime].items()):
            print(f"{kind:6} {exported.format:14} {exported.sha256[:30]}  {exported.path}")
        _say(f"recorded in {path}")
        return 0
    raise UsageError(f"unknown images action {action!r}")


def _pin(images, lock) -> int:  # type: ignore[no-untyped-def]

    pins = images.load_pins()
    flavor = pins["flavors"][lock.flavor]
    digest = next((i.base_digest for i in lock.images.values() if i.base_digest), None)
    if digest is None:
        _say(f"the {lock.flavor} base was built locally (no registry digest); nothing to pin")
        return 0
    flavor["base_digest"] = digest
    path = images.repo_root() / "appliance" / "pins.json"
    atomic_write_bytes(path, (json.dumps(pins, indent=2) + "\n").encode())
    _say(f"pinned {flavor['base_image']}@{digest} in {path}")
    return 0
