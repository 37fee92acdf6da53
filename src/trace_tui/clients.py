"""The clients of what the appliance talks to outside Python: the Docker Engine (docker-py) and NVML (pynvml).
One factory each, so every command, the runtime and the TUI reach them the same way and fail with the same line.
The packages are imported here, when a client is asked for: each costs more to import than a short command runs.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from trace_tui.errors import RequirementsError

if TYPE_CHECKING:  # pragma: no cover
    import docker

DAEMON_HINT = "start it (`sudo systemctl start docker`), or run with `--runtime local`"


def load_nvml() -> ModuleType | None:
    """The NVML binding (pynvml, from nvidia-ml-py); None where it is not installed. The driver's library is
    opened by nvmlInit, not here."""
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def docker_from_env(timeout: int = 60) -> docker.DockerClient:
    """The Docker Engine client of the environment (DOCKER_HOST, or the local socket), not yet checked; docker-py's
    own DockerException when the environment names no usable engine. TIMEOUT: seconds a read may wait (calls that
    move whole images need far more than the default)."""
    import docker

    return docker.from_env(timeout=timeout)


def docker_client(timeout: int = 60) -> docker.DockerClient:
    """The Docker Engine client, checked with a ping; one line naming the fix when the engine does not answer."""
    from docker.errors import DockerException

    try:
        client = docker_from_env(timeout)
        client.ping()
        return client
    except DockerException as exc:
        raise RequirementsError(f"the Docker engine is not reachable ({_short(exc)})", hint=DAEMON_HINT) from None


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
