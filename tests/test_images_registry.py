"""Site registries: push the locked images, pull them back by digest, check ids (real registry on loopback)."""

from __future__ import annotations

import pytest

from trace_tui import images
from trace_tui.errors import CheckFailed, UsageError

from tests.images_fixtures import docker_client, local_registry, tiny_lock  # noqa: F401 - fixtures

pytestmark = pytest.mark.docker


def test_push_records_digests_and_pull_by_digest_restores_the_same_ids(docker_client, local_registry, tiny_lock):
    pushed = images.push_images(tiny_lock, local_registry, client=docker_client, say=lambda _m: None)
    for name, img in pushed.images.items():
        assert any(d.startswith(f"{local_registry}/trace-tui-{name}@sha256:") for d in img.repo_digests)
        assert img.id == tiny_lock.images[name].id
    for img in pushed.images.values():  # the target machine has none of them
        docker_client.images.remove(img.id, force=True)
    images.pull_images(pushed, local_registry, client=docker_client, say=lambda _m: None)
    for img in pushed.images.values():
        assert docker_client.images.get(img.id).id == img.id
        assert docker_client.images.get(img.tag).id == img.id  # tagged as the runner expects


def test_pull_refuses_an_image_whose_id_differs_from_the_lock(docker_client, local_registry, tiny_lock):
    pushed = images.push_images(tiny_lock, local_registry, client=docker_client, say=lambda _m: None)
    wrong = pushed.images["train"].model_copy(update={"id": "sha256:" + "0" * 64})
    forged = pushed.model_copy(update={"images": {**pushed.images, "train": wrong}})
    with pytest.raises(CheckFailed, match="the lock says sha256:0000"):
        images.pull_images(forged, local_registry, client=docker_client, say=lambda _m: None)


def test_pull_without_recorded_digests_names_the_fix(docker_client, local_registry, tiny_lock):
    with pytest.raises(UsageError) as err:
        images.pull_images(tiny_lock, local_registry, client=docker_client, say=lambda _m: None)
    assert "no digest for train" in err.value.line() and f"make push REGISTRY={local_registry}" in err.value.line()


def test_image_status_tells_ok_missing_and_not_built(docker_client, tiny_lock):
    assert images.image_status(docker_client, None) == {n: "not built" for n in images.IMAGE_NAMES}
    assert set(images.image_status(docker_client, tiny_lock).values()) == {"ok"}
    docker_client.images.remove(tiny_lock.images["score"].id, force=True)
    assert images.image_status(docker_client, tiny_lock)["score"] == "missing"


def test_pull_tags_a_lock_tag_that_names_a_registry_with_a_port(docker_client, local_registry, tiny_lock):
    """A lock written at a site whose tags carry their registry (host:port/...) is tagged whole."""
    pushed = images.push_images(tiny_lock, local_registry, client=docker_client, say=lambda _m: None)
    train = pushed.images["train"]
    at_site = train.model_copy(update={"tag": f"{local_registry}/site/trace-tui-train:t-port"})
    lock = pushed.model_copy(update={"images": {"train": at_site}})
    images.pull_images(lock, local_registry, client=docker_client, say=lambda _m: None)
    try:
        assert docker_client.images.get(at_site.tag).id == train.id
    finally:
        docker_client.images.remove(at_site.tag)
