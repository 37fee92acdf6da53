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
from pathlib import Path
from typing import Any

from trace_tui.common.digest import sha256_file
from trace_tui.common.images_lock import image_export, read_image_lock
from trace_tui.errors import RequirementsError
from trace_tui.runtime.base import (
    CAMPAIGN_MOUNT,
    JOB_MOUNT,
    STORE_MOUNT,
    Launch,
    contract_args,
    contract_env,
    named_image,
)
from trace_tui.runtime.docker import visible_gpus_env
from trace_tui.runtime.local import LocalHandle, spawn

EXECUTABLES = ("apptainer", "singularity")
INSTALL_HINT = "install Apptainer (https://apptainer.org/docs/admin/main/installation.html)"
EXPORT_HINT = "build the SIFs: `trace-tui images export --runtime apptainer [--from BUNDLE/images/stages.tar]`"
GAPS = ("no memory limit (Apptainer's --memory needs the site's cgroup delegation)", "no process limit",
        "GPUs chosen by CUDA_VISIBLE_DEVICES, not isolated as devices")


def apptainer_executable() -> str | None:
    return next((exe for name in EXECUTABLES if (exe := shutil.which(name))), None)


def apptainer_command(launch: Launch, image: Path, *, exe: str = "apptainer") -> list[str]:
    """The whole command line of one stage (pure)."""
    env = {**contract_env(launch), **visible_gpus_env(launch.gpus)}
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
            *([] if launch.network else ["--net", "--network", "none"]), *(["--nv"] if launch.gpus else []),
            *(x for k, v in env.items() for x in ("--env", f"{k}={v}")),
            str(image), "python3", "-m", launch.module, *contract_args(launch)]


class ApptainerRuntime:
    name = "apptainer"
    gaps = GAPS

    def __init__(self, *, images: dict[str, str] | None = None, flavour: str = "gpu", **_: object) -> None:
        self._images = images or {}  # kind -> SIF, named explicitly
        self.flavour = flavour
        self._checked: dict[str, str] = {}

    def _locked(self, kind: str) -> tuple[str | None, dict[str, Any]]:
        """(the lock's image id for KIND, its apptainer export entry)."""
        from trace_tui.images import images_lock_path

        path = images_lock_path()
        return (read_image_lock(path).entries.get(kind) or {}).get("id"), image_export(path, self.name, kind)

    def image_path(self, kind: str) -> Path:
        named = named_image(kind, self._images)
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
        # the host's environment stays out: an APPTAINER_* variable there would set flags
        return spawn(apptainer_command(launch, image, exe=exe),
                     {k: v for k, v in os.environ.items() if k in ("PATH", "USER", "HOME", "LANG")}, launch.log_path)

    def cleanup(self, campaign_id: str, *, keep_owner: str | None = None) -> int:
        return 0  # the stage dies with its runner (PR_SET_PDEATHSIG on apptainer's starter)
