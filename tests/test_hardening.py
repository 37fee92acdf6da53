"""Nothing a campaign holds can run code in a worker the local runtime starts."""

from __future__ import annotations

import json
from pathlib import Path

from test_engine_support import make_recipe, resolved_for, selftest_step

from trace_tui.engine.campaign import Campaign
from trace_tui.engine.runner import Runner
from trace_tui.runtime.local import LocalRuntime


def test_a_json_py_or_trace_tui_package_in_the_campaign_never_runs_in_a_host_worker(tmp_path: Path) -> None:
    campaign = tmp_path / "c"
    marker = tmp_path / "campaign-code-ran"
    campaign.mkdir()
    payload = f"open({str(marker)!r}, 'a').write('ran\\n')\n"
    (campaign / "json.py").write_text(payload)
    (campaign / "trace_tui").mkdir()
    (campaign / "trace_tui" / "__init__.py").write_text(payload)
    recipe = make_recipe([selftest_step("who", "whoami", per_slice=False, image=None)])
    with Campaign(campaign) as c:
        result = Runner(resolved_for(recipe), c, LocalRuntime(), store=tmp_path / "store").run(lambda _e: None)
    assert result.exit_code == 0, result.message
    assert not marker.exists(), "a module from the campaign directory ran in the worker"
    who = json.loads((campaign / "outputs/who/_step/whoami.json").read_text())
    assert str(campaign) not in who["sys_path"] and who["cwd"] != str(campaign)


def _completed_selftest_campaign(tmp_path: Path) -> Path:
    recipe = make_recipe([selftest_step("gen", "rows", image=None)])
    with Campaign(tmp_path / "c") as c:
        result = Runner(resolved_for(recipe), c, LocalRuntime(), store=tmp_path / "store").run(lambda _e: None)
    assert result.exit_code == 0, result.message
    return tmp_path / "c"


def test_verify_never_reads_a_receipt_path_outside_the_campaign(tmp_path: Path) -> None:
    import sqlite3

    from trace_tui.verify.campaign import verify_campaign

    campaign = _completed_selftest_campaign(tmp_path)
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"content": {}, "content_sha256": "x"}))
    db = sqlite3.connect(campaign / "state.sqlite")
    db.execute("UPDATE jobs SET receipt=?", ("../outside.json",))
    db.commit()
    db.close()
    res = verify_campaign(campaign)
    assert not res.ok() and res.exit_code() == 1
    assert any("outside the campaign" in x.message for x in res.failed)


def test_verify_never_reads_an_output_named_outside_the_campaign(tmp_path: Path) -> None:
    from trace_tui.common.digest import sha256_json
    from trace_tui.verify.campaign import verify_campaign

    campaign = _completed_selftest_campaign(tmp_path)
    receipt_path = next((campaign / "receipts").rglob("*.json"))
    receipt = json.loads(receipt_path.read_text())
    receipt["content"]["outputs"] = {"../../../../../../etc/passwd": {"sha256": "0" * 64, "bytes": 1}}
    receipt["content_sha256"] = sha256_json(receipt["content"])
    receipt_path.write_text(json.dumps(receipt))
    res = verify_campaign(campaign)
    assert not res.ok()
    assert any(x.id == "output" and "outside the campaign" in x.message for x in res.failed)


def test_verify_never_imports_a_module_a_receipt_names(tmp_path: Path, monkeypatch) -> None:
    """The score kind in a receipt is data: an unknown kind fails the score check, nothing is imported."""
    from trace_tui.common.digest import sha256_json
    from trace_tui.verify.campaign import verify_campaign

    campaign = _completed_selftest_campaign(tmp_path)
    evil = tmp_path / "evil"
    evil.mkdir()
    marker = tmp_path / "imported"
    (evil / "planted_recomputer.py").write_text(
        f"open({str(marker)!r}, 'w').write('x')\ndef recompute_score(c, r):\n    return r['score']\n")
    monkeypatch.syspath_prepend(str(evil))
    receipt_path = next((campaign / "receipts").rglob("*.json"))
    receipt = json.loads(receipt_path.read_text())
    receipt["content"]["kind"] = "planted_recomputer"
    receipt["content_sha256"] = sha256_json(receipt["content"])
    receipt_path.write_text(json.dumps(receipt))
    res = verify_campaign(campaign)
    assert not marker.exists(), "verify imported a module named by a receipt"
    assert res.exit_code() == 1
    assert any(x.id == "score" and x.status == "failed" and "planted_recomputer" in x.message for x in res.failed)
