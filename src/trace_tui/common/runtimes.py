"""The names of the places stage workers run (stdlib only: the command line, campaign files and the TUI
read them without importing a runtime)."""

from __future__ import annotations

# Container runtimes run the pinned stage images; `local` runs the same workers as processes on this host.
CONTAINER_RUNTIMES: tuple[str, ...] = ("docker", "podman", "charliecloud", "apptainer")
RUNTIME_NAMES: tuple[str, ...] = (*CONTAINER_RUNTIMES, "local")


def known_runtime(name: object) -> str | None:
    """NAME when it is a runtime trace-tui runs steps in, else None (a campaign recorded by another version)."""
    return name if isinstance(name, str) and name in RUNTIME_NAMES else None
