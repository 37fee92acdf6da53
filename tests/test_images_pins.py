"""The stage images' committed pins: every input of every flavour is pinned.

The GPU flavour cannot be built here (no CUDA base, no GitHub), so its
Dockerfiles and locks are checked as text: bases come only from build args set
from appliance/pins.json, source commits from the release lock, Python
packages only from exact pins.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from trace_tui import images
from trace_tui.release import release_lock

ROOT = Path(__file__).resolve().parents[1]
REQ = ROOT / "appliance" / "requirements"


@pytest.mark.parametrize("name", images.IMAGE_NAMES)
def test_dockerfile_takes_its_base_and_flavour_from_build_args(name):
    text = (ROOT / "containers" / name / "Dockerfile").read_text()
    froms = re.findall(r"^FROM\s+(\S+)", text, flags=re.M)
    assert froms and all(f in ("${BASE_IMAGE}", "build") for f in froms), froms
    assert "--require-hashes" in text and "--no-index" in text
    # The final stage carries no wheelhouse and runs unprivileged.
    final = text[text.rindex("FROM ${BASE_IMAGE}"):]
    assert "/wheelhouse" not in final
    assert re.search(r"^USER\s+65534:65534$", final, flags=re.M)
    for label in ("org.trace-tui.version", "org.trace-tui.lock-sha256", "org.trace-tui.image"):
        assert label in final


@pytest.mark.parametrize("name", ["infer", "score"])
def test_gpu_flavour_fetches_the_evaluator_at_pinned_commits(name):
    text = (ROOT / "containers" / name / "Dockerfile").read_text()
    for arg in ("TRACE_COMMIT", "VLMEVALKIT_COMMIT"):
        assert f"ARG {arg}" in text
    assert 'test "$(git -C "$1" rev-parse HEAD)" = "$3"' in text  # the checkout is the pinned commit
    assert "setup_trace_eval_env.sh --verify-only" in text
    assert "requirements-runtime.txt" in text


@pytest.mark.parametrize("name", ["infer", "score"])
def test_gpu_flavour_keeps_what_the_release_launcher_needs_at_run_time(name):
    """run_trace_eval.sh asks git for both checkouts' HEADs and fingerprints them with `git ls-files`
    (tests/test_release_evaluator.py runs it): the .git folders stay, git is in the final image and trusts
    the root-owned checkouts while the container runs as the invoking user."""
    text = (ROOT / "containers" / name / "Dockerfile").read_text()
    assert "rm -rf /opt/trace/.git" not in text and "VLMEvalKit/.git;" not in text
    final = text[text.rindex("FROM ${BASE_IMAGE}"):]
    assert "install -y --no-install-recommends git" in final and "safe.directory '*'" in final


def test_build_args_come_from_the_lock_and_pins():
    pins = images.load_pins()
    assert set(pins["flavors"]) == {"cpu", "gpu"}
    assert pins["flavors"]["gpu"]["base_image"].startswith("nvidia/cuda:12.8")
    lock = release_lock()
    src = (ROOT / "src" / "trace_tui" / "images.py").read_text()
    assert "rel.upstream.commit" in src and "rel.vlmevalkit.commit" in src
    # No commit or digest is typed into the Dockerfiles themselves.
    for name in images.IMAGE_NAMES:
        text = (ROOT / "containers" / name / "Dockerfile").read_text()
        assert lock.upstream.commit not in text and lock.vlmevalkit.commit not in text
        assert not re.search(r"sha256:[0-9a-f]{64}", text)


@pytest.mark.parametrize("path", sorted(REQ.glob("*.in")), ids=lambda p: p.name)
def test_requirement_inputs_pin_exact_versions(path):
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith(("-r ", "--extra-index-url")):
            continue
        assert re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[^=\s]+", line), f"{path.name}: {line!r} is not an exact pin"


@pytest.mark.parametrize("name", ["common", *images.IMAGE_NAMES])
def test_cpu_locks_hash_pin_every_package(name):
    lock = (REQ / f"{name}-cpu.lock.txt").read_text().splitlines()
    pkgs = [line for line in lock if line and not line.startswith("#")]
    assert pkgs
    for line in pkgs:
        assert re.fullmatch(r"[a-z0-9.\-]+==\S+ --hash=sha256:[0-9a-f]{64}", line), line
    names = {line.split("==")[0] for line in pkgs}
    assert {"torch", "transformers", "datasets", "pillow", "pydantic"} <= names
    if name == "train":
        assert "trl" in names


def test_images_lock_absent_is_a_status_not_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACE_TUI_IMAGES_LOCK", str(tmp_path / "images.lock.json"))
    assert images.read_images_lock() is None


def test_a_broken_images_lock_is_one_clear_error(tmp_path, monkeypatch):
    from trace_tui.errors import UsageError

    bad = tmp_path / "images.lock.json"
    bad.write_text(json.dumps({"flavor": "cpu"}))
    monkeypatch.setenv("TRACE_TUI_IMAGES_LOCK", str(bad))
    with pytest.raises(UsageError, match="not a valid image lock"):
        images.read_images_lock()


def _docker_parse(dockerfile: Path, tmp_path: Path) -> str:
    """Docker's own parser, without building: an unknown target is reported only after a successful parse."""
    import subprocess

    ctx = tmp_path / "ctx"
    ctx.mkdir(exist_ok=True)
    done = subprocess.run(["docker", "build", "-q", "-f", str(dockerfile), "--target", "no-such-stage",
                           "--build-arg", "BASE_IMAGE=scratch", str(ctx)], capture_output=True, text=True, timeout=60)
    return done.stderr


@pytest.mark.docker
@pytest.mark.parametrize("name", images.IMAGE_NAMES)
def test_every_dockerfile_parses_with_dockers_own_parser(name, tmp_path):
    """Both flavours share one file per stage, so this checks the gpu flavour's syntax too (it cannot be built here)."""
    assert "failed to reach build target no-such-stage" in _docker_parse(ROOT / "containers" / name / "Dockerfile",
                                                                         tmp_path)


@pytest.mark.docker
def test_the_syntax_check_catches_a_broken_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text((ROOT / "containers" / "infer" / "Dockerfile").read_text().replace("COPY --from=app", "COPPY --from=app"))
    assert "unknown instruction" in _docker_parse(bad, tmp_path).lower()
