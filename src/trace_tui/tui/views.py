"""View models: what the screens render, built from the backends' own models.

Screens render only these small dataclasses. The functions here translate the
hardware report, recipes, previews and verify results into them, so a change
in a backend's model touches one function, and snapshot tests can build views
from injected (fake NVML) hardware exactly like the hardware tests do.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from trace_tui.verify.checklist import ReleaseVerification
from trace_tui.verify.release import view_tables

if TYPE_CHECKING:  # the backends' models: annotations only, so that drawing a screen imports none of them
    from trace_tui.engine.events import SliceState
    from trace_tui.hardware import HardwareReport, StepCheck
    from trace_tui.preview import Preview
    from trace_tui.recipe.schema import Recipe, StepNeeds
    from trace_tui.verify.attestation_check import AttestationReport
    from trace_tui.verify.campaign import CampaignVerification, Comparison
    from trace_tui.verify.checklist import Check
    from trace_tui.verify.tables import SimpleTable


def _fmt(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return str(value)


@dataclass(frozen=True)
class GpuView:
    index: int
    name: str
    memory: str
    compute_capability: str
    mig: str
    ecc: str


@dataclass(frozen=True)
class RecipeRow:
    name: str
    title: str
    verdict: str  # pass | warn | fail | unknown
    reasons: tuple[str, ...] = ()
    # failed only for images not built: the recipe runs here without containers (`--runtime local`)
    local_runtime: bool = False

    @property
    def status(self) -> str:
        if self.verdict == "fail" and self.local_runtime:
            return "can run (--runtime local)"
        return {"pass": "can run", "warn": "can run (warnings)", "fail": "cannot run"}.get(self.verdict, "unknown")


@dataclass(frozen=True)
class HardwareView:
    gpus: tuple[GpuView, ...] = ()
    gpu_message: str = ""  # e.g. "no NVIDIA driver": said plainly when there is no GPU
    driver: str = "—"
    cuda: str = "—"
    docker: str = "—"
    gpu_runtime: str = "—"
    images: tuple[tuple[str, str], ...] = ()  # (stage, status)
    store: str = "—"
    free_disk: str = "—"
    recipes: tuple[RecipeRow, ...] = ()

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)


def _ecc(value: int | None) -> str:
    if value is None:
        return "n/a"
    return "ok" if value == 0 else f"{value} errors"


IMAGE_STATUS = {"present": "present (id matches the lock)", "different": "id differs from the lock",
                "not_built": "not built"}


def hardware_view(report: HardwareReport, recipes: Iterable[RecipeRow] = ()) -> HardwareView:
    """trace_tui.hardware.HardwareReport as a view."""
    gpu = report.gpu
    gpus = tuple(GpuView(index=g.index, name=g.name, memory=f"{g.memory_total_gib:.0f} GiB",
                         compute_capability=g.compute_capability or "—", mig=g.mig_mode,
                         ecc=_ecc(g.ecc_volatile_uncorrected)) for g in gpu.gpus)
    docker = report.docker
    # The probe's own message: it names the id and says when the tag has moved since the lock.
    images = tuple((i.name, i.message or IMAGE_STATUS.get(i.status, i.status)) for i in docker.images)
    disk = report.disk
    return HardwareView(
        gpus=gpus,
        gpu_message="" if gpu.status == "ok" and gpus else gpu.message,
        driver=gpu.driver_version or "—",
        cuda=gpu.cuda_driver_version or "—",
        docker=docker.message,
        gpu_runtime=docker.gpu_runtime or "none",
        images=images,
        store=store_text(report),
        free_disk=f"{disk.free_gib:,.0f} GiB free of {disk.total_bytes / 2**30:,.0f} GiB",
        recipes=tuple(recipes),
    )


def store_text(report: HardwareReport) -> str:
    """The store's folder, and whether anything is in it yet (read now: a run fills it)."""
    store = Path(report.home) / "store"
    try:
        empty = not any(store.iterdir())
    except OSError:
        empty = True
    return f"{store}" + (" (empty: nothing fetched yet)" if empty else "")


def recipe_row(name: str, title: str, checks: Iterable[StepCheck] | None) -> RecipeRow:
    """A recipe's verdict on this machine from check_recipe's StepChecks (worst wins)."""
    if checks is None:
        return RecipeRow(name=name, title=title, verdict="unknown")
    rank = {"pass": 0, "warn": 1, "fail": 2}
    verdict = "pass"
    reasons: list[str] = []
    checks = list(checks)
    for check in checks:
        if rank[check.verdict] > rank[verdict]:
            verdict = check.verdict
        if check.verdict != "pass":
            # Every finding, not the one-line reason that ends in "(+N more)".
            notes = [n.partition(": ")[2] for n in check.notes if not n.startswith("pass: ")]
            for text in notes or [check.reason]:
                reasons.append(f"{check.step}: {text}".strip(": "))
    local = verdict == "fail" and all(c.verdict != "fail" or c.runs_with_local_runtime for c in checks)
    return RecipeRow(name=name, title=title, verdict=verdict, reasons=tuple(reasons), local_runtime=local)


def run_env_text(runtime: str, images: Iterable[tuple[str, str]], used: Iterable[str]) -> str:
    """Where a run's steps run: the runtime, and each image the recipe uses as the hardware check found it
    (its id against the lock, and whether the tag has moved since), in the words `trace-tui hw` prints."""
    found = dict(images)
    used = list(dict.fromkeys(u for u in used if u))
    head = f"runtime {runtime or 'docker'}"
    if runtime == "local":
        return f"{head} · steps run as processes on this host (no container images)"
    if not used:
        return f"{head} · every step runs on the host"
    # Images with the same word (e.g. "not built: no image lock at ...") are named together, said once.
    said: dict[str, list[str]] = {}
    for name in used:
        said.setdefault(found.get(name, "not checked (f5 on the hardware screen)"), []).append(name)
    return head + "".join(f" · image{'s' if len(names) > 1 else ''} {', '.join(names)}: {message}"
                          for message, names in said.items())


# -- steps -------------------------------------------------------------------------

@dataclass(frozen=True)
class StepView:
    id: str
    title: str
    description: str
    stage: str
    image: str
    needs: tuple[str, ...]
    per_slice: bool
    confirm: bool
    check: str = ""  # verdict and reason on this machine
    verdict: str = ""  # pass | warn | fail on this machine; "" when not checked
    reasons: tuple[str, ...] = ()  # every finding of the check, worst first


def needs_lines(needs: StepNeeds) -> tuple[str, ...]:
    lines = []
    if needs.gpu_profile:
        # The memory per GPU depends on the model size: trace_tui.hardware derives it (see the check below).
        lines.append(f"GPUs: {needs.gpu_profile} endpoint sized per model")
    elif needs.gpus:
        mem = needs.gpu_memory_gib
        lines.append(f"GPUs: {needs.gpus}" + (f" x {mem:g} GiB" if mem else ""))
    else:
        lines.append("GPUs: none (CPU)")
    if needs.compute_capability:
        lines.append(f"compute capability >= {needs.compute_capability}")
    if needs.disk_gib:
        lines.append(f"disk: {needs.disk_gib:g} GiB")
    lines.append("network: " + ("yes" if needs.network else "no"))
    if needs.store:
        lines.append("store: " + ", ".join(needs.store))
    return tuple(lines)


def step_views(recipe: Recipe, checks: Iterable[StepCheck] | None = None, *,
               runtime: str = "docker") -> list[StepView]:
    """RUNTIME: where the steps run ("local": processes with this host's Python, no image is used)."""
    by_step: dict[str, str] = {}
    verdicts: dict[str, str] = {}
    notes: dict[str, tuple[str, ...]] = {}
    for c in checks or ():
        by_step[c.step] = f"{c.verdict}: {c.reason}".strip(": ")
        verdicts[c.step] = c.verdict
        notes[c.step] = tuple(c.notes)
    out = []
    for s in recipe.steps:
        out.append(StepView(
            id=s.id, title=s.title, description=s.description.strip(), stage=s.stage,
            image=("host (no container)" if not s.image
                   else f"a process with this host's Python ({s.image} stage; --runtime local uses no image)"
                   if runtime == "local" else f"{s.image} image"),
            needs=needs_lines(s.needs), per_slice=bool(s.per_slice), confirm=bool(s.confirm),
            check=by_step.get(s.id, ""), verdict=verdicts.get(s.id, ""), reasons=notes.get(s.id, ()),
        ))
    return out


# -- verify ------------------------------------------------------------------------

@dataclass(frozen=True)
class CheckRow:
    item: str
    status: str  # passed | failed | absent | ...
    expected: str = ""
    actual: str = ""
    detail: str = ""


@dataclass(frozen=True)
class TableView:
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    differs: frozenset[tuple[int, int]] = frozenset()  # (row, column) cells that differ from the stored value


@dataclass(frozen=True)
class VerifyView:
    target: str
    summary: str
    ok: bool
    checks: tuple[CheckRow, ...] = ()
    tables: tuple[TableView, ...] = ()
    comparisons: tuple[TableView, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)


def _short(h: object) -> str:
    return "" if h in (None, "") else str(h)


def _release_rows(checks: Iterable[Check]) -> list[CheckRow]:
    # the item column names the file: the detail says "this file" instead of naming it a second time (a long
    # path twice made a row of 9 lines at 80 columns)
    return [CheckRow(item=c.file, status=c.status, expected=_short(c.expected), actual=_short(c.actual),
                     detail=" — ".join(x.replace(c.file, "this file") if c.file else x
                                       for x in (c.title, c.message) if x)) for c in checks]


def _campaign_rows(result: CampaignVerification) -> list[CheckRow]:
    return [CheckRow(item=c.subject, status=c.status, expected=_short(c.expected), actual=_short(c.actual),
                     detail=c.message) for c in result.checks]


def _table_view(t: SimpleTable) -> TableView:
    return TableView(title=t.title, columns=tuple(t.columns), rows=tuple(tuple(row) for row in t.rows))


def _aggregates_table(checks: Iterable[Check]) -> TableView | None:
    """Stored aggregates of results.json against their recomputation: one row per family, failures highlighted."""
    rows, differs = [], set()
    for c in checks:
        if c.group != "aggregates":
            continue
        if c.status == "failed":
            differs.add((len(rows), 1))
            differs.add((len(rows), 2))
        rows.append((c.title, c.status, c.message))
    if not rows:
        return None
    return TableView(title="Stored aggregates against their recomputation from the benchmark scores",
                     columns=("aggregate", "status", "detail"), rows=tuple(rows), differs=frozenset(differs))


def _comparison_table(comparisons: Iterable[Comparison]) -> TableView | None:
    rows, differs = [], set()
    for c in comparisons:
        if c.verdict == "outside":
            differs.add((len(rows), 6))
            differs.add((len(rows), 7))
        rows.append((c.model, _fmt(c.seed), c.benchmark, f"{c.score:.2f}", f"{c.published:.2f}",
                     f"{c.difference:+.2f}", f"±{c.tolerance:.2f}", c.verdict))
    if not rows:
        return None
    return TableView(title="This campaign's scores beside the published ones (a verdict is information, not a failure)",
                     columns=("model", "seed", "benchmark", "score", "published", "Δ", "tolerance", "verdict"),
                     rows=tuple(rows), differs=frozenset(differs))


def campaign_scores_table(events: Iterable[SliceState]) -> TableView | None:
    """The campaign's own scores, one row per slice (what `trace-tui status` shows), from its slice states."""
    scores: dict[tuple[str, str, str], tuple[str, ...]] = {}
    for e in events:
        if e.score is None or e.model is None:
            continue
        key = (e.model, _fmt(e.seed), e.benchmark or "")
        scores[key] = (*key, e.step or "", f"{e.score:.2f}", f"{e.done}/{e.total}")
    if not scores:
        return None
    return TableView(title="This campaign's scores (as `trace-tui status` shows them)",
                     columns=("model", "seed", "benchmark", "step", "score", "rows"),
                     rows=tuple(scores[k] for k in sorted(scores)))


def verify_view(result: ReleaseVerification | CampaignVerification, target: str,
                extra_tables: Iterable[TableView] = ()) -> VerifyView:
    """A release's checklist (trace_tui.verify.release) or a campaign's (trace_tui.verify.campaign) as a view."""
    tables: list[TableView] = []
    comparison = None
    if isinstance(result, ReleaseVerification):
        checks = _release_rows(result.checks)
        aggregates = _aggregates_table(result.checks)
        if aggregates is not None:
            tables.append(aggregates)
        tables += [_table_view(t) for t in view_tables(result)]  # empty when results.json did not pass its checks
    else:
        checks = _campaign_rows(result)
        comparison = _comparison_table(result.comparisons)
    ok = result.ok()
    tables += list(extra_tables)
    counts: dict[str, int] = {}
    for c in checks:
        counts[c.status] = counts.get(c.status, 0) + 1
    # Failed first (what needs attention), then passed, then absent; stable within each.
    order = {"failed": 0, "passed": 1, "absent": 2}
    checks = sorted(checks, key=lambda c: order.get(c.status, 1))
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no checks"
    if comparison is not None:
        outside = sum(1 for r in comparison.rows if r[7] == "outside")
        summary += f" · {len(comparison.rows)} scores compared, {outside} outside the published range"
    return VerifyView(target=target, summary=summary, ok=ok, checks=tuple(checks), tables=tuple(tables),
                      comparisons=(comparison,) if comparison is not None else (), counts=counts)


def attestation_view(report: AttestationReport, target: str) -> VerifyView:
    """An attestation's check (trace_tui.verify.attestation_check) as a checklist: its signature first, then
    what it says, then each problem found."""
    signed = (CheckRow(item="signature", status="passed", detail=f"DSSE, verified against key {report.keyid[:16]}")
              if report.keyid else CheckRow(item="signature", status="failed", detail="unsigned: a plain statement"))
    checks = [signed, CheckRow(item="statement", status="passed",
                               detail=f"{report.predicate_type}, {report.subjects} subjects")]
    checks += [CheckRow(item="says", status="passed", detail=fact) for fact in report.facts]
    checks += [CheckRow(item="problem", status="failed", detail=problem) for problem in report.problems]
    checks.sort(key=lambda c: c.status != "failed")
    counts: dict[str, int] = {}
    for c in checks:
        counts[c.status] = counts.get(c.status, 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    return VerifyView(target=target, summary=summary, ok=report.ok(), checks=tuple(checks), counts=counts)


# -- preview -----------------------------------------------------------------------

def preview_lines(preview: Preview) -> list[str]:
    """The configuration-only preview (what `trace-tui preview NAME` prints) as text lines."""
    return preview.lines()


def previewed_recipe(recipe: Recipe) -> str | None:
    """The recipe a configuration-only recipe previews (eval-preview: `full`), else None.

    Such a recipe's every step is `trace_tui preview --recipe NAME`: it starts nothing and writes nothing,
    so the UI shows that preview itself instead of making a campaign and a run of it."""
    names = set()
    for step in recipe.steps:
        run = list(step.run)
        if run[:2] != ["trace_tui", "preview"] or "--recipe" not in run[:-1]:
            return None
        names.add(run[run.index("--recipe") + 1])
    return names.pop() if len(names) == 1 else None


# ---- words the screens share (each screen imports these, never another screen) ----

VERDICT_STYLE = {"pass": "green", "warn": "yellow", "fail": "red", "unknown": "dim"}


def again(what: str, done: int) -> str:
    """The words after a check that was done again: "checked again" after the first f5, then how many times."""
    if done < 2:
        return ""
    return f" · {what} again" + (f" ({done - 1} times)" if done > 2 else "")


def recipe_reason(row: RecipeRow) -> str:
    """Every reason, in full (the detail line under the table and the details view wrap it)."""
    if row.verdict == "pass":
        return ""
    return "; ".join(row.reasons) or row.status


def recipe_reason_cell(row: RecipeRow) -> str:
    """Every reason, each on its own line (the column wraps: nothing is cut); steps with the same reason
    share its line ("generate, extract: image infer not built ...", not the sentence once per step)."""
    if row.verdict == "pass" or not row.reasons:
        return recipe_reason(row)
    steps_of: dict[str, list[str]] = {}
    for reason in row.reasons:
        step, sep, text = reason.partition(": ")
        key = text if sep else reason
        steps_of.setdefault(key, []).extend([step] if sep else [])
    return "\n".join(f"{', '.join(steps)}: {text}" if steps else text for text, steps in steps_of.items())


def recipe_details(row: RecipeRow) -> list[tuple[str, str]]:
    local = ([("how", f"runtime local under Options (o on its preview), or `trace-tui --recipe {row.name} "
                      f"--runtime local`")] if row.verdict == "fail" and row.local_runtime else [])
    return [("recipe", row.name), ("title", row.title), ("here", row.status), *local,
            *[("why not" if i == 0 else "", r) for i, r in enumerate(row.reasons)]]
