"""`trace-tui bundle export DIR --recipe NAME` and `trace-tui bundle import DIR`: the air-gapped path."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trace_tui import bundle, images
from trace_tui.clients import docker_client
from trace_tui.commands.arguments import add_recipe_selection, non_empty
from trace_tui.engine.planner import needs_gpus
from trace_tui.errors import UsageError
from trace_tui.paths import home, store_dir
from trace_tui.recipe.catalog import known_recipes, resolve_recipe
from trace_tui.release import release_lock
from trace_tui.service.bundle_images import IMPORT_RUNTIMES, charliecloud_tars, import_images_for
from trace_tui.signing import keys
from trace_tui.store import Store
from trace_tui.store.trust import trust_reason


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="bundle_command", metavar="ACTION", required=True)
    e = sub.add_parser("export", help="write everything a recipe needs to run offline into DIR")
    e.add_argument("dir", metavar="DIR")
    e.add_argument("--recipe", required=True, metavar="NAME")
    e.add_argument("--no-wheelhouse", action="store_true", help="leave out trace-tui's own wheelhouse")
    e.add_argument("--key", metavar="FILE", type=non_empty,
                   help="sign with this private key (default: HOME/keys/signing-key.pem, made by `keys init`)")
    e.add_argument("--with-charliecloud", action="store_true",
                   help="also carry the Charliecloud directory images `images export --runtime charliecloud` wrote, "
                        "for a site without Docker or Podman")
    add_recipe_selection(e)
    i = sub.add_parser("import", help="check a bundle's signature and files, load its images and fill the store")
    i.add_argument("dir", metavar="DIR")
    i.add_argument("--trust-key", metavar="FILE", type=non_empty, action="append", default=[],
                   help="also trust this public key for this import (besides HOME/trusted-keys and this home's own)")
    i.add_argument("--runtime", choices=IMPORT_RUNTIMES, default="docker", metavar="NAME",
                   help="where the images go: Docker's storage (docker, the default), Podman's (podman load), "
                        "Apptainer SIFs (apptainer) "
                        "or Charliecloud directory images (charliecloud): no Docker needed for the last three")
    i.add_argument("--images-dir", metavar="DIR", type=non_empty,
                   help="apptainer, charliecloud: where the images are written (default HOME/images/RUNTIME)")
    for sp in (e, i):
        sp.add_argument("--home", metavar="DIR", type=non_empty, help="trace-tui home (default $TRACE_TUI_HOME)")


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:

    root = home(args.home)
    store = Store(store_dir(root))
    if args.bundle_command == "export":
        dest = Path(args.dir)
        if dest.exists() and not dest.is_dir():
            raise UsageError(f"bundle export {dest}: is a file, not a directory",
                             hint="name a new or empty directory for the bundle")
        # before anything is written: a site accepts a bundle's images only under a signature it trusts
        signer = keys.load_signer(root, Path(args.key) if args.key else None)

        resolved = resolve_recipe(args.recipe, models=args.models, seeds=args.seeds, benchmarks=args.benchmarks)
        lock = images.read_images_lock()
        if lock is None:
            raise UsageError(f"no image lock at {images.images_lock_path()}", hint="run `make appliance` first")
        client = docker_client(timeout=images.BULK_TIMEOUT_S)
        status = images.image_status(client, lock)
        broken = {n: s for n, s in status.items() if s != "ok"}
        if broken:
            raise UsageError(f"images not as locked: {broken}", hint="rebuild with `make appliance`")
        on_gpus = sorted({s.image for s in resolved.recipe.steps if needs_gpus(s)})
        if on_gpus and lock.flavor == "cpu":  # the site's run would refuse them: say it here, before the export
            raise UsageError(f"the image lock {images.images_lock_path()} is the cpu flavour, and recipe "
                             f"{resolved.recipe.name} runs {', '.join(on_gpus)} on GPUs, which need the gpu build",
                             hint="build it first: `make appliance FLAVOR=gpu` (Docker needs no GPU to build it)")
        carried, made_there = bundle.entries_to_carry(resolved)
        if made_there:
            _say(f"not carried: {', '.join(made_there)} (made by the recipe's own steps when it runs at the site)")
        bundle.export_bundle(Path(args.dir), recipe=resolved.recipe.name, entries=carried,
                             store=store, images_lock=lock, client=client, say=_say,
                             wheelhouse=not args.no_wheelhouse, signer=signer,
                             charliecloud=charliecloud_tars(lock) if args.with_charliecloud else None)
        _say(f"a site imports it once it trusts key {keys.short(signer.public_key.keyid)}: "
             f"`trace-tui keys trust {dest / bundle.PUBLIC_KEY_FILE}` there, after checking the keyid with this site")
        return 0
    src = Path(args.dir)
    if not src.is_dir():  # bad input before anything else, Docker included
        raise UsageError(f"bundle import {src}: {'is a file, not' if src.exists() else 'no such'} directory",
                         hint="name the folder `trace-tui bundle export` wrote")
    trusted = keys.site_keys(root, [Path(f) for f in args.trust_key])
    docker = args.runtime == "docker"
    images_dir = (Path(args.images_dir) if args.images_dir else root / "images" / args.runtime).absolute()
    checked = bundle.import_bundle(
        src, store=store, client=docker_client(timeout=images.BULK_TIMEOUT_S) if docker else None,
        images_lock_path=images.images_lock_path(), say=_say, keys=trusted,
        place_images=None if docker else lambda bundle_dir, lock: import_images_for(args.runtime, bundle_dir, lock,
                                                                                    images_dir, _say))
    manifest = checked.manifest
    lock = release_lock()
    for entry in manifest.entries:
        record = store.record(entry)
        if record is not None:
            _say(f"  {entry}: {trust_reason(record, lock)}")
    _say(f"bundle for recipe {manifest.recipe} imported (signed by key {keys.short(checked.signed_by)}): "
         f"{len(manifest.images)} images for {args.runtime}, {len(manifest.entries)} store entries; "
         f"{_next_step(manifest.recipe, args.runtime)}")
    return 0


def _next_step(recipe: str, runtime: str = "docker") -> str:
    """What to run now. RECIPE passed the bundle manifest's check (a recipe name: lower-case letters,
    digits and dashes), so it prints as it is; a recipe this trace-tui does not ship came from a
    recipe file, which the site runs by its path."""
    if recipe in known_recipes():
        flag = "" if runtime == "docker" else f" --runtime {runtime}"
        return f"run `trace-tui --recipe {recipe} --offline{flag}`"
    return (f"recipe {recipe} is not one this trace-tui ships: run `trace-tui --recipe FILE.yaml --offline` "
            "with the recipe file the bundle was exported from")
