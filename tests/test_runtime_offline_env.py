"""Steps without network get the hub libraries' offline switches, in both runtimes."""

from __future__ import annotations

from pathlib import Path

from trace_tui.runtime.base import OFFLINE_ENV, Launch, step_env


def _launch(network: bool) -> Launch:
    p = Path("/tmp")
    return Launch(step="s", slice="_step", module="m", args=[], job_dir=p, campaign=p, store=p, log_path=p / "l",
                  network=network, env={"RUN_SCORING": "1"})


def test_offline_steps_set_the_hub_offline_switches():
    env = step_env(_launch(network=False))
    assert env["RUN_SCORING"] == "1"
    assert all(env[k] == "1" for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"))


def test_steps_with_network_keep_the_hub_reachable():
    env = step_env(_launch(network=True))
    assert not set(OFFLINE_ENV) & set(env)
