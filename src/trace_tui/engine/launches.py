"""What the runtime is asked to start: each job's spec written to its job.json, and the Launch around it.

A per-slice or whole-step job gets one worker with its own spec; a keep_loaded step's GPU group gets
one worker whose job.json lists, in order, the specs of every slice dealt to it (each slice's spec is
also in that slice's own job.json, as a per-slice job's is).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_tui.common.atomic import atomic_write_json
from trace_tui.common.safe_write import NotWritten, check_not_link, directory_inside, links_under
from trace_tui.engine.campaign import Campaign
from trace_tui.engine.planner import PlannedJob, job_spec
from trace_tui.errors import UsageError
from trace_tui.recipe.schema import LocalModel, entry_point_problem
from trace_tui.release import release_lock
from trace_tui.runtime.base import LABEL_CAMPAIGN, Launch
from trace_tui.store import Store
from trace_tui.store.names import expand_needs

if TYPE_CHECKING:  # the recipe schema (pydantic) is imported by whoever builds a Runner, not here
    from trace_tui.gpu_plan import StepGpus
    from trace_tui.recipe.schema import ResolvedRecipe, Step

ExtraInputs = Callable[[Any, PlannedJob, Any], dict[str, Any]]


class Launches:
    def __init__(self, resolved: ResolvedRecipe, campaign: Campaign, *, store: Path, offline: bool,
                 mem_limit: str | None, gpu_groups: list[list[int]],
                 step_gpus: Callable[[Step], StepGpus | None], extra_inputs: ExtraInputs | None) -> None:
        self.resolved = resolved
        self.campaign = campaign
        self.store = store
        self.offline = offline
        self.mem_limit = mem_limit
        self.gpu_groups = gpu_groups
        self.step_gpus = step_gpus  # the run's GPU plan for a step, or None
        self.extra_inputs = extra_inputs

    def arguments(self, step: Step) -> list[str]:
        """The step's arguments with the recipe's placeholders filled in (see expand_arguments)."""
        return expand_arguments(list(step.run[1:]), self.resolved, self._store_relpath)

    def _store_relpath(self, need: str) -> str:
        entries = expand_needs([need], release_lock(), models=[m.id for m in self.resolved.models],
                               benchmarks=[b.key for b in self.resolved.benchmarks])
        if len(entries) != 1:
            raise ValueError(f"{{store:{need}}} names {len(entries)} store entries; it must name one")
        return Store(self.store).relpath_of(entries[0])

    def job_spec(self, job: PlannedJob, gpus: list[int]) -> dict[str, Any]:
        return job_spec(self.resolved, self.resolved.recipe, self.campaign, job, gpus,
                        planned=self.step_gpus(job.step), gpu_groups=self.gpu_groups, offline=self.offline,
                        extra_inputs=self.extra_inputs)

    def write_spec(self, job: PlannedJob, gpus: list[int]) -> dict[str, Any]:
        """The job's spec into its job.json (and its output folder made); returns the spec."""
        c = self.campaign
        spec = self.job_spec(job, gpus)
        job_dir = self._folder(c.job_dir(job.step.id, job.slice))
        atomic_write_json(job_dir / "job.json", spec)
        os.chmod(job_dir / "job.json", 0o644)  # the container user must read it
        out = directory_inside(c.path, c.output_rel(job.step.id, job.slice))
        planted = links_under(out, ".")  # a resumed job's folder: what the worker writes goes through none
        if planted is not None:
            raise NotWritten(planted, "is a link in the job's output folder; a job writes only inside the campaign, "
                                      "never through a link: remove the link")
        return spec

    def _folder(self, path: Path) -> Path:
        """PATH, a folder of the campaign, made where missing: never a link (NotWritten), never outside it."""
        return directory_inside(self.campaign.path, path.relative_to(self.campaign.path))

    def for_job(self, job: PlannedJob, gpus: list[int]) -> Launch:
        """Write the job's spec and return what the runtime is asked to start for it on host GPUs ``gpus``."""
        c = self.campaign
        self.write_spec(job, gpus)
        return self._launch(job.step, job.slice, gpus, c.path / c.output_rel(job.step.id, job.slice))

    def for_batch(self, jobs: list[PlannedJob], gpus: list[int], worker: str) -> Launch:
        """A keep_loaded step's worker for ``jobs`` on host GPUs ``gpus``: each slice's spec in its own
        job.json (as a per-slice job has) and all of them, in order, as the worker's ``batch``."""
        c, step = self.campaign, jobs[0].step
        specs = [self.write_spec(j, gpus) for j in jobs]
        job_dir = self._folder(c.job_dir(step.id, worker))
        atomic_write_json(job_dir / "job.json", {"step": step.id, "recipe": self.resolved.recipe.name,
                                                 "worker": worker, "args": list(step.run[1:]),
                                                 "gpus": list(range(len(gpus))), "host_gpus": gpus, "batch": specs})
        os.chmod(job_dir / "job.json", 0o644)
        return self._launch(step, worker, gpus, c.path / "outputs" / step.id)

    def _launch(self, step: Step, name: str, gpus: list[int], output_dir: Path) -> Launch:
        """``name``: the job's slice, or a keep_loaded worker's name (its job.json folder and log)."""
        # The schema refuses such a step; a recipe object built past it (model_construct, model_copy) is
        # refused here, before anything starts.
        problem = entry_point_problem(list(step.run))
        if problem is not None:
            raise UsageError(f"step {step.id}: run {problem}", hint="a step runs only trace-tui's own workers")
        c = self.campaign
        self._folder(c.log_path(step.id, name).parent)  # the runtime appends the worker's log there
        check_not_link(c.log_path(step.id, name))
        return Launch(step=step.id, slice=name, module=step.run[0], args=self.arguments(step),
                      job_dir=c.job_dir(step.id, name), campaign=c.path, store=self.store,
                      log_path=c.log_path(step.id, name), image=step.image,
                      network=step.needs.network and not self.offline, gpus=gpus, labels={LABEL_CAMPAIGN: c.id},
                      mem_limit=self.mem_limit, env=dict(step.env), output_dir=output_dir)


def expand_arguments(args: list[str], resolved: ResolvedRecipe, store_relpath: Callable[[str], str]) -> list[str]:
    """A step's ``run`` arguments with the recipe placeholders a runtime does not fill in itself.

    - ``{store:NAME}``: the store path of the one entry NAME (``release``, ``judge``, a full entry
      name) stands for, as ``{store}/<path>``: each runtime then puts its store mount for ``{store}``,
      as it does ``{campaign}``.
    - ``{selection}`` (a whole argument): the run's resolved selection as the ``--models``,
      ``--seeds`` and ``--benchmarks`` flags of the fields the recipe selects, so a step that runs
      another recipe (eval-preview previews full; eval-setup fetches for full and validation) covers
      exactly what this run covers. The release models only: a local model is no release id.
    """
    out: list[str] = []
    for arg in args:
        if arg == "{selection}":
            out += selection_flags(resolved)
            continue
        while "{store:" in arg:
            start = arg.index("{store:")
            end = arg.index("}", start)
            arg = arg[:start] + "{store}/" + store_relpath(arg[start + 7:end]) + arg[end + 1:]
        out.append(arg)
    return out


def selection_flags(resolved: ResolvedRecipe) -> list[str]:
    sel = resolved.recipe.selection
    flags: list[str] = []
    models = [m.id for m in resolved.models if not isinstance(m, LocalModel)]
    if sel.models and models:
        flags += ["--models", *models]
    if sel.seeds and resolved.seeds:
        flags += ["--seeds", *(str(s) for s in resolved.seeds)]
    if sel.benchmarks and resolved.benchmarks:
        flags += ["--benchmarks", *(b.key for b in resolved.benchmarks)]
    return flags
