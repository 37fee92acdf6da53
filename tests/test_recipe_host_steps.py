"""The recipes whose steps run trace-tui itself on the host (verify, preflight, eval-preview) run to
the end, with the recipe placeholders `{store:NAME}` and `{selection}` filled in.

Real release files imported into a real store, the real CLI and the local runtime; nothing faked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trace_tui.cli import main
from trace_tui.engine.launches import expand_arguments, selection_flags
from trace_tui.recipe.catalog import resolve_recipe
from trace_tui.service.requests import RunOptions, RunRequest


@pytest.fixture(scope="module")
def home_with_release(tmp_path_factory, trace_release_dir: Path) -> Path:
    home = tmp_path_factory.mktemp("home")
    assert main(["store", "import", str(trace_release_dir), "--home", str(home)]) == 0
    return home


def campaign_of(home: Path, recipe: str) -> Path:
    (campaign,) = (home / "campaigns").glob(f"{recipe}-*")
    return campaign


@pytest.mark.parametrize("recipe", ["verify", "preflight", "eval-preview"])
def test_a_recipe_of_host_steps_runs_to_the_end(home_with_release, capsys, recipe):
    home = home_with_release
    code = main(["--recipe", recipe, "--runtime", "local", "--yes", "--home", str(home)])
    out, err = capsys.readouterr()
    assert code == 0, out[-2000:] + err[-2000:]
    campaign = campaign_of(home, recipe)
    logs = "\n".join(p.read_text() for p in (campaign / "logs").rglob("*.log"))
    assert "{store" not in logs and "{selection}" not in logs
    if recipe in ("verify", "preflight"):
        assert "Result: OK" in logs  # the release in the store, verified by the step
    if recipe == "eval-preview":
        assert "trace_eval_v1" in logs and "24 benchmarks" in logs


def test_placeholders_expand_to_the_store_path_and_the_runs_selection():
    resolved = resolve_recipe("eval-preview", models=["trace-qwen2.5-vl-7b"], seeds=[43])
    args = expand_arguments(["preview", "--recipe", "full", "{selection}", "--x", "a{store:release}b"], resolved,
                            lambda need: f"entries/{need}/files")
    assert args[:7] == ["preview", "--recipe", "full", "--models", "trace-qwen2.5-vl-7b", "--seeds", "43"]
    assert args[7] == "--benchmarks" and len(args[8:-2]) == 24  # full takes all of its benchmarks or no filter
    assert args[-2:] == ["--x", "a{store}/entries/release/filesb"]
    # eval-setup selects models only: its fetch steps get --models alone; a demo's local model is no release id
    assert selection_flags(resolve_recipe("eval-setup"))[0] == "--models"
    assert "--seeds" not in selection_flags(resolve_recipe("eval-setup"))
    assert "tiny" not in json.dumps(selection_flags(resolve_recipe("demo")))


def test_a_campaign_resumes_on_the_runtime_it_ran_on(home_with_release, capsys):
    """Started with --runtime local; run again without --runtime (headless) or opened in the TUI: local
    again, though Docker answers on this machine."""
    from trace_tui.tui.backends import default_backends

    home = home_with_release
    assert main(["--recipe", "verify", "--runtime", "local", "--yes", "--home", str(home)]) == 0
    campaign = campaign_of(home, "verify")
    capsys.readouterr()
    assert main(["--recipe", "verify", "--campaign", str(campaign), "--yes", "--home", str(home),
                 "--log-format", "json"]) == 0
    out, err = capsys.readouterr()
    starts = [json.loads(line) for line in (out + err).splitlines()
              if line.startswith("{") and '"run starting"' in line]
    assert starts and starts[-1]["runtime"] == "local"
    backends = default_backends(RunRequest(options=RunOptions(home=str(home))))
    assert backends.open_campaign(campaign).runtime == "local"
    # A run into that campaign goes where it ran, and the screens say so; the campaign's runtime does not
    # become every other recipe's (the app's own stays the machine's, Docker here).
    assert backends.runtime_for(campaign) == backends.runtime_label(campaign) == "local"
    assert backends.runtime_name() == "docker"


def test_a_campaign_of_another_recipe_is_never_written_into(home_with_release, capsys):
    """Headless refuses; the TUI opened on that campaign gives another recipe its own folder."""
    from trace_tui.tui.backends import default_backends

    home = home_with_release
    assert main(["--recipe", "verify", "--runtime", "local", "--yes", "--home", str(home)]) == 0
    campaign = campaign_of(home, "verify")
    before = (campaign / "recipe.json").read_bytes()
    capsys.readouterr()
    code = main(["--recipe", "eval-preview", "--runtime", "local", "--yes", "--campaign", str(campaign),
                 "--home", str(home)])
    _, err = capsys.readouterr()
    assert code == 2 and "holds a campaign of recipe verify, not eval-preview" in err and len(err.splitlines()) == 1
    assert (campaign / "recipe.json").read_bytes() == before
    backends = default_backends(RunRequest(options=RunOptions(home=str(home), runtime="local",
                                                              campaign=str(campaign))))
    other = backends.resolve_recipe(backends.load_recipe("eval-preview"))
    assert backends.campaign_dir_for(other) == home / "campaigns" / other.run_tag
    same = backends.resolve_recipe(backends.load_recipe("verify"))
    assert backends.campaign_dir_for(same) == campaign.resolve()


def test_a_skipped_steps_store_entries_are_not_required(tmp_path):
    """preflight with its release-files step skipped needs nothing from an empty store."""
    from trace_tui.service.campaigns import without_steps
    from trace_tui.tui.backends import default_backends

    backends = default_backends(RunRequest(options=RunOptions(home=str(tmp_path / "home"), runtime="local")))
    resolved = backends.resolve_recipe(backends.load_recipe("preflight"))
    report = backends.hardware_probe()
    assert any("release:" in p for p in backends.problems(resolved, report))
    skipped = without_steps(resolved, frozenset({"release-files"}))
    assert not any("release:" in p for p in backends.problems(skipped, report))
