"""The TUI's way to Slurm: the scheduler the user chose, and the cluster module behind it.

The run screen submits, follows and cancels a sharded campaign through exactly the functions the
command line uses (``trace_tui.service.submit``): ``prepare_submission`` + ``submit_prepared``
(`trace-tui --recipe NAME --scheduler slurm`), ``cluster_status`` (`trace-tui status --campaign DIR
--json` for a sharded parent) and ``trace_tui.engine.cluster.cancel_campaign`` (Ctrl-C while the command
line follows the jobs).
Screens see only :class:`ClusterBackend`'s callables, never the engine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_tui.errors import UsageError
from trace_tui.service import load_session
from trace_tui.service.requests import RunRequest, SlurmOptions, SubmitRequest

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.engine.cluster import Submitted
    from trace_tui.recipe.schema import ResolvedRecipe

SCHEDULERS = ("none", "slurm")  # the command line's --scheduler values: none = this machine


@dataclass(frozen=True)
class SchedulerChoice:
    """Where a run goes: this machine, or Slurm with the site's options (the command line's flags)."""

    scheduler: str = "none"
    partition: str | None = None
    account: str | None = None
    gpus_per_node: int | None = None  # None: what the recipe's steps need
    time: str | None = None
    max_parallel: int | None = None
    shard_by: str | None = None  # None: the recipe's default split

    @property
    def slurm(self) -> bool:
        return self.scheduler == "slurm"

    def cli_args(self) -> list[str]:
        """The flags that choose the same from the command line (for a live command line)."""
        if not self.slurm:
            return []
        out = ["--scheduler", "slurm"]
        for name in ("shard_by", "partition", "account", "gpus_per_node", "time", "max_parallel"):
            value = getattr(self, name)
            if value is not None:
                out += ["--" + name.replace("_", "-"), str(value)]
        return out

    def describe(self) -> str:
        if not self.slurm:
            return "this machine"
        opts = " ".join(self.cli_args()[2:])
        return "Slurm" + (f" ({opts})" if opts else " (the site's defaults)")

    @classmethod
    def from_options(cls, slurm: SlurmOptions | None) -> SchedulerChoice:
        """The command line's choice: Slurm with these options, or this machine (None)."""
        if slurm is None:
            return cls()
        return cls(scheduler="slurm", **{f.name: getattr(slurm, f.name) for f in dataclasses.fields(SlurmOptions)})

    def slurm_options(self) -> SlurmOptions:
        return SlurmOptions(**{f.name: getattr(self, f.name) for f in dataclasses.fields(SlurmOptions)})

    @classmethod
    def from_form(cls, scheduler: str, **texts: str) -> SchedulerChoice:
        """The run screen's form: strings as typed (blank = not given); one-line errors naming the field."""
        if scheduler not in SCHEDULERS:
            raise UsageError(f"scheduler {scheduler!r} is not one of {', '.join(SCHEDULERS)}")
        values: dict[str, Any] = {}
        for name, text in texts.items():
            text = (text or "").strip()
            if not text:
                continue
            if name in ("gpus_per_node", "max_parallel"):
                flag = "--" + name.replace("_", "-")
                try:
                    number = int(text)
                except ValueError:
                    raise UsageError(f"{flag} {text!r} is not a whole number",
                                     hint=f"type a number in the {flag} field, or leave it blank") from None
                low = 0 if name == "gpus_per_node" else 1
                if number < low:
                    raise UsageError(f"{flag} {number}: give {low} or more")
                values[name] = number
            else:
                values[name] = text
        return cls(scheduler=scheduler, **values)


@dataclass
class OpenedCluster:
    """An existing sharded parent: its recipe, and what its last submission chose (so `r` repeats it)."""

    path: Path
    resolved: ResolvedRecipe | None
    choice: SchedulerChoice
    run_options: dict[str, Any] = field(default_factory=dict)  # runtime, offline, local_model, benchmarks
    problem: str = ""  # why it cannot be resubmitted from here (resolved is None then)


@dataclass
class ClusterBackend:
    is_sharded: Callable[[Path], bool]
    # (resolved, choice, campaign_dir, run_options) -> what the submission did
    submit: Callable[..., Submitted]
    # campaign_dir -> the dict `trace-tui status --campaign DIR --json` prints
    status: Callable[[Path], dict[str, Any]]
    # campaign_dir -> the job ids scancelled
    cancel: Callable[[Path], list[str]]
    open: Callable[[Path], OpenedCluster]


def submission_request(request: RunRequest | None, choice: SchedulerChoice, campaign_dir: Path,
                       run_options: dict[str, Any] | None = None) -> SubmitRequest:
    """The submission the command line would make: the TUI's own request, the choice, and a resumed campaign's
    recorded run options (runtime, offline, local_model, benchmarks) where the TUI was not given its own."""
    request = request or RunRequest()
    recorded = run_options or {}
    opts = request.options
    options = dataclasses.replace(
        opts, campaign=str(campaign_dir), runtime=opts.runtime or recorded.get("runtime"),
        offline=opts.offline or bool(recorded.get("offline")),
        local_models=opts.local_models or tuple(recorded.get("local_model") or ()))
    selection = request.selection
    if not selection.benchmarks and recorded.get("benchmarks"):
        selection = dataclasses.replace(selection, benchmarks=tuple(recorded["benchmarks"]))
    run = dataclasses.replace(request, options=options, selection=selection, yes=True)
    return SubmitRequest(run=run, slurm=choice.slurm_options(), dry_run=False, no_wait=True)


def open_sharded(path: Path, home: Path | None = None) -> OpenedCluster:
    """A sharded parent read without writing: shards.json, the last submission's options, and its recipe
    resolved again as the same command line would (`r` resubmits with it); resolved is None, and
    ``problem`` says why, where that is no longer the campaign's recipe."""
    session = load_session()
    path = Path(path).expanduser().resolve()
    plan, last = session.read_sharded(path)
    choice = SchedulerChoice(scheduler="slurm", partition=last.get("partition"), account=last.get("account"),
                             gpus_per_node=last.get("gpus_per_node"), time=last.get("time"),
                             max_parallel=last.get("max_parallel"), shard_by=plan.shard_by)
    run_options = {k: last[k] for k in ("runtime", "offline", "local_model") if last.get(k)}
    if plan.narrowed_benchmarks:
        run_options["benchmarks"] = list(plan.benchmarks)
    resolved, problem = None, ""
    try:
        resolved = session.resolve_again(plan, run_options.get("local_model"), home)
    except Exception as exc:  # noqa: BLE001 - shown on the screen; the campaign is still followed
        problem = exc.line() if hasattr(exc, "line") else f"{type(exc).__name__}: {exc}"
    if resolved is not None and resolved.config_sha256 != plan.config_sha256:
        resolved, problem = None, (f"recipe {plan.recipe} has changed since {path} was submitted "
                                   f"(configuration {plan.config_sha256[:12]}, now {resolved.config_sha256[:12]})")
    return OpenedCluster(path=path, resolved=resolved, choice=choice, run_options=run_options, problem=problem)


def cluster_backend(request: RunRequest | None = None) -> ClusterBackend:
    """The real one: the service's Slurm submission and the engine's cluster code, over Slurm's own commands."""

    def submit(resolved: ResolvedRecipe, choice: SchedulerChoice, campaign_dir: Path,
               run_options: dict[str, Any] | None = None) -> Submitted:
        if not choice.slurm:
            raise UsageError("this run is not for Slurm", hint="choose the Slurm scheduler first")
        return load_session().submit(submission_request(request, choice, campaign_dir, run_options), resolved)

    def status(path: Path) -> dict[str, Any]:
        return load_session().cluster_status(path)

    def reopen(path: Path) -> OpenedCluster:
        return open_sharded(path, request.options.home if request else None)

    def is_sharded(path: Path) -> bool:
        return load_session().is_sharded(path)

    def cancel(path: Path) -> list[str]:
        return load_session().cancel_campaign(Path(path))

    return ClusterBackend(is_sharded=is_sharded, submit=submit, status=status, cancel=cancel, open=reopen)


__all__ = ["ClusterBackend", "OpenedCluster", "SCHEDULERS", "SchedulerChoice", "cluster_backend", "open_sharded",
           "submission_request"]
