"""Where stage workers run: Docker containers (``DockerRuntime``), Podman containers (``PodmanRuntime``),
Charliecloud (``CharliecloudRuntime``) and Apptainer (``ApptainerRuntime``) containers, or local subprocesses
(``LocalRuntime``)."""

from __future__ import annotations

from typing import Any

from trace_tui.runtime.apptainer import ApptainerRuntime
from trace_tui.runtime.base import ExitInfo, Handle, Launch, Runtime
from trace_tui.runtime.charliecloud import CharliecloudRuntime
from trace_tui.runtime.docker import DockerRuntime, docker_available
from trace_tui.runtime.local import LocalRuntime
from trace_tui.runtime.podman import PodmanRuntime

__all__ = ["ApptainerRuntime", "CharliecloudRuntime", "DockerRuntime", "ExitInfo", "Handle", "Launch", "LocalRuntime",
           "PodmanRuntime", "Runtime", "make_runtime"]


def __getattr__(name: str) -> type[Runtime]:  # lazy: docker-py is imported only when Docker is used
    if name == "DockerRuntime":
        return DockerRuntime
    if name == "LocalRuntime":
        return LocalRuntime
    if name == "PodmanRuntime":
        return PodmanRuntime
    raise AttributeError(name)


def make_runtime(kind: str | None, **kwargs: Any) -> Runtime:
    """``docker`` / ``podman`` / ``charliecloud`` / ``apptainer`` / ``local``; None picks Docker when its engine
    answers, else local."""
    if kind == "local":
        return LocalRuntime(**kwargs)
    if kind == "podman":
        return PodmanRuntime(**kwargs)
    if kind == "charliecloud":
        return CharliecloudRuntime(**kwargs)
    if kind == "apptainer":
        return ApptainerRuntime(**kwargs)

    if kind == "docker" or docker_available():
        return DockerRuntime(**kwargs)

    return LocalRuntime(**kwargs)
