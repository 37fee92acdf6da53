"""Apptainer runtime: each job in `apptainer exec` of the locked image's SIF, as the invoking user.

Most HPC sites run Apptainer (or SingularityCE, whose `exec` takes the same flags used here). The SIF
is the locked image converted by `trace-tui images export --runtime apptainer` (from Docker's storage or
a bundle's archive), recorded in the image lock with its sha256, which is checked before the first job;
the job's inputs hash the Docker image id it was built from, so receipts and resume are the Docker run's.

What each job gets, in Apptainer's own flags (command line built by :func:`apptainer_command`; the flags
as Apptainer 1.3 and 1.4 define them in cmd/internal/cli/action_flags.go):
`--containall` (its own PID, IPC and mount namespaces, an empty /tmp, no host home, and `--cleanenv`: the
image's environment, not the host's; the process gets no APPTAINER_* variable from ours, which would set
flags), the job spec and the store bound read-only and the campaign
read-write, `--net --network none` for a step without network, `--nv` for GPUs (chosen with
CUDA_VISIBLE_DEVICES), a SIF's root read-only. What it does not give without a site's cgroup
delegation, receipts and `hw` say (``GAPS``).

Apptainer is not packaged in Debian and could not be installed where this was written: its command lines
are checked against its documented flags in the tests; it has not run here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from trace_tui.common.digest import sha256_file
from trace_tui.common.images_lock import read_image_lock
from trace_tui.common.safe_write import open_append
from trace_tui.errors import RequirementsError
from trace_tui.runtime.base import CAMPAIGN_MOUNT, JOB_MOUNT, STORE_MOUNT, Launch, step_env
from trace_tui.runtime.docker import GPU_ENV
from trace_tui.runtime.local import LocalHandle, _die_with_parent

EXECUTABLES = ("apptainer", "singularity")
INSTALL_HINT = "install Apptainer (https://apptainer.org/docs/admin/main/installation.html)"
EXPORT_HINT = "build the SIFs: `trace-tui images export --runtime apptainer [--from BUNDLE/images/stages.tar]`"
GAPS = ("no memory limit (Apptainer's --memory needs the site's cgroup delegation)", "no process limit",
        "GPUs chosen by CUDA_VISIBLE_DEVICES, not isolated as devices")


def apptainer_executable() -> str | None:
    return next((exe for name in EXECUTABLES if (exe := shutil.which(name))), None)


def apptainer_command(launch: Launch, image: Path, *, exe: str = "apptainer") -> list[str]:
    """The whole command line of one stage (pure)."""
    env = {**step_env(launch), "TRACE_TUI_JOB": f"{JOB_MOUNT}/job.json", "TRACE_TUI_CAMPAIGN": CAMPAIGN_MOUNT,
           "TRACE_TUI_STORE": STORE_MOUNT, "PYTHONUNBUFFERED": "1", "HOME": "/tmp"}
    gpu_flags: list[str] = []
    if launch.gpus:
        env.update(GPU_ENV)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in launch.gpus)
        gpu_flags = ["--nv"]
    # --bind splits its value on commas; --env splits a value holding a comma and a second "=" (it reads it as
    # KEY=VAL,KEY=VAL), and takes KEY=x,y whole
    unsplittable = [str(p) for p in (launch.job_dir, launch.campaign, launch.store) if "," in str(p)]
    unsplittable += [f"{k}={v}" for k, v in env.items() if "," in v and "=" in v]
    if unsplittable:
        raise RequirementsError(f"Apptainer cannot be given {unsplittable[0]!r}: a comma in it would split it in two",
                                hint="use paths and values without commas")
    return [exe, "exec", "--containall", "--cleanenv", "--cwd", "/",
            "--bind", f"{launch.job_dir}:{JOB_MOUNT}:ro", "--bind", f"{launch.campaign}:{CAMPAIGN_MOUNT}:rw",
            "--bind", f"{launch.store}:{STORE_MOUNT}:ro",
            *([] if launch.network else ["--net", "--network", "none"]), *gpu_flags,
            *(x for k, v in env.items() for x in ("--env", f"{k}={v}")),
            str(image), "python3", "-m", launch.module,
            *(a.replace("{campaign}", CAMPAIGN_MOUNT).replace("{store}", STORE_MOUNT) for a in launch.args)]


class ApptainerRuntime:
    name = "apptainer"
    gaps = GAPS

    def __init__(self, *, images: dict[str, str] | None = None, flavour: str = "gpu", **_: object) -> None:
        self._images = images or {}  # kind -> SIF, named explicitly
        self.flavour = flavour
        self._checked: dict[str, str] = {}

    def _locked(self, kind: str) -> tuple[str | None, dict[str, Any]]:
        """(the lock's image id for KIND, its apptainer export entry)."""
        import json

        from trace_tui.images import images_lock_path

        path = images_lock_path()
        read = read_image_lock(path)
        export: Any = {}
        if read.status == "ok":
            try:
                export = ((json.loads(path.read_text(encoding="utf-8")).get("exports") or {}).get(self.name) or {})
                export = export.get(kind) or {}
            except (OSError, ValueError, AttributeError):
                export = {}
        return (read.entries.get(kind) or {}).get("id"), export if isinstance(export, dict) else {}

    def image_path(self, kind: str) -> Path:
        named = os.environ.get(f"TRACE_TUI_IMAGE_{kind.upper()}") or self._images.get(kind)
        if named:
            return Path(named)
        _, export = self._locked(kind)
        if export.get("format") != "sif" or not export.get("path"):
            from trace_tui.images import images_lock_path

            raise RequirementsError(f"the image lock ({images_lock_path()}) names no SIF for the {kind} image",
                                    hint=EXPORT_HINT)
        return Path(export["path"])

    def image_id(self, kind: str | None) -> str:
        """The Docker image id the SIF was built from (what a job's inputs hash), once its sha256 is the lock's."""
        if kind is None:
            return "host"
        if kind in self._checked:
            return self._checked[kind]
        sif = self.image_path(kind)
        locked_id, export = self._locked(kind)
        if not sif.is_file():
            raise RequirementsError(f"the {kind} image {sif} is missing", hint=EXPORT_HINT)
        if export.get("path") and Path(export["path"]) == sif:
            if sha256_file(sif) != export.get("sha256"):
                raise RequirementsError(f"{sif} is not the SIF the image lock records (its sha256 differs)",
                                        hint=EXPORT_HINT)
            if locked_id and export.get("source_id") != locked_id:
                raise RequirementsError(f"{sif} was built from {str(export.get('source_id'))[:19]}, the image lock "
                                        f"names {locked_id[:19]}", hint=EXPORT_HINT)
            self._checked[kind] = str(export.get("source_id"))
        else:  # named explicitly: its own identity
            self._checked[kind] = "sif:sha256:" + sha256_file(sif)
        return self._checked[kind]

    def check(self, image_kinds: set[str], *, gpus: bool) -> list[str]:
        if apptainer_executable() is None:
            return [RequirementsError("neither apptainer nor singularity is installed", hint=INSTALL_HINT).line()]
        problems = []
        for kind in sorted(image_kinds):
            try:
                self.image_id(kind)
            except RequirementsError as exc:
                problems.append(exc.line())
        return problems

    def gpu_settings(self, gpus: list[int]) -> dict[str, Any]:
        return {"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in gpus), "flags": ["--nv"]}

    def start(self, launch: Launch) -> LocalHandle:
        assert launch.image is not None, "host steps run on the local runtime"
        exe = apptainer_executable()
        if exe is None:
            raise RequirementsError("neither apptainer nor singularity is installed", hint=INSTALL_HINT)
        image = self.image_path(launch.image)
        self.image_id(launch.image)
        (launch.output_dir or launch.campaign / "outputs").mkdir(parents=True, exist_ok=True)
        launch.store.mkdir(parents=True, exist_ok=True)
        launch.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open_append(launch.log_path)
        proc = subprocess.Popen(apptainer_command(launch, image, exe=exe), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/",
                                env={k: v for k, v in os.environ.items() if k in ("PATH", "USER", "HOME", "LANG")},
                                start_new_session=True, preexec_fn=_die_with_parent)
        return LocalHandle(proc, log)

    def cleanup(self, campaign_id: str, *, keep_owner: str | None = None) -> int:
        return 0  # the stage dies with its runner (PR_SET_PDEATHSIG on apptainer's starter)
