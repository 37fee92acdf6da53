"""A run's preflight, item by item: what `trace-tui --recipe NAME` checks before its first container starts,
each finding with the area it is about, so that a site sees which part is ready and which is not.

Areas:

- ``runtime``: the Docker engine answers (or the local runtime runs the steps as processes);
- ``images``: each stage image the recipe uses is the one the image lock names, by id, and of the flavour
  its steps need (a step on GPUs needs the gpu build);
- ``store``: each entry the recipe reads is present, its files at their recorded sizes, with its trust level;
  an entry one of the recipe's own steps makes is listed as such;
- ``network``: with ``--offline``, no step needs the network (every container then runs with network none);
- ``gpus`` and ``disk``: the hardware verdicts of each step (trace_tui.hardware).

A run refuses to start (exit 3) on any failed item; ``trace-tui --recipe NAME --check`` prints them all.
:func:`Preflight.problems` is the one list both use (service.requirements.requirement_problems).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from trace_tui.common.runtimes import CONTAINER_RUNTIMES
from trace_tui.engine.planner import needs_gpus
from trace_tui.hardware import check_recipe
from trace_tui.paths import store_dir
from trace_tui.release import release_lock
from trace_tui.store.store import Store, fix_command
from trace_tui.store import names as N
from trace_tui.store.trust import LOCAL, entry_trust, trust_reason

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.hardware.report import HardwareReport
    from trace_tui.recipe.schema import ResolvedRecipe
    from trace_tui.runtime.base import Runtime

Area = Literal["runtime", "images", "store", "network", "gpus", "disk"]
AREAS: tuple[Area, ...] = ("runtime", "images", "store", "network", "gpus", "disk")
Verdict = Literal["pass", "warn", "fail"]
_RANK = {"pass": 0, "warn": 1, "fail": 2}


class PreflightItem(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    area: Area
    subject: str  # what it is about: a store entry, a stage image, a step, the engine
    verdict: Verdict
    line: str  # one line: what was found; for a failure, what provides it


class Preflight(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    recipe: str
    runtime: str
    offline: bool
    items: list[PreflightItem]

    def problems(self) -> list[str]:
        """What stops the run, each with the command that provides it (in the order found)."""
        return [i.line for i in self.items if i.verdict == "fail"]

    def verdict(self, *areas: Area) -> Verdict:
        """The worst verdict of AREAS (all of them when none is named)."""
        chosen = [i.verdict for i in self.items if not areas or i.area in areas]
        return max(chosen, key=_RANK.__getitem__, default="pass")

    def lines(self) -> list[str]:
        problems = self.problems()
        failing = sorted({i.area for i in self.items if i.verdict == "fail"}, key=AREAS.index)
        head = (f"recipe {self.recipe} can run here" if not problems else
                f"recipe {self.recipe} cannot run here: {len(problems)} problem{'s' if len(problems) != 1 else ''} "
                f"({', '.join(failing)})")
        out = [f"{head} (runtime {self.runtime}{', offline' if self.offline else ''})"]
        for area in AREAS:
            out += [f"  {i.area:<8} {i.verdict:<4}  {i.line}" for i in self.items if i.area == area]
        return out


def preflight(resolved: ResolvedRecipe, runtime: Runtime, home: Path, report: HardwareReport | None, *,
              offline: bool = False) -> Preflight:
    """Every item a run of RESOLVED on RUNTIME checks before it starts (REPORT: the hardware probe; None: no GPU
    or disk items)."""
    items: list[PreflightItem] = []
    images = sorted({s.image for s in resolved.recipe.steps if s.image})
    gpu_images = {s.image for s in resolved.recipe.steps if s.image and needs_gpus(s)}
    engine = runtime.check(set(), gpus=False)
    items += [PreflightItem(area="runtime", subject=runtime.name, verdict="fail", line=p) for p in engine]
    if not engine:
        items.append(PreflightItem(area="runtime", subject=runtime.name, verdict="pass", line=_runtime_line(runtime,
                                                                                                            report)))
        items += _image_items(runtime, images, gpu_images, report)
        items += [PreflightItem(area="gpus", subject=runtime.name, verdict="fail", line=p)
                  for p in runtime.check(set(), gpus=True) if gpu_images]
    if report is not None:
        items += _hardware_items(resolved, report, runtime.name)
    items += _store_items(resolved, home)
    items += _network_items(resolved, runtime.name, offline)
    return Preflight(recipe=resolved.recipe.name, runtime=runtime.name, offline=offline, items=items)


def _runtime_line(runtime: Runtime, report: HardwareReport | None) -> str:
    if runtime.name not in CONTAINER_RUNTIMES:
        return f"runtime {runtime.name}: each step runs as a process with this host's Python; no image is used"
    if runtime.name == "podman":
        return "podman reachable: the locked images run from its own storage"
    if runtime.name != "docker":
        gaps = getattr(runtime, "gaps", ())
        return (f"{runtime.name}: the locked images run from their exports the image lock records"
                + (f"; less isolation than Docker: {'; '.join(gaps)}" if gaps else ""))
    return f"Docker engine reachable ({report.docker.message})" if report is not None else "Docker engine reachable"


def _image_items(runtime: Runtime, images: list[str], gpu_images: set[str],
                 report: HardwareReport | None) -> list[PreflightItem]:
    """Each stage image: present, the image the run starts being the one the lock names (by id), and the gpu
    build for a step on GPUs (unless the image was named explicitly, overriding the lock)."""
    if runtime.name not in CONTAINER_RUNTIMES:
        return []
    out = []
    for kind in images:
        missing = runtime.check({kind}, gpus=False)
        if missing:
            out += [PreflightItem(area="images", subject=kind, verdict="fail", line=p) for p in missing]
            continue
        if runtime.name != "docker":  # the hardware probe reads Docker's images: this runtime found its own
            where = f"in {runtime.name}'s storage" if runtime.name == "podman" else \
                f"exported for {runtime.name}"
            out.append(PreflightItem(area="images", subject=kind, verdict="pass",
                                     line=f"image {kind}: {runtime.image_id(kind)[:19]} {where}"))
            continue
        status = report.docker.image(kind) if report is not None else None
        runs = runtime.image_id(kind)
        from_lock = getattr(runtime, "image_from_lock", lambda _k: True)(kind)
        if status is None or not from_lock:
            out.append(PreflightItem(area="images", subject=kind, verdict="pass",
                                     line=f"image {kind}: {runs[:19]}" + ("" if from_lock else " (named explicitly, "
                                                                                                 "not by the lock)")))
        elif runs != status.locked_id:
            out.append(PreflightItem(area="images", subject=kind, verdict="warn",
                                     line=f"image {kind}: the run would start {runs[:19]}, the image lock records "
                                          f"{str(status.locked_id)[:19]} (rebuild with `make appliance`, or import "
                                          "the bundle again: `trace-tui bundle import DIR`)"))
        else:
            out.append(PreflightItem(area="images", subject=kind, verdict="pass",
                                     line=f"image {kind}: {status.tag or kind} {runs[:19]} as locked"))
        if from_lock and kind in gpu_images and report is not None and report.docker.lock_flavor == "cpu":
            out.append(PreflightItem(area="images", subject=kind, verdict="fail",
                                     line=f"image {kind} is the cpu flavour; this recipe's steps on GPUs need the gpu "
                                          "build (`make appliance FLAVOR=gpu` on a host with the NVIDIA runtime)"))
    return out


def _hardware_items(resolved: ResolvedRecipe, report: HardwareReport, runtime: str) -> list[PreflightItem]:
    """Each step's GPU and disk findings (its images, Docker and network findings are the items above)."""
    out = []
    for chk in check_recipe(resolved, report, runtime=runtime):
        for note, area in zip(chk.notes, chk.areas):
            verdict, _, text = note.partition(": ")
            # the Docker GPU runtime: the runtime's own check says it, once
            if area in ("gpus", "disk") and not text.startswith("Docker has no GPU runtime"):
                out.append(PreflightItem(area=area, subject=chk.step, verdict=verdict,  # type: ignore[arg-type]
                                         line=f"{chk.step}: {text}"))
    return out


def _store_items(resolved: ResolvedRecipe, home: Path) -> list[PreflightItem]:
    made = {o: s.id for s in resolved.recipe.steps for o in s.outputs}
    store = Store(store_dir(home))
    lock = release_lock()
    out = []
    for name in resolved.all_store_entries():
        if name in made:
            out.append(PreflightItem(area="store", subject=name, verdict="pass",
                                     line=f"{name}: made by the recipe's own step {made[name]}"))
            continue
        check = store.check(name)
        record = store.record(name) if check.ok else None
        if record is None:
            problem = "" if check.problems == ["missing"] else f" ({check.problems[0]})"
            out.append(PreflightItem(area="store", subject=name, verdict="fail",
                                     line=f"the store lacks {name}{problem} (run `{fix_command(name)}`)"))
            continue
        if N.parse(name).pinned and entry_trust(record, lock) == LOCAL:
            # files that vouch only for themselves (a copied Hugging Face cache of a model whose hashes the
            # release does not publish) are not the pinned model as far as anyone can tell
            out.append(PreflightItem(area="store", subject=name, verdict="fail",
                                     line=f"the store's {name} is local trust: nothing but its own files vouches for "
                                          f"them (imported from {record.source.imported_from or 'a copy'}; the release "
                                          f"publishes no hashes for it); run `trace-tui store fetch --entry {name}`, "
                                          "or import it from a bundle signed by a key this site trusts"))
            continue
        files = "1 file at its recorded size" if len(record.files) == 1 else \
            f"{len(record.files)} files at their recorded sizes"
        out.append(PreflightItem(area="store", subject=name, verdict="pass",
                                 line=f"{name}: present, {files}; {trust_reason(record, lock)}"))
    return out


def _network_items(resolved: ResolvedRecipe, runtime: str, offline: bool) -> list[PreflightItem]:
    online = [s.id for s in resolved.recipe.steps if s.needs.network]
    if offline:
        out = [PreflightItem(area="network", subject=step, verdict="fail",
                             line=f"{step}: needs the network, and --offline gives no step any (run it on a "
                                  "connected host, or leave out --offline)") for step in online]
        if not online:
            contained = runtime in CONTAINER_RUNTIMES
            isolated = ("every container runs with network none" if contained else
                        "the local runtime cannot cut a process's network: the hub libraries are told to stay "
                        "offline (HF_HUB_OFFLINE=1)")
            out.append(PreflightItem(area="network", subject="offline", verdict="pass" if contained else
                                     "warn", line=f"--offline: no step needs the network; {isolated}"))
        return out
    if online:
        return [PreflightItem(area="network", subject=step, verdict="pass", line=f"{step}: uses the network")
                for step in online]
    return [PreflightItem(area="network", subject="none", verdict="pass", line="no step needs the network")]
