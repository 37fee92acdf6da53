"""Every recipe's bundle imports at an air-gapped site, and the run's preflight passes there for the store,
the images and the network: the README's air-gapped row, command by command, for smoke-3b, validation and full.

Connected host (a home of its own): `keys init`; the store filled as a user fills it, `store import DIR` for
the release and the files a user downloaded by hand (the dataset files, the benchmark files a plain URL serves),
then `store fetch --recipe R` for everything else (every pinned model, the judge, the benchmarks published as
hub datasets); `bundle export DIR --recipe R`. Site (a fresh, empty home): `keys trust DIR/signing-key.pub.json`,
then `bundle import DIR` and the run, `--recipe R --offline --check` and `--recipe R --offline --yes`, each under
`unshare -n` (a network namespace with no network; skipped where one cannot be made). Every entry comes back at
its trust level: published for the release, the dataset, the benchmarks whose md5 the provenance matrix
states and the checkpoints whose sha256sets the lock publishes; hub-stated for the rest.

Real: the command line (`python -m trace_tui`, this checkout's package installed as its wheel lays it out),
the Docker engine, the store, the signatures, the release copy. Stood in, where nothing real can be here:
- the Hugging Face hub and the raw file host: tests/fake_hub.py (a local HTTP server at the narrowest edge,
  below huggingface_hub's real client), serving small files at each pinned revision;
- the files whose published hashes cannot be met here (the dataset-v1 parquet files, 21 benchmark files, the
  checkpoints): the TRACE sample's rows, small TSVs and small model files, under a release lock and a release
  derived from the real ones that restate only those hashes (tests/stand_in_release.py says exactly what);
- the stage images: three tiny images under gpu-flavour stage tags and lock (a `docker save` of the real
  ones is several GB), so the images travel, load and are checked by id as the real ones would;
- the bundle leaves out its wheelhouse (`--no-wheelhouse`: collecting it needs the package index).
On a machine without GPUs the run stops at its GPU requirements, which this test expects and names; what it
asserts is that nothing else stops it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from fake_hub import FakeHub, hub  # noqa: F401 - the fixture is used by name
from stand_in_release import StandIns, derive, installed_copy, published_models

from trace_tui.cli import build_parser
from trace_tui.recipe.catalog import resolve_recipe
from trace_tui.release import release_lock
from trace_tui.store import Store
from trace_tui.store import names as N

from tests.images_fixtures import docker_client, tiny_lock  # noqa: F401 - fixtures
from tests.test_bundle_roundtrip import stage_lock  # noqa: F401 - fixture
from tests.test_bundle_security import error_line, image_id, remove_images

pytestmark = pytest.mark.docker
REPO_SRC = Path(__file__).resolve().parents[1] / "src"

RECIPES = ("smoke-3b", "validation", "full")
# The README's air-gapped row, as a user types it (for recipe full; DIR the bundle's folder). The round trip
# runs its trace-tui commands; `make appliance FLAVOR=gpu` is stood in by the tiny gpu-tagged images, the
# site's install from the wheelhouse is tests/test_bundle_wheelhouse.py's.
ROW = [
    "make appliance FLAVOR=gpu", ". .venv/bin/activate", "trace-tui keys init", "trace-tui store fetch --recipe full",
    "trace-tui bundle export DIR --recipe full",
    "python3 -m venv ~/trace-tui", ". ~/trace-tui/bin/activate",
    "pip install --no-index --find-links DIR/wheelhouse trace-tui",
    "trace-tui keys trust DIR/signing-key.pub.json", "trace-tui bundle import DIR",
    "trace-tui --recipe full --offline --check", "trace-tui --recipe full --offline --yes",
]
KEYS_INIT, FETCH, EXPORT, TRUST, IMPORT, CHECK, RUN = (ROW[2], ROW[3], ROW[4], ROW[8], ROW[9], ROW[10], ROW[11])
# what the connected host's commands may reach: the hub stand-in alone (a stray request elsewhere fails fast)
NOWHERE = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1,localhost"}


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory, trace_release_dir, trace_sample_dir) -> StandIns:
    return derive(trace_release_dir, trace_sample_dir / "trace-sample.parquet", tmp_path_factory.mktemp("stand-ins"))


@pytest.fixture(scope="module")
def package(tmp_path_factory, stand_ins) -> Path:
    return installed_copy(tmp_path_factory.mktemp("installed"), stand_ins.lock)


@pytest.fixture(scope="module")
def netns() -> list[str]:
    """The prefix that runs a command with no network at all."""
    done = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"a network namespace cannot be made here (unshare -n: {done.stderr.strip()})")
    return ["unshare", "-n"]


@pytest.fixture()
def gpu_lock(docker_client, tiny_lock):
    """tiny_lock's images under gpu-flavour stage tags, `trace-tui/<stage>:<version>-gpu`, in a gpu lock."""
    version = f"0.0.0-test-{uuid.uuid4().hex[:8]}"
    staged = {}
    for name, img in tiny_lock.images.items():
        tag = f"trace-tui/{name}:{version}-gpu"
        docker_client.api.tag(img.id, *tag.rsplit(":", 1))
        docker_client.api.remove_image(img.tag)
        staged[name] = img.model_copy(update={"tag": tag})
    return tiny_lock.model_copy(update={"version": version, "flavor": "gpu", "images": staged})


def trace_tui(*args: str, home: Path, package: Path, prefix: list[str] = (), **env: str) -> subprocess.CompletedProcess:
    """`trace-tui ARGS` as installed (the image lock where an installed trace-tui keeps it: HOME/images.lock.json)."""
    full = {k: v for k, v in os.environ.items()
            if not k.startswith(("TRACE_TUI_IMAGE", "TRACE_TUI_DEBUG", "TRACE_TUI_FAKE"))}
    full.update(TRACE_TUI_HOME=str(home), PYTHONPATH=str(package), **env)
    return subprocess.run([*prefix, sys.executable, "-m", "trace_tui", *args], capture_output=True, text=True,
                          env=full, timeout=300, stdin=subprocess.DEVNULL)


def typed(command: str, recipe: str, bundle: Path) -> list[str]:
    """The arguments of the row's trace-tui COMMAND for RECIPE, DIR being BUNDLE."""
    argv = shlex.split(command)
    assert argv[0] == "trace-tui"
    return [a.replace("DIR", str(bundle)) if "DIR" in a else (recipe if a == "full" else a) for a in argv[1:]]


def test_the_readme_air_gapped_row_is_what_these_tests_type():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| air-gapped site |"))
    assert re.findall(r"`([^`]+)`", row) == ROW
    parser = build_parser()
    for command in (c for c in ROW if c.startswith("trace-tui ")):
        parser.parse_args(typed(command, "full", Path("/bundle")))  # exits 2 (SystemExit) on a flag it lacks


def ok(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert done.returncode == 0, (done.args, done.stdout[-3000:], done.stderr[-3000:])
    return done


def serve(hub: FakeHub, stand_ins: StandIns) -> None:  # noqa: F811
    for (kind, repo_id, revision), repo in stand_ins.hub.items():
        hub.add_repo(kind, repo_id, revision, dict(repo.files), set(repo.lfs))


def export(recipe: str, stand_ins: StandIns, package: Path, lock, root: Path) -> Path:
    """The connected host's part of the row: the store filled, the bundle exported (its keyid said)."""
    home = root / "host"
    home.mkdir(parents=True)
    (home / "images.lock.json").write_text(lock.model_dump_json(indent=2))  # as `make appliance` left it
    run = lambda *a: ok(trace_tui(*a, home=home, package=package, **NOWHERE))  # noqa: E731
    dest = root / "bundle"
    run(*typed(KEYS_INIT, recipe, dest))
    run("store", "import", str(stand_ins.release))
    entries = resolve_recipe(recipe).all_store_entries()
    datasets = [e for e in entries if e.startswith("dataset:")]
    if datasets:
        run("store", "import", str(stand_ins.data), "--entry", *datasets)
    if any(e.startswith("benchmark:") for e in entries):
        run("store", "import", str(stand_ins.benchmarks))
    fetched = run(*typed(FETCH, recipe, dest))
    assert "failed" not in fetched.stdout, fetched.stdout
    done = run(*typed(EXPORT, recipe, dest), "--no-wheelhouse")
    keyid = json.loads((home / "keys" / "signing-key.pub.json").read_text())["keyid"]
    assert f"once it trusts key {keyid[:16]}" in done.stderr
    return dest


def expected_trust(name: str, stand_ins: StandIns) -> str:
    entry = N.parse(name)
    if entry.kind == "benchmark":
        return "published" if stand_ins.sources[entry.key].md5 else "hub-stated"
    if entry.kind == "model":
        return "published" if name in published_models(stand_ins.lock) else "hub-stated"
    return "published"


@pytest.mark.parametrize("recipe", RECIPES)
def test_the_bundle_of_a_recipe_imports_offline_and_its_preflight_passes_but_for_gpus(
        recipe, tmp_path, hub, stand_ins, package, netns, docker_client, gpu_lock):  # noqa: F811
    serve(hub, stand_ins)
    bundle = export(recipe, stand_ins, package, gpu_lock, tmp_path)
    remove_images(docker_client, gpu_lock)  # the site has none of them
    entries = resolve_recipe(recipe).all_store_entries()
    images = sorted({s.image for s in resolve_recipe(recipe).recipe.steps if s.image})
    site = tmp_path / "site"
    offline = dict(home=site, package=package, prefix=netns)

    # before the site trusts the key: refused in one line, nothing changed
    refused = trace_tui(*typed(IMPORT, recipe, bundle), **offline)
    assert refused.returncode == 1 and "this site trusts no key" in error_line(refused)
    assert not (site / "store" / "entries").exists() and not (site / "images.lock.json").exists()
    assert all(image_id(docker_client, img.id) is None for img in gpu_lock.images.values())

    ok(trace_tui(*typed(TRUST, recipe, bundle), **offline))
    probe = subprocess.run([*netns, sys.executable, "-c", "import socket, sys; s = socket.socket(); s.settimeout(2); "
                            f"sys.exit(s.connect_ex(('127.0.0.1', {hub.base.rsplit(':', 1)[1]})))"])
    assert probe.returncode != 0  # the namespace has no network: not even the hub stand-in on loopback
    done = ok(trace_tui(*typed(IMPORT, recipe, bundle), **offline))
    assert f"bundle for recipe {recipe} imported" in done.stderr and f"`trace-tui --recipe {recipe} --offline`" \
        in done.stderr

    # every entry, at its trust level
    listed = {e["name"]: e for e in json.loads(ok(trace_tui("store", "list", "--json", **offline)).stdout)}
    assert set(listed) == set(entries)
    assert {n: e["trust"] for n, e in listed.items()} == {n: expected_trust(n, stand_ins) for n in entries}
    assert "hub-stated" in {e["trust"] for e in listed.values()}
    ok(trace_tui("store", "verify", "--deep", **offline))
    for name in (e for e in entries if e.startswith("dataset:")):  # imported after the release, checked by it
        assert Store(site / "store").record(name).notes["equivalence_receipt_checked"] is True
    for img in gpu_lock.images.values():
        assert image_id(docker_client, img.tag) == img.id

    # the preflight: store, images, network (and the engine) pass; only this machine's GPUs (or disk) may not
    check = trace_tui(*typed(CHECK, recipe, bundle), "--log-format", "json", **offline)
    report = json.loads(check.stdout)
    by_area: dict[str, list[dict]] = {}
    for item in report["items"]:
        by_area.setdefault(item["area"], []).append(item)
    for area in ("runtime", "images", "store", "network"):
        assert {i["verdict"] for i in by_area[area]} == {"pass"}, by_area[area]
    assert {i["subject"] for i in by_area["store"]} == set(entries)
    assert [i["subject"] for i in by_area["images"]] == images
    assert all(i["line"].endswith(" as locked") for i in by_area["images"])
    problems = [i for i in report["items"] if i["verdict"] == "fail"]
    assert {i["area"] for i in problems} <= {"gpus", "disk"}
    assert check.returncode == (3 if problems else 0), check.stderr
    if problems:  # the run itself stops for exactly these, before anything starts
        run = trace_tui(*typed(RUN, recipe, bundle), **offline)
        assert run.returncode == 3 and "Traceback" not in run.stderr
        assert all(i["line"] in run.stderr for i in problems) and "store lacks" not in run.stderr
        assert not (site / "campaigns").exists()


def test_a_bundle_that_fails_half_way_leaves_nothing_behind(tmp_path, hub, stand_ins, package, netns,  # noqa: F811
                                                            docker_client, gpu_lock):
    """A site whose release lock publishes another sha256set for the 3B base model (a bundle exported under
    another lock): the release and the dataset enter its store, then the model is refused; the import takes
    them back and says so in one line, and loads no image."""
    serve(hub, stand_ins)
    bundle = export("smoke-3b", stand_ins, package, gpu_lock, tmp_path)
    remove_images(docker_client, gpu_lock)
    other = json.loads(json.dumps(stand_ins.lock))
    next(m for m in other["models"] if m["id"] == "qwen2.5-vl-3b-base")["published_revision_sets"] = {
        "trace_validation": "sha256set:" + "0" * 64}
    site_package = installed_copy(tmp_path / "site-package", other)
    site = tmp_path / "site"
    ok(trace_tui("keys", "trust", str(bundle / "signing-key.pub.json"), home=site, package=site_package))
    done = trace_tui("bundle", "import", str(bundle), home=site, package=site_package, prefix=netns)
    assert done.returncode == 1
    line = error_line(done)
    base = N.model_entry(*[(m["repo_id"], m["revision"]) for m in other["models"] if m["id"] == "qwen2.5-vl-3b-base"][0])
    assert f"bundle import failed importing store entry {base}" in line and "which the release lock does not " \
        "publish" in line
    release, dataset = N.release_entry(release_lock()), N.dataset_entry(release_lock(), "train")
    assert f"removed the store entries it had added ({release}, {dataset})" in line
    assert "no image was loaded or tagged" in line
    entries = site / "store" / "entries"
    assert not entries.exists() or not any(p.is_file() for p in entries.rglob("*"))
    assert not (site / "images.lock.json").exists()
    assert all(image_id(docker_client, img.id) is None for img in gpu_lock.images.values())


def test_a_recipe_on_gpus_is_not_exported_from_cpu_images(tmp_path, stage_lock):
    """`bundle export DIR --recipe validation` under a cpu image lock: one line before anything is written (the
    site's run would refuse the images); the demo, all on CPU, still exports from them."""
    home = tmp_path / "host"
    home.mkdir()
    lock = tmp_path / "images.lock.json"
    lock.write_text(stage_lock.model_dump_json(indent=2))
    ok(trace_tui("keys", "init", home=home, package=REPO_SRC))
    dest = tmp_path / "bundle"
    done = trace_tui("bundle", "export", str(dest), "--recipe", "validation", "--no-wheelhouse", home=home,
                     package=REPO_SRC, TRACE_TUI_IMAGES_LOCK=str(lock))
    assert done.returncode == 2 and "is the cpu flavour, and recipe validation runs infer on GPUs" in \
        error_line(done) and "make appliance FLAVOR=gpu" in done.stderr
    assert not dest.exists()
