"""A bundle's wheelhouse: trace-tui's own wheel is built as the images build it (the same sources give the
same wheel, byte for byte), a host dependency that cannot be collected is one line, not a traceback, and a
site with no network installs trace-tui from it as the README's air-gapped row says."""

from __future__ import annotations

import pytest

from trace_tui import __version__
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


def test_a_site_installs_trace_tui_from_the_wheelhouse_with_no_network(tmp_path):
    """The README's site install, typed as there (`python3 -m venv`, activate, `pip install --no-index
    --find-links DIR/wheelhouse trace-tui`), in a network namespace with no network and no pip configuration:
    trace-tui and every host dependency come from the wheelhouse alone, and the installed command runs.
    Collecting the wheelhouse needs the package index (skipped without one, as without `unshare -n`)."""
    import os
    import subprocess

    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        pytest.skip("a network namespace cannot be made here (unshare -n)")
    bundle = tmp_path / "bundle"
    try:
        export._make_wheelhouse(bundle / "wheelhouse")
    except CheckFailed as exc:
        if "collecting trace-tui's host dependencies" not in exc.line():
            raise
        pytest.skip(f"the package index is not reachable here: {exc.line()}")
    site = tmp_path / "site"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(HOME=str(site), PIP_CONFIG_FILE=os.devnull, TRACE_TUI_HOME=str(site / "trace-tui-home"))
    script = (f"cd {bundle.parent} && python3 -m venv ~/trace-tui && . ~/trace-tui/bin/activate && "
              "pip install -q --no-index --find-links bundle/wheelhouse trace-tui && trace-tui --version && "
              "trace-tui keys init")
    done = subprocess.run(["unshare", "-n", "sh", "-c", script], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"trace-tui {__version__}" in done.stdout and "signing key" in done.stdout
    assert (site / "trace-tui" / "bin" / "trace-tui").is_file()
