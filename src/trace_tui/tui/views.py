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
from typing import Any


def _get(obj: Any, *names: str, default: Any = None) -> Any:
    """First present attribute or key among names (models may be pydantic or dicts)."""
    for name in names:
        if obj is None:
            return default
        if isinstance(obj, dict):
            if name in obj and obj[name] is not None:
                return obj[name]
        else:
            value = getattr(obj, name, None)
            if value is not None:
                return value
    return default


def _fmt(value: Any) -> str:
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

    @property
    def status(self) -> str:
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


def hardware_view(report: Any, recipes: Iterable[RecipeRow] = ()) -> HardwareView:
    """trace_tui.hardware.HardwareReport as a view."""
    gpu = report.gpu
    gpus = tuple(GpuView(index=g.index, name=g.name, memory=f"{g.memory_total_gib:.0f} GiB",
                         compute_capability=g.compute_capability or "—", mig=g.mig_mode,
                         ecc=_ecc(g.ecc_volatile_uncorrected)) for g in gpu.gpus)
    docker = report.docker
    # The probe's own message: it names the id and says when the tag has moved since the lock.
    images = tuple((i.name, getattr(i, "message", "") or IMAGE_STATUS.get(i.status, i.status)) for i in docker.images)
    disk = report.disk
    store = Path(report.home) / "store"
    return HardwareView(
        gpus=gpus,
        gpu_message="" if gpu.status == "ok" and gpus else gpu.message,
        driver=gpu.driver_version or "—",
        cuda=gpu.cuda_driver_version or "—",
        docker=docker.message,
        gpu_runtime=docker.gpu_runtime or "none",
        images=images,
        store=f"{store}" + ("" if store.is_dir() else " (empty: nothing fetched yet)"),
        free_disk=f"{disk.free_gib:,.0f} GiB free of {disk.total_bytes / 2**30:,.0f} GiB",
        recipes=tuple(recipes),
    )


def recipe_row(name: str, title: str, checks: Iterable[Any] | None) -> RecipeRow:
    """A recipe's verdict on this machine from check_recipe's StepChecks (worst wins)."""
    if checks is None:
        return RecipeRow(name=name, title=title, verdict="unknown")
    rank = {"pass": 0, "warn": 1, "fail": 2}
    verdict = "pass"
    reasons: list[str] = []
    for check in checks:
        v = str(_get(check, "verdict", default="pass"))
        if rank.get(v, 0) > rank[verdict]:
            verdict = v
        if v != "pass":
            step = _get(check, "step", default="")
            step = _get(step, "id", default=step)
            # Every finding, not the one-line reason that ends in "(+N more)".
            notes = [str(n).partition(": ")[2] for n in _get(check, "notes", default=[]) or []
                     if not str(n).startswith("pass: ")]
            for text in notes or [str(_get(check, "reason", default=""))]:
                reasons.append(f"{step}: {text}".strip(": "))
    return RecipeRow(name=name, title=title, verdict=verdict, reasons=tuple(reasons))


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


def needs_lines(needs: Any) -> tuple[str, ...]:
    lines = []
    gpus = _get(needs, "gpus", default=0)
    profile = _get(needs, "gpu_profile")
    if profile:
        # The memory per GPU depends on the model size: trace_tui.hardware derives it (see the check below).
        lines.append(f"GPUs: {profile} endpoint sized per model")
    elif gpus:
        mem = _get(needs, "gpu_memory_gib")
        lines.append(f"GPUs: {gpus}" + (f" x {mem:g} GiB" if mem else ""))
    else:
        lines.append("GPUs: none (CPU)")
    if _get(needs, "compute_capability"):
        lines.append(f"compute capability >= {_get(needs, 'compute_capability')}")
    if _get(needs, "disk_gib"):
        lines.append(f"disk: {_get(needs, 'disk_gib'):g} GiB")
    lines.append("network: " + ("yes" if _get(needs, "network", default=False) else "no"))
    store = _get(needs, "store", default=[]) or []
    if store:
        lines.append("store: " + ", ".join(store))
    return tuple(lines)


def step_views(recipe: Any, checks: Iterable[Any] | None = None) -> list[StepView]:
    by_step: dict[str, str] = {}
    verdicts: dict[str, str] = {}
    notes: dict[str, tuple[str, ...]] = {}
    for c in checks or ():
        step = _get(c, "step", default="")
        step = str(_get(step, "id", default=step))
        by_step[step] = f"{_get(c, 'verdict', default='')}: {_get(c, 'reason', default='')}".strip(": ")
        verdicts[step] = str(_get(c, "verdict", default=""))
        notes[step] = tuple(str(n) for n in (_get(c, "notes", default=[]) or []))
    out = []
    for s in _get(recipe, "steps", default=[]):
        image = _get(s, "image")
        out.append(StepView(
            id=s.id, title=s.title, description=s.description.strip(), stage=s.stage,
            image=f"{image} image" if image else "host (no container)",
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


def _short(h: Any) -> str:
    return "" if h in (None, "") else str(h)


def _check_rows(items: Iterable[Any]) -> list[CheckRow]:
    rows = []
    for c in items:
        rows.append(CheckRow(
            item=_fmt(_get(c, "file", "subject", "path", "name", "item", "id")),
            status=str(_get(c, "status", "state", "verdict", default="?")),
            expected=_short(_get(c, "expected", "expected_sha256")),
            actual=_short(_get(c, "actual", "actual_sha256")),
            detail=" — ".join(str(x) for x in (_get(c, "title"), _get(c, "detail", "message", "reason")) if x),
        ))
    return rows


def _table_view(t: Any, default_title: str = "") -> TableView:
    columns = tuple(str(c) for c in (_get(t, "columns", "header", "headers", default=[]) or []))
    rows_raw = _get(t, "rows", default=[]) or []
    rows = []
    differs = set()
    for r, row in enumerate(rows_raw):
        cells = _get(row, "cells", default=row)
        if isinstance(cells, dict):
            cells = list(cells.values())
        rendered = []
        for c, cell in enumerate(cells):
            text = _get(cell, "text", "display", default=None) if not isinstance(cell, (str, int, float)) else None
            rendered.append(str(text if text is not None else cell))
            if not isinstance(cell, (str, int, float)) and _get(cell, "differs", "mismatch", default=False):
                differs.add((r, c))
        rows.append(tuple(rendered))
    for cell in _get(t, "differences", "differs", default=[]) or []:
        if isinstance(cell, (tuple, list)) and len(cell) == 2:
            differs.add((int(cell[0]), int(cell[1])))
    return TableView(title=str(_get(t, "title", "name", default=default_title)), columns=columns,
                     rows=tuple(rows), differs=frozenset(differs))


def _aggregates_table(checks: Iterable[Any]) -> TableView | None:
    """Stored aggregates of results.json against their recomputation: one row per family, failures highlighted."""
    rows, differs = [], set()
    for c in checks:
        if _get(c, "group") != "aggregates":
            continue
        status = str(_get(c, "status", default="?"))
        if status == "failed":
            differs.add((len(rows), 1))
            differs.add((len(rows), 2))
        rows.append((str(_get(c, "title", default="")), status, str(_get(c, "message", default=""))))
    if not rows:
        return None
    return TableView(title="Stored aggregates against their recomputation from the benchmark scores",
                     columns=("aggregate", "status", "detail"), rows=tuple(rows), differs=frozenset(differs))


def _comparison_table(comparisons: Iterable[Any]) -> TableView | None:
    rows, differs = [], set()
    for c in comparisons:
        outside = _get(c, "verdict") == "outside"
        if outside:
            differs.add((len(rows), 6))
            differs.add((len(rows), 7))
        rows.append((str(_get(c, "model", default="")), _fmt(_get(c, "seed")), str(_get(c, "benchmark", default="")),
                     f"{_get(c, 'score', default=0.0):.2f}", f"{_get(c, 'published', default=0.0):.2f}",
                     f"{_get(c, 'difference', default=0.0):+.2f}", f"±{_get(c, 'tolerance', default=0.0):.2f}",
                     str(_get(c, "verdict", default="")), ))
    if not rows:
        return None
    return TableView(title="This campaign's scores beside the published ones (a verdict is information, not a failure)",
                     columns=("model", "seed", "benchmark", "score", "published", "Δ", "tolerance", "verdict"),
                     rows=tuple(rows), differs=frozenset(differs))


def campaign_scores_table(events: Iterable[Any]) -> TableView | None:
    """The campaign's own scores, one row per slice (what `trace-tui status` shows), from its slice states."""
    scores: dict[tuple[str, str, str], tuple[str, ...]] = {}
    for e in events:
        score = _get(e, "score")
        if score is None or _get(e, "model") is None:
            continue
        key = (str(_get(e, "model")), _fmt(_get(e, "seed")), str(_get(e, "benchmark", default="")))
        scores[key] = (*key, str(_get(e, "step", default="")), f"{score:.2f}",
                       f"{_get(e, 'done', default=0)}/{_get(e, 'total', default=0)}")
    if not scores:
        return None
    return TableView(title="This campaign's scores (as `trace-tui status` shows them)",
                     columns=("model", "seed", "benchmark", "step", "score", "rows"),
                     rows=tuple(scores[k] for k in sorted(scores)))


def verify_view(result: Any, target: str, extra_tables: Iterable[TableView] = ()) -> VerifyView:
    """A ReleaseVerification or CampaignVerification (trace_tui.verify) as a view."""
    raw_checks = list(_get(result, "checks", default=[]) or [])
    checks = _check_rows(raw_checks)
    counts: dict[str, int] = {}
    for c in checks:
        counts[c.status] = counts.get(c.status, 0) + 1
    # Failed first (what needs attention), then passed, then absent; stable within each.
    order = {"failed": 0, "passed": 1, "absent": 2}
    checks = sorted(checks, key=lambda c: order.get(c.status, 1))
    tables: list[TableView] = []
    aggregates = _aggregates_table(raw_checks)
    if aggregates is not None:
        tables.append(aggregates)
    try:
        release_tables = list(_get(result, "tables", default=[]) or [])
    except Exception:  # noqa: BLE001 - a view extra; the checklist says what is wrong
        release_tables = []
    tables += [_table_view(t) for t in release_tables]
    tables += list(extra_tables)
    comparison = _comparison_table(_get(result, "comparisons", default=[]) or [])
    ok = _get(result, "ok", default=None)
    if callable(ok):
        ok = ok()
    if ok is None:
        ok = counts.get("failed", 0) == 0
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no checks"
    if comparison is not None:
        outside = sum(1 for r in comparison.rows if r[7] == "outside")
        summary += f" · {len(comparison.rows)} scores compared, {outside} outside the published range"
    return VerifyView(target=target, summary=summary, ok=bool(ok), checks=tuple(checks), tables=tuple(tables),
                      comparisons=(comparison,) if comparison is not None else (), counts=counts)


# -- preview -----------------------------------------------------------------------

def preview_lines(preview: Any) -> list[str]:
    """The configuration-only preview as text lines, whatever its container."""
    if preview is None:
        return []
    if isinstance(preview, str):
        return preview.splitlines()
    for attr in ("lines", "render_lines", "as_lines", "render_text", "text"):
        value = getattr(preview, attr, None)
        if callable(value):
            value = value()
        if isinstance(value, str):
            return value.splitlines()
        if isinstance(value, (list, tuple)):
            return [str(v) for v in value]
    data = preview.model_dump(mode="json") if hasattr(preview, "model_dump") else preview
    out: list[str] = []

    def walk(obj: Any, indent: int) -> None:
        pad = "  " * indent
        if isinstance(obj, dict):
            for k, v in obj.items():
                if isinstance(v, (dict, list)) and v:
                    out.append(f"{pad}{k}:")
                    walk(v, indent + 1)
                else:
                    out.append(f"{pad}{k}: {v}")
        elif isinstance(obj, list):
            for v in obj:
                if isinstance(v, (dict, list)):
                    out.append(f"{pad}-")
                    walk(v, indent + 1)
                else:
                    out.append(f"{pad}- {v}")
        else:
            out.append(f"{pad}{obj}")

    walk(data, 0)
    return out
