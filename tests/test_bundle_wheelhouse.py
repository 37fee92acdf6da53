"""A bundle's wheelhouse: trace-tui's own wheel is built as the images build it (the same sources give the
same wheel, byte for byte), and a host dependency that cannot be collected is one line, not a traceback."""

from __future__ import annotations

import pytest

from trace_tui.bundle import export
from trace_tui.common.digest import sha256_file
from trace_tui.errors import CheckFailed
from trace_tui.images import build_wheel, repo_root

pytestmark = pytest.mark.slow


def test_the_bundles_wheel_is_the_images_wheel_byte_for_byte(tmp_path, monkeypatch):
    image_wheel = build_wheel(repo_root(), tmp_path / "image")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # no dependency can be collected here
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    with pytest.raises(CheckFailed) as err:
        export._make_wheelhouse(tmp_path / "bundle")
    line = err.value.line()
    assert "collecting trace-tui's host dependencies" in line and "--no-wheelhouse" in line and "\n" not in line
    bundled = next((tmp_path / "bundle").glob("trace_tui-*.whl"))
    assert bundled.name == image_wheel.name and sha256_file(bundled) == sha256_file(image_wheel)
