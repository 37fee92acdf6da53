"""Where stage workers run: Docker containers (``DockerRuntime``) or local subprocesses (``LocalRuntime``)."""

from __future__ import annotations

from typing import Any

from trace_tui.runtime.base import ExitInfo, Handle, Launch, Runtime

__all__ = ["DockerRuntime", "ExitInfo", "Handle", "Launch", "LocalRuntime", "Runtime", "make_runtime"]


def __getattr__(name: str) -> Any:  # lazy: docker-py is imported only when Docker is used
    if name == "DockerRuntime":
        from trace_tui.runtime.docker import DockerRuntime

        return DockerRuntime
    if name == "LocalRuntime":
        from trace_tui.runtime.local import LocalRuntime

        return LocalRuntime
    raise AttributeError(name)


def make_runtime(kind: str | None, **kwargs: Any) -> Runtime:
    """``docker`` / ``local``; None picks Docker when its engine answers, else local."""
    if kind == "local":
        from trace_tui.runtime.local import LocalRuntime

        return LocalRuntime(**kwargs)
    from trace_tui.runtime.docker import DockerRuntime, docker_available

    if kind == "docker" or docker_available():
        return DockerRuntime(**kwargs)
    from trace_tui.runtime.local import LocalRuntime

    return LocalRuntime(**kwargs)
