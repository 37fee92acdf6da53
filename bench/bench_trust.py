"""The campaign checks at the scale users run: a full-size finished campaign (576 slices, 787,320 rows; each row a
generate row file and an extract row file, 1.57 million row files with their receipts; bench/campaign_writer.py),
built in a temporary folder and removed after. Printed in one run:

- `trace-tui status --campaign DIR` (a fresh process: presence and sizes of every job's receipt and outputs);
  goal < 1 s;
- resume planning with the same presence checks (the planner over the campaign's records, as Runner.plan does);
  goal < 1 s;
- the TUI opening the campaign (`trace-tui --campaign DIR`, spawn -> the run screen's grid painted); goal < 2 s;
- `trace-tui verify --campaign DIR` against `sha256sum` of the same files (the outputs and receipts); goal <= 1.5x.

TRACE_TUI_BENCH_TRUST_SCALE=0.1 (say) builds a tenth of each benchmark's rows instead, for a quick look.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNS = 3
STATUS_GOAL_S = 1.0
PLAN_GOAL_S = 1.0
TUI_GOAL_S = 2.0
VERIFY_GOAL_RATIO = 1.5
_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "TRACE_TUI_DEBUG")}

# Spawned like bench_tui's first screen: the real app (default backends) opening the campaign as
# `trace-tui --campaign DIR` does, headless; the moment its run screen's grid is first painted.
GRID_PAINT = r"""
import sys, time
from trace_tui.cli import build_parser
from trace_tui.commands.launch import run_request
from trace_tui.tui.app import TraceTuiApp, build_app
from trace_tui.tui.screens.run import RunScreen

class GridPaint(TraceTuiApp):
    _shown = False

    def _display(self, screen, renderable):
        super()._display(screen, renderable)
        if renderable is not None and isinstance(screen, RunScreen) and not self._shown:
            self._shown = True
            print(f"PAINTED {time.time():.6f}", flush=True)
            self.exit(0)

args = build_parser().parse_args(["--campaign", sys.argv[1]])
app = build_app(run_request(args))
app.__class__ = GridPaint
app.run(headless=True, size=(120, 40))
"""


def _measure(cmd: list[str], runs: int = RUNS) -> tuple[float, float]:
    """(median wall seconds, median CPU seconds user+sys) of ``cmd``: on a shared, loaded machine the wall time
    also measures the neighbours; the CPU time is what the command itself costs."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        out = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_ENV, timeout=3600)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if out.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:4])}… exited {out.returncode}: {out.stderr.decode()[-300:]}")
    return statistics.median(walls), statistics.median(cpus)


class _ImageIds:
    """What Runner.plan asks a runtime: its name and each step image's id (the ids the campaign was written
    with; no Docker here, and another runtime's ids would plan every job as invalidated)."""

    name = "docker"

    @staticmethod
    def image_id(kind: str | None) -> str:
        from bench.campaign_writer import IMAGE_IDS

        return IMAGE_IDS[kind]


def plan_resume(campaign: Path) -> tuple[float, float, str]:
    """(seconds opening the campaign as a run does, seconds of Runner.plan(): the plan a resume makes before it
    starts anything, the presence checks included; the plan's summary)."""
    from trace_tui.campaign_files.recipe_file import read_campaign_recipe
    from trace_tui.engine.campaign import Campaign
    from trace_tui.engine.runner import Runner
    from trace_tui.recipe.schema import ResolvedRecipe

    resolved = ResolvedRecipe.model_validate(read_campaign_recipe(campaign))
    t0 = time.perf_counter()
    with Campaign(campaign) as c:
        opened = time.perf_counter() - t0
        runner = Runner(resolved, c, _ImageIds(), host_runtime=_ImageIds(), store=campaign.parent / "store")
        t1 = time.perf_counter()
        plan = runner.plan()
        planned = time.perf_counter() - t1
    return opened, planned, plan.summary()


def tui_to_grid(campaign: Path, home: Path, runs: int = RUNS) -> tuple[float, float]:
    """(median seconds from spawn to the grid painted, median CPU seconds of the whole process)."""
    script = home / "grid_paint.py"
    script.write_text(GRID_PAINT, encoding="utf-8")
    env = dict(_ENV, TRACE_TUI_HOME=str(home), TRACE_TUI_FAKE_NVML="none",
               PYTHONPATH=os.pathsep.join([str(REPO / "tests"), _ENV.get("PYTHONPATH", "")]))
    painted, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.time()
        out = subprocess.run([sys.executable, str(script), str(campaign)], capture_output=True, text=True, env=env,
                             timeout=120)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        times = [float(x.split()[1]) - t0 for x in out.stdout.splitlines() if x.startswith("PAINTED ")]
        if out.returncode != 0 or not times:
            raise RuntimeError(f"the TUI did not paint the grid: {out.stderr.strip()[-300:]}")
        painted.append(times[0])
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(painted), statistics.median(cpus)


def run() -> list[str]:
    from bench.campaign_writer import demo_shaped_recipe, full_size_recipe, write_campaign

    scale = float(os.environ.get("TRACE_TUI_BENCH_TRUST_SCALE", "1"))
    resolved = full_size_recipe()
    if scale != 1:
        resolved = demo_shaped_recipe(models=[m.id for m in resolved.models], seeds=list(resolved.seeds),
                                      benchmarks={b.key: max(1, int(b.rows * scale)) for b in resolved.benchmarks})
    lines: list[str] = []
    # TRACE_TUI_BENCH_TRUST_KEEP=DIR: write the campaign into DIR once and keep it; later runs time it again.
    keep = os.environ.get("TRACE_TUI_BENCH_TRUST_KEEP")
    top = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="trace-tui-bench-trust-"))
    try:
        campaign, home = top / "campaign", top / "home"
        home.mkdir(parents=True, exist_ok=True)
        if not (campaign / "state.sqlite").is_file():
            t0 = time.perf_counter()
            counts = write_campaign(campaign, resolved)
            lines.append(f"campaign: {len(resolved.slices)} slices, {resolved.rows_total:,} rows, {counts['jobs']:,} "
                         f"jobs, {counts['row_files']:,} row files, {counts['files']:,} outputs with their receipts; "
                         f"written in {time.perf_counter() - t0:.0f} s")
        else:
            lines.append(f"campaign: {len(resolved.slices)} slices, {resolved.rows_total:,} rows, kept in {top}")
        trace = [sys.executable, "-m", "trace_tui"]
        status, status_cpu = _measure([*trace, "status", "--campaign", str(campaign), "--fail-if-incomplete"])
        lines.append(f"status (fresh process, presence and sizes of every job): median {status:.2f} s wall, "
                     f"{status_cpu:.2f} s CPU of {RUNS} "
                     f"[goal < {STATUS_GOAL_S:g} s: {'ok' if status < STATUS_GOAL_S else 'MISSED'}]")
        plans = [plan_resume(campaign) for _ in range(RUNS)]
        opened, plan = statistics.median(p[0] for p in plans), statistics.median(p[1] for p in plans)
        lines.append(f"resume planning with the presence checks (Runner.plan, in process): median {plan:.2f} s of "
                     f"{RUNS}, after {opened:.2f} s opening the campaign (lock, database check) "
                     f"[goal < {PLAN_GOAL_S:g} s: {'ok' if plan < PLAN_GOAL_S else 'MISSED'}]; {plans[0][2]}")
        grid, grid_cpu = tui_to_grid(campaign, home)
        lines.append(f"TUI opening it (spawn -> run screen grid painted, 120x40): median {grid:.2f} s wall "
                     f"({grid_cpu:.2f} s CPU to its exit) of {RUNS} "
                     f"[goal < {TUI_GOAL_S:g} s: {'ok' if grid < TUI_GOAL_S else 'MISSED'}]")
        # The same files both ways: every output and receipt. sha256sum first warms the page cache for both;
        # then one run each, alternated.
        files = top / "files.lst"
        with open(files, "wb") as fh:
            for sub in ("outputs", "receipts"):
                for folder, _dirs, names in os.walk(campaign / sub):
                    fh.writelines(f"{folder}/{n}\0".encode() for n in names)
        sha = ["sh", "-c", f"xargs -0 sha256sum < {files} > /dev/null"]
        _measure(sha, runs=1)
        verify_s, sha_s = [], []
        for _ in range(2):
            verify_s.append(_measure([*trace, "verify", "--campaign", str(campaign)], runs=1))
            sha_s.append(_measure(sha, runs=1))
        (v, v_cpu), (s, s_cpu) = min(verify_s), min(sha_s)
        lines.append(f"verify --campaign: {v:.1f} s wall, {v_cpu:.1f} s CPU; sha256sum of the same files: {s:.1f} s "
                     f"wall, {s_cpu:.1f} s CPU (best of 2 each); RATIO {v / s:.2f}x wall, {v_cpu / s_cpu:.2f}x CPU "
                     f"[goal <= {VERIFY_GOAL_RATIO}x: {'ok' if v / s <= VERIFY_GOAL_RATIO else 'MISSED'}]")
    finally:
        if not keep:
            shutil.rmtree(top, ignore_errors=True)
    return lines


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    for line in run():
        print(line)
