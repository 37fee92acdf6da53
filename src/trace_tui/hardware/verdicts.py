"""Per-step verdicts: a recipe's steps against a HardwareReport (pure)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from trace_tui.hardware.report import FIX_IMAGES, GIB, MEMORY_SLACK, GpuInfo, HardwareReport, _Model
from trace_tui.hardware.requirements import REQUIREMENTS, _cc, _gpus, describe_requirement, meets, required_tp

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.recipe.schema import ResolvedRecipe, Step


# --------------------------------------------------------------------------- per-step verdicts


Verdict = Literal["pass", "warn", "fail"]
Area = Literal["gpus", "images", "disk", "network", "host"]
LOCAL_RUNTIME = "--runtime local"
_RANK = {"pass": 0, "warn": 1, "fail": 2}


class StepCheck(_Model):
    step: str
    verdict: Verdict
    reason: str  # one line
    notes: list[str] = Field(default_factory=list)  # every finding, worst first
    # what each note is about, in the same order: a preflight shows GPUs apart from images, disk and network
    areas: list[Area] = Field(default_factory=list)

    def line(self, recipe: str | None = None) -> str:
        head = f"{recipe} {self.step}" if recipe else self.step
        return f"{head}: {self.verdict}: {self.reason}"

    @property
    def runs_with_local_runtime(self) -> bool:
        """Failed only for images not built, each offering the local runtime: the same step runs here as
        host processes (`--runtime local`), which is what the Hardware screen says instead of "cannot run"."""
        fails = [n for n in self.notes if n.startswith("fail: ")]
        return bool(fails) and all(n.endswith(f"`{LOCAL_RUNTIME}`") for n in fails)


def step_scales(step: "Step", resolved: "ResolvedRecipe") -> list[str]:
    """The model sizes whose requirement applies to a step's GPU profile."""
    profile = step.needs.gpu_profile
    if profile == "judge":
        return ["judge"]
    if profile == "train":
        return [resolved.training.scale] if resolved.training else []
    if profile == "generate":
        scales = {m.scale for m in resolved.models if m.scale in REQUIREMENTS["generate"]}
        # most demanding first, so a one-line failure names the binding requirement
        return sorted(scales, key=lambda s: -REQUIREMENTS["generate"][s].options[0].min_gib)
    return []


def writes_store(step: "Step") -> bool:
    """Whether STEP fills the store (`trace-tui store fetch ...`: eval-setup's steps) rather than its campaign."""
    return list(step.run[:2]) == ["trace_tui", "store"]


def check_step(step: "Step", resolved: "ResolvedRecipe", report: HardwareReport, *,
               runtime: str = "docker", earlier_disk_gib: float = 0) -> StepCheck:
    """One step's verdict. ``earlier_disk_gib``: what the recipe's earlier steps write first (disk adds up)."""
    findings: list[tuple[Verdict, str, Area]] = []
    needs = step.needs
    gpus = report.gpus
    scales = step_scales(step, resolved)

    # GPUs
    # Without a profile, gpus/gpu_memory_gib are the requirement; with one, the profile's table is
    # (the step's gpus is then the floor the engine starts with, always covered by the table).
    explicit = needs.gpus > 0 and not needs.gpu_profile
    if scales or explicit:
        if report.gpu.status != "ok":
            what = (describe_requirement(needs.gpu_profile, scales[0]) if scales
                    else f"needs {_gpus(needs.gpus)} with >= {needs.gpu_memory_gib:g} GiB")
            findings.append(("fail", f"{what}; found none ({report.gpu.message.split(':')[0]})", "gpus"))
        else:
            for scale in scales:
                opt = required_tp(needs.gpu_profile, scale, gpus)
                if opt is None:
                    findings.append(("fail", f"{describe_requirement(needs.gpu_profile, scale)}; found "
                                             f"{_found(gpus, needs.compute_capability)}", "gpus"))
                    continue
                eligible = [g for g in gpus if meets(g, opt.min_gib, REQUIREMENTS[needs.gpu_profile][scale].compute_capability)]
                groups = len(eligible) // opt.tp
                findings.append(("pass", f"{groups} {REQUIREMENTS[needs.gpu_profile][scale].what}"
                                         f"{'s' if groups != 1 else ''} on {len(eligible)} GPU"
                                         f"{'s' if len(eligible) != 1 else ''} (tp {opt.tp})", "gpus"))
                busy = [g.index for g in eligible if g.memory_free_bytes < opt.min_gib * MEMORY_SLACK * GIB * 0.9]
                if busy:
                    findings.append(("warn", f"GPU {', '.join(map(str, busy))} has less free memory than "
                                             f"{opt.min_gib} GiB now (other processes are using it)", "gpus"))
            if explicit:
                ok = [g for g in gpus if meets(g, needs.gpu_memory_gib, needs.compute_capability)]
                if len(ok) < needs.gpus:
                    findings.append(("fail", f"needs {_gpus(needs.gpus)} with >= {needs.gpu_memory_gib:g} GiB; "
                                             f"found {_found(gpus, needs.compute_capability)}", "gpus"))
            ecc = [g.index for g in gpus if (g.ecc_volatile_uncorrected or 0) > 0]
            if ecc:
                findings.append(("warn", f"GPU {', '.join(map(str, ecc))} reports volatile uncorrectable ECC errors "
                                         "(reset the GPU or reboot before a long run)", "gpus"))
            mig = [g.index for g in gpus if g.mig_enabled]
            if mig:
                findings.append(("warn", f"GPU {', '.join(map(str, mig))} has MIG enabled and is not used "
                                         "(disable with `nvidia-smi -i N -mig 0`)", "gpus"))
        if step.image and runtime == "docker" and report.docker.status == "ok" and report.docker.gpu_runtime is None:
            findings.append(("fail", "Docker has no GPU runtime (install nvidia-container-toolkit: nvidia runtime or CDI)",
                             "gpus"))

    # image
    if step.image and runtime == "docker":
        key = step.image
        flavor = report.docker.lock_flavor
        if report.docker.status != "ok":
            findings.append(("fail", f"image {key}: {report.docker.message}", "images"))
        else:
            img = report.docker.image(key)
            if img is None or img.status == "not_built":
                why = img.message if img else f"not built (run `{FIX_IMAGES}`)"
                # the other way to run it, which a first start has: the same workers as local processes
                why += f"; or run without containers: `{LOCAL_RUNTIME}`"
                findings.append(("fail", f"image {key} {why}" if why.startswith("not built") else f"image {key}: {why}",
                                 "images"))
            elif img.status == "different":
                findings.append(("warn", f"image {key}: {img.message}", "images"))
            else:
                findings.append(("pass", f"image {key} present", "images"))
            # A step that uses GPUs needs the gpu build; CPU steps run on either (CUDA torch runs on CPU too).
            if img is not None and img.status != "not_built" and (scales or explicit) and flavor == "cpu":
                findings.append(("fail", f"image {key} is the cpu flavour; this recipe needs the gpu build "
                                         f"(`{FIX_IMAGES}` on a host with the NVIDIA runtime)", "images"))

    # disk
    if needs.disk_gib:
        total = needs.disk_gib + earlier_disk_gib
        with_earlier = f" ({total:g} GiB with the earlier steps)" if earlier_disk_gib else ""
        # a step that fills the store writes the home; every other step writes its campaign
        disk = report.disk if writes_store(step) else (report.campaign_disk or report.disk)
        if disk.free_bytes < total * GIB:
            findings.append(("fail", f"needs {needs.disk_gib:g} GiB free under {disk.path}{with_earlier}; "
                                     f"{disk.free_gib:.1f} GiB free", "disk"))
        else:
            findings.append(("pass", f"{disk.free_gib:.0f} GiB free >= {total:g} GiB", "disk"))

    if needs.network:
        findings.append(("pass", "needs network (or a bundle import: `trace-tui bundle import DIR`)", "network"))
    if not findings:
        findings.append(("pass", "runs on the host" if step.stage == "host" else "runs on CPU", "host"))
    findings.sort(key=lambda f: -_RANK[f[0]])
    verdict = findings[0][0]
    if verdict == "pass":
        reason = "; ".join(r for _, r, _ in findings)
    else:
        others = sum(1 for v, _, _ in findings[1:] if v != "pass")
        reason = findings[0][1] + (f" (+{others} more)" if others else "")
    return StepCheck(step=step.id, verdict=verdict, reason=reason, notes=[f"{v}: {r}" for v, r, _ in findings],
                     areas=[a for _, _, a in findings])


def _found(gpus: list[GpuInfo], cc: str | None) -> str:
    if not gpus:
        return "none"
    parts = [f"{g.name} {g.memory_total_gib:.0f} GiB"
             + (" (MIG)" if g.mig_enabled else "")
             + (f" (cc {g.compute_capability} < {cc})" if cc and _cc(g.compute_capability) < _cc(cc) else "")
             for g in gpus]
    uniq = list(dict.fromkeys(parts))
    return ", ".join(f"{parts.count(p)}x {p}" for p in uniq)


def check_recipe(resolved: "ResolvedRecipe", report: HardwareReport, *,
                 runtime: str = "docker") -> list[StepCheck]:
    """pass/warn/fail with a one-line reason for every step of a resolved recipe on this hardware."""
    out, written = [], 0.0
    for step in resolved.recipe.steps:
        out.append(check_step(step, resolved, report, runtime=runtime, earlier_disk_gib=written))
        written += step.needs.disk_gib
    return out


def worst(checks: list[StepCheck]) -> Verdict:
    return max((c.verdict for c in checks), key=lambda v: _RANK[v], default="pass")
