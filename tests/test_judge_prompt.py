"""The judge's system prompt: the release's own SYSTEM_PROMPT, read at run time from the release's
judge_extract.py (here from the pinned rlvr/ archive in ../shared/evaluator, as the images carry it
under /opt/trace), pinned by sha256 in the release lock; never kept in this project.

Where the release's sources are absent, only a judge that is not the release's (the demo's tiny
model) may run, with trace-tui's own prompt, and its receipt says so.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from stages_support import run_worker
from test_stages_extract import CASES, ScriptedJudge, extract_job, write_generate_rows

from trace_tui.common.digest import sha256_text
from trace_tui.errors import CheckFailed, RequirementsError
from trace_tui.release import release_lock
from trace_tui.scoring import OWN_JUDGE_PROMPT
from trace_tui.stages.judge_prompt import judge_prompt, module_string, release_judge_prompt

PIN = release_lock().judge.system_prompt
REPO = Path(__file__).resolve().parents[1]


def test_the_lock_pins_the_release_prompt_and_the_release_file_has_it(release_judge_source) -> None:
    assert (PIN.file, PIN.name) == ("rlvr/evaluation/trace_validation/judge_extract.py", "SYSTEM_PROMPT")
    prompt = release_judge_prompt(release_judge_source, PIN)
    assert prompt.sha256 == PIN.sha256 == "6ada68518b48c2678f595e563f47979b837933e7cd6ec54975dd7ffe0578a962"
    assert len(prompt.text) == 995 and prompt.source == f"{PIN.file}#SYSTEM_PROMPT"
    assert prompt.text != OWN_JUDGE_PROMPT.text
    # read from the file the images carry, with the same answer as for judge_prompt()
    assert judge_prompt(judge_is_release=True, root=release_judge_source) == prompt


def test_the_release_prompt_text_is_not_in_this_project(release_judge_source) -> None:
    text = release_judge_prompt(release_judge_source, PIN).text
    line = next(x for x in text.splitlines() if len(x) > 40)
    for path in [*(REPO / "src").rglob("*.py"), *(REPO / "recipes").iterdir(), REPO / "README.md"]:
        if path.is_file():
            assert line not in path.read_text(encoding="utf-8", errors="replace"), path


def test_a_changed_prompt_is_refused_naming_the_file_and_the_pin(release_judge_source, tmp_path) -> None:
    root = tmp_path / "trace"
    shutil.copytree(release_judge_source, root)
    path = root / PIN.file
    path.write_text(path.read_text(encoding="utf-8").replace("strict answer-extraction", "lenient answer-extraction"),
                    encoding="utf-8")
    with pytest.raises(CheckFailed, match=r"judge_extract\.py: SYSTEM_PROMPT has sha256 .*\(judge\.system_prompt\)"):
        judge_prompt(judge_is_release=True, root=root)
    path.write_text("PROMPT = 'x'\n", encoding="utf-8")
    with pytest.raises(CheckFailed, match="no top-level string SYSTEM_PROMPT"):
        judge_prompt(judge_is_release=False, root=root)


def test_module_string_reads_only_a_top_level_string_constant() -> None:
    assert module_string('A = "x"\nB: str = "y"\n', "B") == "y"
    assert module_string('def f():\n    A = "x"\n', "A") is None
    assert module_string('A = "x" + "y"\n', "A") is None


def test_without_release_sources_the_release_judge_refuses_and_another_uses_our_own(tmp_path) -> None:
    with pytest.raises(RequirementsError, match="judge_extract.py, which is absent") as err:
        judge_prompt(judge_is_release=True, root=tmp_path)
    assert "TRACE_TUI_EVALUATOR" in err.value.line()
    assert judge_prompt(judge_is_release=False, root=tmp_path) == OWN_JUDGE_PROMPT


def test_the_demo_judge_without_release_sources_records_our_prompt(monkeypatch, tmp_path) -> None:
    from trace_tui.stages import extract

    monkeypatch.setenv("TRACE_TUI_EVALUATOR", str(tmp_path / "no-sources"))
    write_generate_rows(tmp_path, "outputs/generate/s")
    judge = ScriptedJudge({c[0]: c[3] for c in CASES if c[3]})
    receipt, events = run_worker(monkeypatch, tmp_path, tmp_path / "store", extract.run,
                                 extract_job(["--judge", str(tmp_path), "--judge-max-tokens", "128"]),
                                 judge_backend=judge)
    assert receipt["content"]["judge"]["prompt_sha256"] == OWN_JUDGE_PROMPT.sha256
    assert receipt["content"]["judge"]["prompt_source"] == "trace-tui"
    assert all(r.messages[0]["content"] == OWN_JUDGE_PROMPT.text for r in judge.requests)
    assert any(e.get("type") == "log" and "not the release's" in e.get("message", "") for e in events)


def test_the_release_judge_without_release_sources_is_one_line(monkeypatch, tmp_path) -> None:
    """The default judge (the lock's Qwen3-32B) never runs with any prompt but the release's."""
    from trace_tui.stages import extract

    monkeypatch.setenv("TRACE_TUI_EVALUATOR", str(tmp_path / "no-sources"))
    write_generate_rows(tmp_path, "outputs/generate/s")
    with pytest.raises(RequirementsError, match="absent"):
        run_worker(monkeypatch, tmp_path, tmp_path / "store", extract.run, extract_job([]),
                   judge_backend=ScriptedJudge({}))


def test_receipt_rows_change_when_the_prompt_does(monkeypatch, tmp_path, release_judge) -> None:
    """A campaign judged with our own prompt is judged again with the release's (the settings differ)."""
    from trace_tui.stages import extract

    write_generate_rows(tmp_path, "outputs/generate/s")
    script = {c[0]: c[3] for c in CASES if c[3]}
    args = extract_job(["--judge", str(tmp_path), "--judge-max-tokens", "128"])
    monkeypatch.setenv("TRACE_TUI_EVALUATOR", str(tmp_path / "no-sources"))
    run_worker(monkeypatch, tmp_path, tmp_path / "store", extract.run, args, judge_backend=ScriptedJudge(script))
    monkeypatch.setenv("TRACE_TUI_EVALUATOR", str(release_judge))
    again = ScriptedJudge(script)
    receipt, _ = run_worker(monkeypatch, tmp_path, tmp_path / "store", extract.run, args, judge_backend=again)
    assert again.requests and receipt["content"]["judge"]["prompt_sha256"] == PIN.sha256
    row = json.loads((tmp_path / "outputs/extract/s/rows/000001.json").read_text())
    assert row["judge"]["prompt_sha256"] == PIN.sha256 == sha256_text(again.requests[0].messages[0]["content"])
