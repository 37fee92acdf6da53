"""The service layer: what the faces (the command line, the TUI) ask for, as typed requests, and the one place
of each policy they share: the campaign folder, the requirements check, the GPU plan, opening a campaign and
whether it is live, the Slurm submission. Below it the engine, verify and the cluster code take plain values,
never a parsed command line; above it the faces turn flags or forms into requests and render the outcomes."""

from __future__ import annotations

from types import ModuleType


def load_session() -> ModuleType:
    """trace_tui.service.session, the half of the service that loads pydantic's models: the TUI's backends take it
    from here on first use, after the first screen is painted (measured in trace_tui.tui.app)."""
    from trace_tui.service import session

    return session
