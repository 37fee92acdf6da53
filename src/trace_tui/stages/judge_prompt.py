"""The judge's system prompt, read at run time from the release's own sources.

The release's judge (``rlvr/evaluation/trace_validation/judge_extract.py`` at the pinned
commit) sends its module constant ``SYSTEM_PROMPT``. trace-tui never keeps that text: it
reads the constant from the file the images carry (the evaluator checkout at
``TRACE_TUI_EVALUATOR``, default ``/opt/trace``) with ``ast`` (the module is parsed, never
imported: importing it would need its package and ``requests``), and checks it against the
sha256 the release lock pins (``judge.system_prompt``).

Where those sources are absent (``--runtime local`` on a host without a checkout):

- the release's judge (the lock's Qwen3-32B) does not run: one line naming the file and the fix;
- any other judge (the demo's tiny model, whose outputs are never valid anyway) runs with
  trace-tui's own prompt (``trace_tui.scoring.OWN_JUDGE_PROMPT``), and its receipt says so
  (prompt source ``trace-tui``, that prompt's sha256), so such a run is never mistaken for the
  release's judge.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import TYPE_CHECKING

from trace_tui.common.digest import sha256_text
from trace_tui.errors import CheckFailed, RequirementsError
from trace_tui.scoring import OWN_JUDGE_PROMPT, JudgePrompt

if TYPE_CHECKING:
    from trace_tui.release import SourceStringPin

DEFAULT_EVALUATOR = "/opt/trace"


def evaluator_root() -> Path:
    """Where the release's sources are: the same checkout the release_eval worker runs."""
    return Path(os.environ.get("TRACE_TUI_EVALUATOR", DEFAULT_EVALUATOR))


def module_string(source: str, name: str) -> str | None:
    """The string a module assigns to NAME at its top level (``NAME = "..."``), or None."""
    for node in ast.parse(source).body:
        value = None
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            value = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            value = node.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return value.value
    return None


def release_judge_prompt(root: Path, pin: SourceStringPin) -> JudgePrompt:
    """The release's prompt from ROOT (a checkout holding rlvr/), checked against PIN (file, name, sha256)."""
    path = root / pin.file
    try:
        text = module_string(path.read_text(encoding="utf-8"), pin.name)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
        raise CheckFailed(f"{path}: cannot read the judge's {pin.name} ({type(exc).__name__}: {exc})") from None
    if text is None:
        raise CheckFailed(f"{path}: no top-level string {pin.name} (the release's judge prompt); "
                          "the evaluator sources are not the release's: rebuild the image")
    got = sha256_text(text)
    if got != pin.sha256:
        raise CheckFailed(f"{path}: {pin.name} has sha256 {got[:12]}…, the release lock pins {pin.sha256[:12]}… "
                          "(judge.system_prompt): the evaluator sources are not at the pinned commit")
    return JudgePrompt(text, f"{pin.file}#{pin.name}")


def judge_prompt(judge_is_release: bool, root: Path | None = None) -> JudgePrompt:
    """The prompt a judge runs with (see the module docstring); raises one line where it cannot be had."""
    from trace_tui.release import release_lock

    pin = release_lock().judge.system_prompt
    root = evaluator_root() if root is None else root
    if (root / pin.file).is_file():
        return release_judge_prompt(root, pin)
    if judge_is_release:
        raise RequirementsError(f"the release judge's system prompt is read from {root / pin.file}, which is absent",
                                hint="run the step in the infer image (it carries the release's sources at "
                                     "/opt/trace), or set TRACE_TUI_EVALUATOR to a checkout of the release")
    return OWN_JUDGE_PROMPT
