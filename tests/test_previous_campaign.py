"""A campaign made by the previous release of the code resumes (nothing reruns) and verifies unchanged.

tests/fixtures/campaign-v0.1.0/ was produced by this module's ``build`` under the code as it was
before the common module and the import contract (commit 46cdbb3), with the local runtime and the
selftest worker: only files the appliance itself wrote (no release data). Worker module paths
(``trace_tui.stages.selftest``) and the job input hashes they feed are part of it, so a renamed
worker or a changed hash form would show here as a rerun or a failed verification.

Regenerate (only when the campaign format is deliberately versioned) with
``PYTHONPATH=<old tree>/src:tests python tests/test_previous_campaign.py OUT``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "campaign-v0.1.0"


def resolved():  # the recipe the fixture ran; both the old and the new code build it the same way
    from test_engine_support import make_recipe, resolved_for, selftest_step

    recipe = make_recipe([selftest_step("gen", "rows", image=None),
                          selftest_step("agg", "whoami", per_slice=False, image=None)])
    return resolved_for(recipe, seeds=[42, 43], benchmarks={"t1": 4, "t2": 2})


def run(campaign: Path, store: Path) -> tuple[object, list]:
    from trace_tui.engine.campaign import Campaign
    from trace_tui.engine.runner import Runner
    from trace_tui.runtime.local import LocalRuntime

    events: list = []
    with Campaign(campaign) as c:
        result = Runner(resolved(), c, LocalRuntime(), store=store).run(events.append)
    return result, events


def test_previous_campaign_resumes_without_rerunning_and_verifies(tmp_path):
    from trace_tui.engine.events import SliceState
    from trace_tui.verify.campaign import verify_campaign

    assert (FIXTURE / "receipts").is_dir(), f"{FIXTURE}: the committed fixture is missing"
    campaign = tmp_path / "c"
    shutil.copytree(FIXTURE, campaign)
    before = {p.relative_to(campaign).as_posix(): p.read_bytes() for p in sorted(campaign.rglob("*"))
              if p.is_file() and p.parts[-2:] != ("state", "campaign.db") and "receipts" in p.parts}
    assert before, "the fixture has no receipts"
    assert verify_campaign(campaign).ok()  # as made, before anything touches it

    result, events = run(campaign, tmp_path / "store")
    assert result.exit_code == 0
    ran = [e for e in events if isinstance(e, SliceState) and e.state in ("running", "resumed")]
    assert not ran, f"a job reran: {ran[:3]}"
    assert [e.state for e in events if e.type == "step_state"] == ["skipped", "skipped"]
    after = {p: (campaign / p).read_bytes() for p in before}
    assert after == before  # the receipts are the ones the previous code wrote
    assert verify_campaign(campaign).ok()

    cli = subprocess.run([sys.executable, "-m", "trace_tui", "verify", "--campaign", str(campaign)],
                         capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stdout[-2000:] + cli.stderr[-2000:]


if __name__ == "__main__":  # building the fixture (see the module docstring)
    out = Path(sys.argv[1])
    result, _ = run(out / "campaign", out / "store")
    print(result)
