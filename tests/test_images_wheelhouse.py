"""The wheelhouse reaches an image build served on an internal network, not copied into a layer.

A real engine builds a two-line image whose RUN step reads a served wheelhouse file, the way the stage
Dockerfiles' pip does (`--find-links http://wheelhouse:8000/FOLDER/`).
"""

from __future__ import annotations

import io
import tarfile

import pytest

from trace_tui import images
from trace_tui.errors import CheckFailed

from tests.images_fixtures import docker_client  # noqa: F401 - fixture

pytestmark = pytest.mark.docker


def _context(dockerfile: str) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile.encode())
        tar.addfile(info, io.BytesIO(dockerfile.encode()))
    buf.seek(0)
    return buf


def test_a_build_step_reads_the_served_wheelhouse_and_nothing_is_left_behind(docker_client, tmp_path):
    base = images.load_pins()["flavors"]["cpu"]["local_base"]
    house = tmp_path / "wheelhouse" / "cpu"
    house.mkdir(parents=True)
    (house / "pkg-1.0-py3-none-any.whl").write_bytes(b"not really a wheel\n")
    url = f"http://{images.WHEELHOUSE_HOST}:{images.WHEELHOUSE_PORT}/cpu/"
    dockerfile = (f"FROM {base}\nRUN python3 -c \"import urllib.request as u; "
                  f"page = u.urlopen('{url}').read().decode(); assert 'pkg-1.0-py3-none-any.whl' in page, page; "
                  f"assert u.urlopen('{url}pkg-1.0-py3-none-any.whl').read() == b'not really a wheel\\\\n'\"\n")
    with images.serving_wheelhouses(docker_client, tmp_path / "wheelhouse", base) as network:
        attrs = docker_client.networks.get(network).attrs
        assert attrs["Internal"] is True  # the build steps on it have no route out
        image, _logs = docker_client.images.build(fileobj=_context(dockerfile), custom_context=True, rm=True,
                                                  forcerm=True, nocache=True, network_mode=network)
    try:
        assert not docker_client.networks.list(names=[network])
        assert not docker_client.containers.list(all=True, filters={"name": f"{network}-wheelhouse"})
        # the wheels were read over the network: nothing of the wheelhouse is in the image's layers
        history = " ".join(str(h.get("CreatedBy", "")) for h in image.history())
        assert "COPY" not in history
    finally:
        docker_client.images.remove(image.id, force=True)


def test_a_server_that_cannot_start_is_one_line_and_leaves_no_network(docker_client, tmp_path):
    """An image without python3 cannot serve: the build stops before it starts, naming the server."""
    from tests.images_fixtures import make_tiny_image

    tiny = make_tiny_image(docker_client, "no-python")
    before = {n.name for n in docker_client.networks.list()}
    try:
        with pytest.raises(CheckFailed, match="wheelhouse server"):
            with images.serving_wheelhouses(docker_client, tmp_path, tiny.id):
                pass
    finally:
        docker_client.images.remove(tiny.id, force=True)
    assert {n.name for n in docker_client.networks.list()} == before
