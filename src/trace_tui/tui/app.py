"""The trace-tui terminal UI (Textual).

The app receives its backends (hardware probe, recipes, runner factory,
verify, release directory) through its constructor; `run_tui(request)` builds the
real ones from what the command line asked for. Every action here is also a CLI command:
hardware → `trace-tui hw`, recipes → `trace-tui recipes`, preview →
`trace-tui preview NAME`, run → `trace-tui --recipe NAME`, verify →
`trace-tui verify --release-dir DIR | --campaign DIR`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from trace_tui.service.campaigns import campaign_holds, without_steps
from trace_tui.service.requests import RunRequest, SlurmOptions
from trace_tui.tui.backends import default_backends
from trace_tui.tui.choices import SLURM_FIELDS, RunChoices, choices_from_request
from trace_tui.tui.cluster_backend import SchedulerChoice
from trace_tui.tui.dialogs.confirm import ConfirmScreen
from trace_tui.tui.dialogs.steps import StepsScreen
from trace_tui.tui.messages import SchedulerChanged
from trace_tui.tui.screens.campaigns import CampaignsScreen
from trace_tui.tui.screens.hardware import HardwareScreen
from trace_tui.tui.screens.help import HelpScreen
from trace_tui.tui.screens.recipes import RecipesScreen
from trace_tui.tui.screens.refused import RefusedScreen, cannot_open
from trace_tui.tui.screens.verify import VerifyScreen

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.tui.backends import Backends
    from trace_tui.tui.screens.run import RunScreen



# Four screens are imported when first shown, each measured (spawn to the first screen's paint, median of 7,
# alternated with the app importing none of them): the run screen and the Slurm campaign's screen bring pydantic
# (the engine's event models, through the progress model): every screen imported with the app took 0.71 s
# against 0.30 s. The preview (with its Options dialog) and the scheduler form bring Textual's form widgets
# (radio sets, tabs, selection lists): with them at the top the first paint took 0.47 s against 0.42 s.
# The other screens load nothing new and are imported here.
def preview_screen_module() -> ModuleType:
    from trace_tui.tui.screens import preview

    return preview


def scheduler_screen_module() -> ModuleType:
    from trace_tui.tui.screens import scheduler

    return scheduler


def run_screen_module() -> ModuleType:
    from trace_tui.tui.screens import run

    return run


def cluster_screen_module() -> ModuleType:
    from trace_tui.tui.screens import cluster

    return cluster

# How long quitting waits for a cancelled runner to stop its containers before leaving anyway.
QUIT_GRACE_S = 30.0


class TraceTuiApp(App[int]):
    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses (tests, bench) live elsewhere
    TITLE = "trace-tui"
    BINDINGS = [
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "quit", "Quit"),
        Binding("ctrl+p", "command_palette", "Commands", show=False),
        Binding("f1", "help", "Help", show=False),  # also where ? is typed into a box (the verify path)
    ]

    def __init__(self, backends: Backends, *, recipe: str | None = None, campaign: Path | None = None,
                 yes: bool = False, verify: tuple[str, Path] | None = None, choices: RunChoices | None = None,
                 scheduler: SchedulerChoice | None = None) -> None:
        super().__init__()
        self.backends = backends
        # what the command line's flags chose; the Options screen (o on the preview) changes them
        self.choices = choices or RunChoices(recipe=recipe or "")
        self.command_line_choices = self.choices  # what each recipe starts from (Options change one recipe's)
        self._shard_by: str | None = None
        if scheduler is not None:
            self.scheduler = scheduler
        self.initial_recipe = recipe
        self.initial_campaign = campaign
        self.initial_verify = verify
        self.confirm_all = yes
        self.hardware_report: Any = None
        self.hardware_view: Any = None
        self.exit_code = 0
        self._quitting = False
        self.stopped_runs: list[tuple[str, Path]] = []  # (recipe, campaign) of the runs q stopped

    # -- start-up ----------------------------------------------------------------
    def on_mount(self) -> None:
        self.push_screen(HardwareScreen())
        if self.initial_campaign is not None:
            self.reattach(self.initial_campaign)
        elif self.initial_recipe:
            self.open_recipe(self.initial_recipe)
        elif self.initial_verify is not None:
            self.show_verify(*self.initial_verify)

    # -- navigation (also reachable from the command palette) ---------------------
    def open_recipe(self, name: str) -> None:
        if name != self.choices.recipe:
            self.set_choices(self.choices_for(name))
        self.push_screen(preview_screen_module().PreviewScreen(name))

    def choices_for(self, name: str) -> RunChoices:
        """Recipe NAME's choices when it is opened: the command line's (what Options chose for another recipe
        was that recipe's: its runtime never applies here silently), less the models and seeds of another
        recipe, and --campaign only while that folder is NAME's (new, or a campaign of NAME), as the runs
        take it; where runs go (this machine or Slurm) stays as chosen."""
        start = self.command_line_choices
        if name != start.recipe:
            start = start.replace(models=(), seeds=())
        campaign = start.campaign
        if campaign:
            campaign = campaign if campaign_holds(Path(campaign).expanduser().resolve(), name) else None
        return start.replace(recipe=name, campaign=campaign, scheduler=self.choices.scheduler,
                             **{f: getattr(self.choices, f) for f in SLURM_FIELDS})

    @property
    def scheduler(self) -> SchedulerChoice:
        """Where runs go (this machine, or Slurm with its options): read from the one set of choices that the
        Options screen (o) and the w form both change; only --shard-by is kept beside them."""
        return SchedulerChoice(scheduler=self.choices.scheduler, shard_by=self._shard_by,
                               **{f: getattr(self.choices, f) for f in SLURM_FIELDS})

    @scheduler.setter
    def scheduler(self, choice: SchedulerChoice) -> None:
        self.choices = self.choices.replace(
            scheduler="slurm" if choice.slurm else "none", **{f: getattr(choice, f) for f in SLURM_FIELDS})
        self._shard_by = choice.shard_by

    def set_choices(self, choices: RunChoices) -> None:
        self.choices = choices
        self.backends.choose(choices)

    def walk_steps(self, resolved: Any, checks: list[Any]) -> None:
        if self.confirm_all:
            self.start_run(resolved)
        else:
            self.push_screen(StepsScreen(resolved, checks))

    def start_run(self, resolved: Any, skip: frozenset[str] = frozenset()) -> None:
        """Check first, as `trace-tui --recipe NAME --yes` does (exit 3): a refused run creates nothing."""
        if self.scheduler.slurm:
            self.submit_to_slurm(resolved, skip)
            return
        self._check_then_run(resolved, skip)

    def submit_to_slurm(self, resolved: Any, skip: frozenset[str] = frozenset()) -> None:
        """As `trace-tui --recipe NAME --scheduler slurm`: each shard runs the whole recipe on a node of the
        cluster (this machine's GPUs are not the nodes', so its hardware check does not apply)."""
        if self.backends.cluster is None:
            self.notify("this trace-tui cannot submit to Slurm", severity="error")
            return
        if skip:
            self.notify(f"on Slurm every shard runs the whole recipe: skipping {', '.join(sorted(skip))} is not "
                        "possible there (w: run on this machine instead)", severity="error", markup=False)
            return
        campaign = self.backends.campaign_dir_for(resolved)
        self.push_screen(cluster_screen_module().ClusterScreen(campaign, resolved=resolved, choice=self.scheduler, submit=True))

    def action_choose_scheduler(self) -> None:
        def chosen(choice: SchedulerChoice | None) -> None:
            if choice is not None:
                self.scheduler = choice
                self.notify(f"runs go to {choice.describe()}", markup=False)
                self.screen.post_message(SchedulerChanged())

        self.push_screen(scheduler_screen_module().SchedulerScreen(self.scheduler), chosen)

    @work(thread=True, exclusive=True, group="start")
    def _check_then_run(self, resolved: Any, skip: frozenset[str]) -> None:
        try:
            problems = self.backends.problems(without_steps(resolved, skip), self.hardware_report)
        except Exception as exc:  # noqa: BLE001 - a check that cannot run is itself a reason not to start
            problems = [exc.line() if hasattr(exc, "line") else f"{type(exc).__name__}: {exc}"]
        self.call_from_thread(self._start_or_refuse, resolved, skip, problems)

    def _start_or_refuse(self, resolved: Any, skip: frozenset[str], problems: list[str]) -> None:
        if problems:
            self.exit_code = 3
            self.push_screen(RefusedScreen(resolved.recipe.name, problems))
            return

        campaign = self.backends.campaign_dir_for(resolved)
        self.push_screen(run_screen_module().RunScreen(resolved, campaign, skip=skip, clock=self.backends.clock,
                                                     runtime=self.backends.runtime_label(campaign)))

    def reattach(self, campaign_dir: Path, resume: bool = False) -> None:
        """A campaign that is running or was interrupted: show its state and offer to resume (or resume now)."""
        cluster = self.backends.cluster
        if cluster is not None and cluster.is_sharded(Path(campaign_dir)):
            self.reattach_sharded(Path(campaign_dir))
            return
        here = self.run_screen_for(Path(campaign_dir))
        if here is not None:
            # This UI already shows it (perhaps running): go back to that screen, live, instead of a second one.
            while self.screen is not here:
                self.pop_screen()
            if resume and not here.running and not here.watching:
                here.action_resume()
            return
        if (self.choices.runtime, self.choices.offline) != (self.command_line_choices.runtime,
                                                            self.command_line_choices.offline):
            # a campaign resumes where it ran (or where --runtime says): not where one recipe's Options chose
            self.set_choices(self.choices.replace(runtime=self.command_line_choices.runtime,
                                                  offline=self.command_line_choices.offline))
        try:
            opened = self.backends.open_campaign(Path(campaign_dir))
        except Exception as exc:  # noqa: BLE001
            self.push_screen(cannot_open(campaign_dir, exc.line() if hasattr(exc, "line") else str(exc)))
            return

        resolved = opened.resolved
        run = run_screen_module()
        model = run.ProgressModel(clock=self.backends.clock)
        run.seed_model(model, resolved)
        model.load_campaign(run.campaign_state(opened))
        live = bool(getattr(opened, "live", False))
        last = getattr(opened, "last_state", "")
        if live:
            note = "running in another process: following its state live · r: resume here once it stops"
        elif last == "completed":
            note = "this campaign is complete · v: verify · r: run again (completed slices are kept)"
        else:
            note = f"this campaign was interrupted{f' ({last})' if last else ''} · r: resume · v: verify"
        self.push_screen(run.RunScreen(resolved, Path(campaign_dir), start=resume and not live, model=model, note=note,
                                     clock=self.backends.clock, watch=live,
                                     runtime=self.backends.runtime_label(Path(campaign_dir))))

    def reattach_sharded(self, campaign_dir: Path) -> None:
        """A campaign split into shards on Slurm: its shards live, r resubmits the ones not complete."""
        try:
            opened = self.backends.cluster.open(campaign_dir)
        except Exception as exc:  # noqa: BLE001
            self.push_screen(cannot_open(campaign_dir, exc.line() if hasattr(exc, "line") else str(exc)))
            return
        self.scheduler = opened.choice
        note = ("a campaign on Slurm · r: resume (resubmits only the shards that are not complete) · "
                "c: cancel its jobs · v: verify once merged")
        if opened.resolved is None:
            note = f"a campaign on Slurm · cannot resubmit from here: {opened.problem} · c: cancel its jobs"
        self.push_screen(cluster_screen_module().ClusterScreen(opened.path, resolved=opened.resolved, choice=opened.choice,
                                       run_options=opened.run_options, note=note))

    def show_verify(self, kind: str = "release", path: Path | None = None) -> None:
        self.push_screen(VerifyScreen(kind, path))

    def action_show_recipes(self) -> None:
        self.push_screen(RecipesScreen())

    def action_show_campaigns(self) -> None:
        if isinstance(self.screen, CampaignsScreen):
            return
        self.push_screen(CampaignsScreen(self.backends.campaigns_dir))

    def action_show_verify(self) -> None:
        self.show_verify("release", self.backends.release_dir)

    def action_show_hardware(self) -> None:
        while len(self.screen_stack) > 2 and not isinstance(self.screen, HardwareScreen):
            if self.screen in self.running_screens():
                # never pop a screen whose run goes on: a hardware screen goes on top of it instead
                self.push_screen(HardwareScreen())
                return
            self.pop_screen()

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(self.screen))

    def screenshot_dir(self) -> Path:
        """Where the palette's "Screenshot" saves: the Downloads folder where there is one (Textual's own
        choice), else the current directory, else the home: a folder that exists, so that it is saved."""
        import os

        from platformdirs import user_downloads_path

        for folder in (user_downloads_path(), Path.cwd(), self.backends.home):
            if folder is not None and Path(folder).is_dir() and os.access(folder, os.W_OK):
                return Path(folder)
        return Path.cwd()

    def deliver_screenshot(self, filename: str | None = None, path: str | None = None,
                           time_format: str | None = None) -> str | None:
        # Textual saves into ~/Downloads and fails ("Failed to save screenshot") where it does not exist;
        # its notice then names the file it saved.
        return super().deliver_screenshot(filename, path or str(self.screenshot_dir()), time_format)

    def safe_known_recipes(self) -> list[str]:
        try:
            return list(self.backends.known_recipes())
        except Exception:  # noqa: BLE001
            return []

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        # Each entry names the command line that does the same (every action here is also a CLI command).
        yield SystemCommand("Hardware", "the hardware check — `trace-tui hw`", self.action_show_hardware)
        yield SystemCommand("Recipes", "every recipe and whether this machine can run it — `trace-tui recipes`",
                            self.action_show_recipes)
        yield SystemCommand("Campaigns", "every campaign under the home: watch, resume or verify one — "
                            "`trace-tui status --campaign DIR`", self.action_show_campaigns)
        yield SystemCommand("Verify release", "a release directory, offline — `trace-tui verify --release-dir DIR`",
                            self.action_show_verify)
        yield SystemCommand("Verify campaign", "a campaign, offline — `trace-tui verify --campaign DIR`",
                            lambda: self.show_verify("campaign", None))
        yield SystemCommand("Where runs go", "this machine or Slurm — `trace-tui --recipe NAME --scheduler slurm`",
                            self.action_choose_scheduler)
        yield SystemCommand("Help", "every key binding", self.action_help)
        for name in self.safe_known_recipes():
            how = f"`trace-tui preview --recipe {name}`, `trace-tui --recipe {name}`"
            yield SystemCommand(f"Recipe: {name}", f"preview, then walk the steps — {how}",
                                lambda name=name: self.open_recipe(name))

    # -- runs --------------------------------------------------------------------
    def _shown_runs(self) -> list[RunScreen]:
        # the run screens on the stack, told by their mark: the run screen's module is imported only once one exists
        return [s for s in self.screen_stack if getattr(s, "shows_a_run", False)]

    def run_screen_for(self, campaign_dir: Path) -> RunScreen | None:
        want = Path(campaign_dir).expanduser().resolve()
        return next((s for s in self._shown_runs() if s.campaign_dir.expanduser().resolve() == want), None)

    def running_screens(self) -> list[RunScreen]:
        return [s for s in self._shown_runs() if s.running]

    def on_run_finished(self, screen: RunScreen, outcome: str) -> None:
        if self._quitting:
            if not self.running_screens():
                self.exit(self.exit_code)
            return
        self.exit_code = {"completed": 0, "cancelled": 130}.get(outcome, 1)
        if outcome == "completed" and self.screen is screen:
            # The last screen of every recipe: verify what it produced.
            self.show_verify("campaign", screen.campaign_dir)
        elif self.screen is not screen:
            # The user is on another screen: say so there; the campaigns list (enter) goes back to it.
            self.notify(f"the run of {screen.resolved.recipe.name} has {outcome} · campaign {screen.campaign_label}",
                        severity="information" if outcome == "completed" else "warning", markup=False)

    async def action_quit(self) -> None:
        running = self.running_screens()
        if not running:
            self.exit(self.exit_code)
            return

        def answer(yes: bool | None) -> None:
            if not yes:
                return
            self._quitting = True
            self.exit_code = 130
            self.stopped_runs = [(s.resolved.recipe.name, s.campaign_dir) for s in running]
            for screen in running:
                screen.cancel_runner()
            self.set_timer(QUIT_GRACE_S, lambda: self.exit(130))

        what = "Containers are running" if self.backends.runtime_label() == "docker" else "Stage processes are running"
        resume = " ".join(f"trace-tui --campaign {s.campaign_dir}" for s in running)

        self.push_screen(ConfirmScreen(
            f"{what}. Stop them and quit? The campaign stays resumable: {resume}",
            yes="Stop and quit", no="Keep running"), answer)


def build_app(request: RunRequest | None = None, slurm: SlurmOptions | None = None,
              backends: Backends | None = None) -> TraceTuiApp:
    """The app for what the command line asked (REQUEST; SLURM: its `--scheduler slurm` options, None for this
    machine), over BACKENDS (default: the real ones)."""
    request = request or RunRequest()
    backends = backends or default_backends(request)
    campaign, recipe = request.options.campaign, request.recipe
    return TraceTuiApp(
        backends,
        recipe=recipe,
        campaign=Path(campaign).expanduser().resolve() if campaign and not recipe else None,
        yes=request.yes,
        choices=choices_from_request(request, slurm),
        scheduler=SchedulerChoice.from_options(slurm),
    )


def run_tui(request: RunRequest, slurm: SlurmOptions | None = None) -> int:
    """`trace-tui` on a terminal: open the UI; the exit code says how the last run ended."""
    app = build_app(request, slurm)
    result = app.run()
    hint = resume_hint(app.stopped_runs)
    if hint:
        print(hint)
    return int(result if isinstance(result, int) else app.exit_code)


def resume_hint(stopped: list[tuple[str, Path]]) -> str:
    """What `q` during a run leaves on the terminal: the runs it stopped and how to resume each (exit 130)."""
    import shlex

    return "\n".join(f"trace-tui: the run of {name} was stopped; the campaign is resumable: "
                     f"trace-tui --campaign {shlex.quote(str(path))} (r resumes it), or headless: "
                     f"trace-tui --recipe {shlex.quote(name)} --campaign {shlex.quote(str(path))} --yes"
                     for name, path in stopped)
