"""What the runner needs from a runtime: start a stage worker, read its stdout lines, wait, stop.

A runtime receives a :class:`Launch` (everything about one job that is not the
job spec itself) and returns a :class:`Handle`. ``Handle.stop()`` may be called
from any thread while another thread reads ``lines()``.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

LABEL_CAMPAIGN = "org.trace-tui.campaign"
LABEL_STEP = "org.trace-tui.step"
LABEL_SLICE = "org.trace-tui.slice"
LABEL_OWNER = "org.trace-tui.owner"

# In-container paths of the stage contract (SPEC §3).
JOB_MOUNT = "/job"
CAMPAIGN_MOUNT = "/campaign"
STORE_MOUNT = "/store"


@dataclass
class Launch:
    step: str
    slice: str
    module: str
    args: list[str]
    job_dir: Path  # host directory holding job.json
    campaign: Path
    store: Path
    log_path: Path  # stderr and non-event stdout go here (host side)
    image: str | None = None  # image kind ("train" | "infer" | "score") or None for the host
    network: bool = False
    gpus: list[int] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    mem_limit: str | None = None
    env: dict[str, str] = field(default_factory=dict)  # the step's environment toggles
    output_dir: Path | None = None  # host path the worker writes (made writable for the container user)


def named_image(kind: str, images: dict[str, str]) -> str | None:
    """The image of KIND named explicitly (TRACE_TUI_IMAGE_<KIND>, or given to the runtime), which the lock then
    does not decide; None: the lock's."""
    return os.environ.get(f"TRACE_TUI_IMAGE_{kind.upper()}") or images.get(kind)


def contract_args(launch: "Launch") -> list[str]:
    """The worker's arguments with the campaign and store at their in-container paths."""
    return [a.replace("{campaign}", CAMPAIGN_MOUNT).replace("{store}", STORE_MOUNT) for a in launch.args]


# A step without network must not even try: the hub libraries fail fast and say so.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def step_env(launch: "Launch") -> dict[str, str]:
    """The step's environment toggles, plus the offline switches when it has no network."""
    return {**launch.env, **({} if launch.network else OFFLINE_ENV)}


def contract_env(launch: "Launch") -> dict[str, str]:
    """A contained stage's environment (SPEC §3): the step's own, where the job spec, campaign and store are,
    unbuffered output, HOME in the scratch /tmp."""
    return {**step_env(launch), "TRACE_TUI_JOB": f"{JOB_MOUNT}/job.json", "TRACE_TUI_CAMPAIGN": CAMPAIGN_MOUNT,
            "TRACE_TUI_STORE": STORE_MOUNT, "PYTHONUNBUFFERED": "1", "HOME": "/tmp"}


@dataclass(frozen=True)
class ExitInfo:
    exit_code: int
    oom_killed: bool = False
    stopped: bool = False  # we stopped it (cancel)
    tail: tuple[str, ...] = ()  # last lines of stderr / log output

    def describe(self) -> str:
        if self.stopped:
            return "stopped"
        why = "killed by the out-of-memory limit (OOM)" if self.oom_killed else f"exit code {self.exit_code}"
        return why


class Handle(Protocol):
    def lines(self) -> Iterator[str]: ...

    def wait(self) -> ExitInfo: ...

    def stop(self) -> None: ...


class Runtime(Protocol):
    name: str

    def check(self, image_kinds: set[str], *, gpus: bool) -> list[str]:
        """Problems that stop a run before anything starts: 'what is missing (command that fixes it)'."""
        ...

    def image_id(self, kind: str | None) -> str: ...

    def start(self, launch: Launch) -> Handle: ...

    def cleanup(self, campaign_id: str, *, keep_owner: str | None = None) -> int:
        """Remove this campaign's leftovers (containers of a killed runner). Returns how many."""
        ...


class Tail:
    """The last N lines of a stream, for failure messages."""

    def __init__(self, n: int = 20) -> None:
        self._lines: collections.deque[str] = collections.deque(maxlen=n)

    def add(self, line: str) -> None:
        if line.strip():
            self._lines.append(line.rstrip("\n"))

    def lines(self) -> tuple[str, ...]:
        return tuple(self._lines)


def split_lines(chunks: Iterator[bytes]) -> Iterator[str]:
    """Chunks of bytes (a socket, a pipe) as complete text lines; a last unterminated line too."""
    buf = b""
    for chunk in chunks:
        if not chunk:
            continue
        buf += chunk
        if b"\n" not in chunk:
            continue
        *complete, buf = buf.split(b"\n")
        for raw in complete:
            yield raw.decode("utf-8", errors="replace")
    if buf:
        yield buf.decode("utf-8", errors="replace")
