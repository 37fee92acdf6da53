"""Messages that background workers post to the UI thread."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    from trace_tui.engine.campaign_list import CampaignSummary
    from trace_tui.hardware import HardwareReport, StepCheck
    from trace_tui.recipe.schema import ResolvedRecipe
    from trace_tui.service.campaigns import OpenedCampaign
    from trace_tui.tui.backends import GpuSample
    from trace_tui.tui.views import HardwareView, VerifyView


class HardwareReady(Message):
    """The hardware probe (and the recipe checks against it) finished."""

    def __init__(self, view: HardwareView, report: HardwareReport | None, error: str = "") -> None:
        super().__init__()
        self.view = view
        self.report = report  # None: the probe failed (``error`` says why)
        self.error = error


class RuntimesFound(Message):
    """The container runtimes this host has, one line each (after the hardware probe: they take longer)."""

    def __init__(self, lines: list[str], error: str = "") -> None:
        super().__init__()
        self.lines = lines
        self.error = error


class EngineEvents(Message):
    """Doorbell: events are waiting in the run's EventPump (one message per batch, not per event)."""


class RunFinished(Message):
    """The runner returned (completed, failed or cancelled) or raised."""

    def __init__(self, outcome: str, detail: str = "") -> None:
        super().__init__()
        self.outcome = outcome  # completed | failed | cancelled | error
        self.detail = detail


class GpuSamples(Message):
    def __init__(self, samples: list[GpuSample]) -> None:
        super().__init__()
        self.samples = samples


class VerifyReady(Message):
    def __init__(self, view: VerifyView | None, error: str = "") -> None:
        super().__init__()
        self.view = view
        self.error = error


class PreviewReady(Message):
    def __init__(self, resolved: ResolvedRecipe | None, preview_lines: list[str], checks: list[StepCheck],
                 error: str = "") -> None:
        super().__init__()
        self.resolved = resolved
        self.preview_lines = preview_lines
        self.checks = checks
        self.error = error


class CampaignRead(Message):
    """A read-only look at a campaign another process is running (reattach)."""

    def __init__(self, opened: OpenedCampaign | None, error: str = "") -> None:
        super().__init__()
        self.opened = opened
        self.error = error


class LogTail(Message):
    """The last lines of the selected step's log file."""

    def __init__(self, step: str, path: str, lines: list[str], cut: bool = False) -> None:
        super().__init__()
        self.step = step
        self.path = path
        self.lines = lines
        self.cut = cut  # lines before these were left out


class ClusterRead(Message):
    """A sharded campaign's status (the dict `status --json` prints), or why it could not be read."""

    def __init__(self, status: dict[str, Any] | None, error: str = "") -> None:
        super().__init__()
        self.status = status
        self.error = error


class ClusterDone(Message):
    """A submission or a cancel of a sharded campaign returned: what to say on the status line."""

    def __init__(self, action: str, text: str, error: bool = False) -> None:
        super().__init__()
        self.action = action  # submit | cancel
        self.text = text
        self.error = error


class SchedulerChanged(Message):
    """Where runs go was changed (the screen that says it redraws)."""


class CampaignsRead(Message):
    """The campaigns under the home, summarised (trace_tui.engine.campaign_list), or why they could not be read."""

    def __init__(self, summaries: list[CampaignSummary], error: str = "") -> None:
        super().__init__()
        self.summaries = summaries
        self.error = error
