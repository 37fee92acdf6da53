"""Shared helpers for the engine tests (no tests here).

``resolved_for(recipe, ...)`` builds a ResolvedRecipe for hand-made recipes of the
selftest worker: the real model from trace_tui.recipe.catalog where it is importable, with
synthetic local models (no release identity), so engine tests do not depend on the
shipped recipes.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

from trace_tui.common.digest import sha256_json
from trace_tui.recipe.schema import BenchmarkRef, LocalModel, Recipe, ResolvedRecipe, SliceKey, Step, config_data

REPO = Path(__file__).resolve().parents[1]
TEST_IMAGE = "trace-tui/engine-test:latest"
BASE_IMAGE = "trace-tui/debian-base:bookworm"


def selftest_step(id_: str, mode: str, *args: str, per_slice: bool = True, image: str | None = "infer",
                  network: bool = False, **needs: Any) -> Step:
    # A whole-step job in a slice-tracking stage (infer, score) is complete only when every slice has its
    # planned rows; of the selftest modes only `matrix` works through the slices, so the others run as a
    # stage that does not track them.
    tracks = per_slice or mode == "matrix"
    stage = "host" if not image else ("infer" if tracks else "train")
    return Step(id=id_, title=f"selftest {mode}", stage=stage, image=image,
                run=["trace_tui.stages.selftest", mode, *args], per_slice=per_slice,
                needs={"network": network, **needs})


def make_recipe(steps: list[Step], name: str = "enginetest") -> Recipe:
    return Recipe(name=name, title="engine test", purpose="exercise the engine", canonical=False,
                  selection={"suite": "demo"}, local_models=[LocalModel(id="tiny-a", label="A", store_entry="local:model/tiny-a")],
                  demo_tasks=[{"key": "t1", "rows": 5}], steps=steps)


def resolved_for(recipe: Recipe, *, models: list[str] = ("tiny-a",), seeds: list[int] = (42,),
                 benchmarks: dict[str, int] | None = None, settings: dict[str, Any] | None = None) -> ResolvedRecipe:
    benchmarks = benchmarks or {"t1": 5}
    ms = [LocalModel(id=m, label=m, store_entry=f"local:model/{m}") for m in models]
    bs = [BenchmarkRef(key=k, rows=n) for k, n in benchmarks.items()]
    slices = [SliceKey(model=m, seed=s, benchmark=b) for m in models for s in seeds for b in benchmarks]
    settings = settings or {"max_tokens": 8}
    data = {"recipe": recipe.model_dump(mode="json"), "models": list(models), "seeds": list(seeds),
            "benchmarks": benchmarks, "settings": settings}
    sha = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()  # names the run, as it always has
    # the configuration's hash as trace_tui.recipe.catalog computes it: `verify --campaign` recomputes it from recipe.json
    config = sha256_json(config_data(recipe, "demo", None, ms, list(seeds), bs, settings, None, {}))
    return ResolvedRecipe(recipe=recipe, suite="demo", models=ms, seeds=list(seeds), benchmarks=bs,
                          settings=settings, slices=slices, rows_total=sum(benchmarks[s.benchmark] for s in slices),
                          config_sha256=config, run_tag=f"{recipe.name}-{sha[:12]}")


def rederived(resolved: ResolvedRecipe) -> ResolvedRecipe:
    """RESOLVED after a model_copy changed its selection: its rows_total and config_sha256 again from its
    content, as trace_tui.recipe.catalog derives them (`verify --campaign` derives them again from recipe.json)."""
    rows = {b.key: b.rows for b in resolved.benchmarks}
    config = config_data(resolved.recipe, resolved.suite, resolved.suite_sha256, resolved.models, resolved.seeds,
                         resolved.benchmarks, resolved.settings, resolved.training, resolved.store_entries)
    return resolved.model_copy(update={"rows_total": sum(rows[x.benchmark] for x in resolved.slices),
                                       "config_sha256": sha256_json(config)})


def content_of(campaign: Path) -> dict[str, Any]:
    """What must be identical between an interrupted-and-resumed run and an uninterrupted one."""
    out: dict[str, Any] = {}
    for p in sorted((campaign / "outputs").rglob("*")):
        if p.is_file():
            out[p.relative_to(campaign).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    for p in sorted((campaign / "receipts").rglob("*.json")):
        out[p.relative_to(campaign).as_posix()] = json.loads(p.read_text())["content"]
    return out


def build_test_image() -> str:
    """The engine's test image: the local Debian base with python3 and the trace_tui package."""
    subprocess.run(["docker", "build", "-q", "-t", TEST_IMAGE, "-f", str(REPO / "tests/docker_image/Dockerfile"),
                    str(REPO / "src")], check=True, capture_output=True, timeout=600)
    return TEST_IMAGE


def stop_a_worker_holding_scratch(tmp: Path, runtime: Any, image: str | None) -> tuple[Any, bool, list[Path]]:
    """A selftest `sleep` step (it holds a scratch directory in its output directory for a minute), cancelled
    through the runner once it reports progress, as `c` in the TUI or Ctrl-C headless does.

    Returns (the run's result, whether the scratch directory existed when the cancel was asked for,
    the scratch directories left in the campaign afterwards).
    """
    import threading

    from trace_tui.engine.campaign import Campaign
    from trace_tui.engine.events import Progress
    from trace_tui.engine.runner import Runner

    resolved = resolved_for(make_recipe([selftest_step("hold", "sleep", "--delay", "60", per_slice=False,
                                                       image=image)]))
    campaign = tmp / "c"
    held: list[bool] = []
    with Campaign(campaign) as c:
        runner = Runner(resolved, c, runtime, store=tmp / "store")

        def watch(ev: Any) -> None:
            if isinstance(ev, Progress) and not held:
                held.append(any(campaign.rglob("scratch-*")))
                threading.Thread(target=runner.cancel).start()

        result = runner.run(watch)
    return result, bool(held and held[0]), sorted(campaign.rglob("scratch-*"))
