"""Signed bundles: the signature is checked first, against the keys the site trusts, and the bundle is
held to it; images and hub-stated models enter a site only as signed subjects.

A real Docker engine (tiny images under their own stage tags), real bundles written by `bundle export`
and signed with a real ed25519 key (securesystemslib), a real store, the real CLI. The hub-stated
model is a store entry made the way `store fetch` records one (every file with the hash the hub
stated), not fetched: the hub is unreachable here (tests/test_store_fetch.py fetches through a local
stand-in).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from securesystemslib.signer import CryptoSigner

from trace_tui import bundle
from trace_tui.errors import CheckFailed
from trace_tui.release import release_lock
from trace_tui.store import Store
from trace_tui.store import names as N
from trace_tui.store.importer import import_entry_dir
from trace_tui.store.manifest import Expected, Source
from trace_tui.store.trust import HUB_STATED, LOCAL, SIGNED_BY, entry_trust

from tests.images_fixtures import (  # noqa: F401 - fixtures
    bundle_signer,
    docker_client,
    filled_store,
    sign_bundle,
    tiny_lock,
    trusted_key_file,
    trusted_keys,
)
from tests.test_bundle_roundtrip import stage_lock  # noqa: F401 - fixture
from tests.test_bundle_security import error_line, image_id, remove_images, rewrite_archive

pytestmark = pytest.mark.docker

LOCK = release_lock()
JUDGE = next(n for n in sorted(N.pinned_entries(LOCK)) if n.startswith("model:Qwen/Qwen3-32B@"))


def hub_stated_entry(store: Store, folder: Path) -> str:
    """The judge as `store fetch` records it: each file with the LFS sha256 the hub stated (here, tiny files)."""
    files = {"config.json": b'{"model_type": "qwen3"}\n', "model.safetensors": b"\0" * 4096}
    folder.mkdir(parents=True, exist_ok=True)
    with store.staging(JUDGE) as st:
        for rel, data in files.items():
            (folder / rel).write_bytes(data)
            st.add(rel, folder / rel, expected=[Expected(algorithm="sha256", value=hashlib.sha256(data).hexdigest(),
                                                         source=f"hub metadata (LFS sha256) in {rel}")])
        repo, rev = JUDGE.removeprefix("model:").split("@")
        record = st.commit(revision=rev, source=Source(type="huggingface", repo_id=repo, repo_type="model",
                                                       revision=rev))
    assert entry_trust(record, LOCK) == HUB_STATED
    return JUDGE


@pytest.fixture()
def signed(tmp_path, docker_client, stage_lock, filled_store):
    """A signed bundle carrying the local sample dataset and a hub-stated judge; the site has none of its images."""
    store, entries = filled_store
    judge = hub_stated_entry(store, tmp_path / "judge-files")
    dest = tmp_path / "bundle"
    manifest = bundle.export_bundle(dest, recipe="demo", entries=[*entries, judge], store=store,
                                    images_lock=stage_lock, client=docker_client, say=lambda _m: None,
                                    wheelhouse=False, signer=bundle_signer())
    remove_images(docker_client, stage_lock)
    return dest, manifest, stage_lock


def cli_import(dest: Path, home: Path, *trust: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRACE_TUI_IMAGES_LOCK": str(home / "images.lock.json")}
    return subprocess.run([sys.executable, "-m", "trace_tui", "bundle", "import", str(dest), "--home", str(home),
                           *(a for t in trust for a in ("--trust-key", str(t)))],
                          capture_output=True, text=True, env=env, timeout=300)


def assert_host_unchanged(home: Path, lock, client) -> None:
    assert not (home / "images.lock.json").exists()
    entries = home / "store" / "entries"
    assert not entries.exists() or not any(p.is_file() for p in entries.rglob("*"))
    assert all(image_id(client, img.id) is None for img in lock.images.values())


def test_a_signed_bundle_brings_a_hub_stated_judge_to_a_site_that_trusts_its_key(tmp_path, docker_client, signed):
    dest, manifest, lock = signed
    statement = json.loads(base64.b64decode(json.loads((dest / bundle.SIGNATURE).read_text())["payload"]))
    subjects = {s["name"] for s in statement["subject"]}
    assert {"manifest.json", "images/stages.tar", f"entry:{JUDGE}", "image:infer", "image:score", "image:train"} \
        <= subjects and set(manifest.files) <= subjects
    assert statement["predicate"]["entryTrust"][JUDGE] == "hub-stated"
    home = tmp_path / "site"
    done = cli_import(dest, home, trusted_key_file(tmp_path / "keys"))
    assert done.returncode == 0, done.stderr
    assert f"signature verified: key {bundle_signer().public_key.keyid[:16]}" in done.stderr
    assert f"{JUDGE}: hub-stated (the hub's hashes, carried in a bundle signed by key " in done.stderr
    record = Store(home / "store").record(JUDGE)
    assert entry_trust(record, LOCK) == HUB_STATED and record.notes[SIGNED_BY] == bundle_signer().public_key.keyid
    for img in lock.images.values():
        assert image_id(docker_client, img.tag) == img.id


def test_an_unsigned_bundle_is_refused_in_one_line_with_the_host_unchanged(tmp_path, docker_client, signed):
    dest, _, lock = signed
    (dest / bundle.SIGNATURE).unlink()
    home = tmp_path / "site"
    done = cli_import(dest, home, trusted_key_file(tmp_path / "keys"))
    assert done.returncode == 1
    line = error_line(done)
    assert "manifest.dsse.json is missing" in line and "signed by a key it trusts" in line
    assert_host_unchanged(home, lock, docker_client)


def test_a_bundle_re_signed_with_a_key_the_site_does_not_trust_is_refused(tmp_path, docker_client, signed):
    dest, _, lock = signed
    stranger = CryptoSigner.generate_ed25519()
    sign_bundle(dest, stranger)
    home = tmp_path / "site"
    done = cli_import(dest, home, trusted_key_file(tmp_path / "keys"))
    assert done.returncode == 1
    line = error_line(done)
    assert f"signed by key {stranger.public_key.keyid[:16]}, which this site does not trust" in line
    assert "keys trust FILE" in line
    assert_host_unchanged(home, lock, docker_client)
    # and a site that trusts no key at all says so
    done = cli_import(dest, tmp_path / "bare")
    assert "this site trusts no key" in error_line(done)


def _flip(path: Path, at: int = -1) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def _store_file(dest: Path) -> Path:
    return next(p for p in sorted((dest / "store").rglob("*")) if p.is_file() and p.name != "manifest.json")


@pytest.mark.parametrize("where,expect", [
    ("a store file", "differs from the manifest's"),
    ("the image archive", "images/stages.tar: sha256"),
    ("the manifest", "manifest.json: changed after signing"),
    ("the signed statement", "does not verify: the signed statement was changed after signing"),
])
def test_one_byte_changed_anywhere_is_refused_naming_it(tmp_path, docker_client, signed, where, expect):
    dest, _, lock = signed
    if where == "a store file":
        _flip(_store_file(dest))
    elif where == "the image archive":
        _flip(dest / "images" / "stages.tar", at=600)  # inside the first member's header block
    elif where == "the manifest":
        text = (dest / "manifest.json").read_text()
        (dest / "manifest.json").write_text(text.replace('"demo"', '"deme"', 1))
    else:
        env = json.loads((dest / bundle.SIGNATURE).read_text())
        payload = base64.b64decode(env["payload"]).replace(b'"demo"', b'"deme"', 1)
        env["payload"] = base64.b64encode(payload).decode()
        (dest / bundle.SIGNATURE).write_text(json.dumps(env))
    home = tmp_path / "site"
    done = cli_import(dest, home, trusted_key_file(tmp_path / "keys"))
    assert done.returncode == 1
    assert expect in error_line(done)
    assert_host_unchanged(home, lock, docker_client)


def test_a_hand_made_bundle_of_empty_images_under_stage_tags_is_refused(tmp_path, docker_client, stage_lock,
                                                                         filled_store):
    """Three tiny images tagged trace-tui/* with a matching image lock and manifest, written by hand (no
    signature): what was imported as "imported: 3 images" before bundles were signed."""
    store, entries = filled_store
    dest = tmp_path / "bundle"
    bundle.export_bundle(dest, recipe="demo", entries=entries, store=store, images_lock=stage_lock,
                         client=docker_client, say=lambda _m: None, wheelhouse=False, signer=None)
    assert not (dest / bundle.SIGNATURE).exists()
    remove_images(docker_client, stage_lock)
    with pytest.raises(CheckFailed, match="manifest.dsse.json is missing"):
        bundle.import_bundle(dest, store=Store(tmp_path / "site" / "store"), client=docker_client,
                             images_lock_path=tmp_path / "site" / "images.lock.json", say=lambda _m: None,
                             keys=trusted_keys())
    assert_host_unchanged(tmp_path / "site", stage_lock, docker_client)


def test_an_archive_member_named_outside_its_root_is_refused_even_when_signed(tmp_path, docker_client, signed):
    dest, _, lock = signed
    tar_path = dest / "images" / "stages.tar"
    out = io.BytesIO()
    with tarfile.open(tar_path) as src, tarfile.open(fileobj=out, mode="w") as dst:
        for member in src:
            dst.addfile(member, src.extractfile(member) if member.isreg() else None)
        evil = tarfile.TarInfo("../escaped.txt")
        evil.size = 4
        dst.addfile(evil, io.BytesIO(b"evil"))
    tar_path.write_bytes(out.getvalue())
    from tests.test_bundle_security import resign

    resign(dest)  # a key the site trusts signed it: the archive's own check still refuses it
    home = tmp_path / "site"
    done = cli_import(dest, home, trusted_key_file(tmp_path / "keys"))
    assert done.returncode == 1
    assert "a member named ../escaped.txt, outside the archive's root" in error_line(done)
    assert_host_unchanged(home, lock, docker_client)


def _tar_with(tmp_path: Path, *members: tarfile.TarInfo) -> Path:
    path = tmp_path / "a.tar"
    with tarfile.open(path, "w") as tar:
        for m in members:
            tar.addfile(m, io.BytesIO(b"x" * m.size) if m.isreg() else None)
    return path


def _link(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    return info


def test_docker_saves_own_layer_links_pass_and_links_out_of_the_archive_do_not(tmp_path):
    """`docker save` links a layer it already wrote (`<id>/layer.tar -> ../<other id>/layer.tar`)."""
    from trace_tui.bundle.archives import _archive_members

    layer = tarfile.TarInfo("b/layer.tar")
    layer.size = 1
    with tarfile.open(_tar_with(tmp_path, layer, _link("a/layer.tar", "../b/layer.tar"))) as tar:
        assert set(_archive_members(tar, "images/stages.tar")) == {"a/layer.tar", "b/layer.tar"}
    with tarfile.open(_tar_with(tmp_path, layer, _link("a/layer.tar", "../../etc/shadow"))) as tar:
        with pytest.raises(CheckFailed, match="links to ../../etc/shadow, outside the archive's root"):
            _archive_members(tar, "images/stages.tar")


def test_a_hub_stated_model_enters_only_from_a_signed_bundle(tmp_path, signed):
    """The same entry folder, imported as a folder (`import_entry_dir` with no verified signature), is refused:
    its record's hub hashes are the sender's claims until a trusted signature vouches for them."""
    dest, _, _ = signed
    folder = next(p.parent for p in (dest / "store").rglob("manifest.json")
                  if json.loads(p.read_text())["name"] == JUDGE)
    site = Store(tmp_path / "site" / "store")
    with pytest.raises(CheckFailed) as err:
        import_entry_dir(site, folder)
    assert "enters a site hub-stated, only from a bundle signed by a key the site trusts" in err.value.line()
    assert site.record(JUDGE) is None
    # signed, but a record that does not carry the hub's hash of every file is local trust at most: refused
    record = json.loads((folder / "manifest.json").read_text())
    for f in record["files"]:
        f["expected"] = []
    (folder / "manifest.json").write_text(json.dumps(record))
    with pytest.raises(CheckFailed, match="does not carry the hub's hash of every file"):
        import_entry_dir(site, folder, signed_by="0" * 64)


def test_keys_init_show_and_trust(tmp_path):
    env = {**os.environ, "TRACE_TUI_HOME": str(tmp_path / "a")}

    def cli(*args: str, home: Path | None = None) -> subprocess.CompletedProcess:
        e = env if home is None else {**env, "TRACE_TUI_HOME": str(home)}
        return subprocess.run([sys.executable, "-m", "trace_tui", "keys", *args], capture_output=True, text=True,
                              env=e)

    made = cli("init")
    assert made.returncode == 0, made.stderr
    private = tmp_path / "a" / "keys" / "signing-key.pem"
    assert private.stat().st_mode & 0o777 == 0o600 and (private.parent.stat().st_mode & 0o777) == 0o700
    again = cli("init")
    assert again.returncode == 2 and "already exists" in again.stderr and "--replace" in again.stderr
    assert "Traceback" not in again.stderr
    refused = cli("trust", str(private), home=tmp_path / "b")
    assert refused.returncode == 2 and "a private key; a site trusts the public half" in refused.stderr
    trusted = cli("trust", str(tmp_path / "a" / "keys" / "signing-key.pub.json"), home=tmp_path / "b")
    assert trusted.returncode == 0, trusted.stderr
    keyid = json.loads((tmp_path / "a" / "keys" / "signing-key.pub.json").read_text())["keyid"]
    shown = cli("show", home=tmp_path / "b")
    assert keyid in shown.stdout and "no signing key" in shown.stdout
    forged = tmp_path / "forged.pub.json"
    doc = json.loads((tmp_path / "a" / "keys" / "signing-key.pub.json").read_text())
    doc["keyid"] = "f" * 64
    forged.write_text(json.dumps(doc))
    refused = cli("trust", str(forged), home=tmp_path / "b")
    assert refused.returncode == 2 and "is not the key's own" in refused.stderr


def test_a_local_entry_is_local_trust_and_a_copied_hub_cache_never_rises(tmp_path, filled_store):
    store, entries = filled_store
    assert entry_trust(store.record(entries[0]), LOCK) == LOCAL
    judge = hub_stated_entry(store, tmp_path / "judge")
    record = store.record(judge)
    # the same files arriving by a copy (an import of a folder, no signature): local, whatever its record says
    copied = record.model_copy(update={"source": record.source.model_copy(update={"imported_from": "/elsewhere"})})
    assert entry_trust(copied, LOCK) == LOCAL
