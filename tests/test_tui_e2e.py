"""End to end in a real terminal: tmux runs the installed `trace-tui`, keys navigate to verify.

The app is the real one (default backends); only NVML is replaced, by the
"none" machine of tests/fake_nvml.py (this machine's real behaviour: no driver),
named by TRACE_TUI_FAKE_NVML for tests/pynvml.py, which stands in for the binding on the app's PYTHONPATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TRACE_TUI = Path(sys.executable).parent / "trace-tui"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


def tmux(*args: str, check: bool = True) -> str:
    out = subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=30)
    if check and out.returncode != 0:
        raise AssertionError(f"tmux {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def start_terminal(session: str, columns: int, lines: int, command: str) -> str:
    """A detached tmux window of exactly columns x lines running command; its pane target.

    Two races made the app start at 80x24 about one time in three: a detached session's -x/-y is not
    its size once a tmux server already runs, and tmux may size the pane's terminal after the command
    has read it (0x0, so the app took the 80x24 fallback and no resize ever came). The window is fixed
    to a manual size, and the command sets its own terminal's size (stty) before the app starts."""
    tmux("-f", "/dev/null", "new-session", "-d", "-s", session, "-x", str(columns), "-y", str(lines), "sleep 600")
    tmux("set-option", "-t", session, "window-size", "manual")
    tmux("resize-window", "-t", session, "-x", str(columns), "-y", str(lines))
    target = f"{session}:0.0"
    size = tmux("display-message", "-p", "-t", target, "#{window_width}x#{window_height}").strip()
    assert size == f"{columns}x{lines}", f"tmux made a {size} window, not {columns}x{lines}"
    tmux("respawn-pane", "-k", "-t", target, f"stty cols {columns} rows {lines}; {command}")
    return target


def wait_for_text(target: str, text: str, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = tmux("capture-pane", "-p", "-t", target)
        if text in screen:
            return screen
        time.sleep(0.2)
    raise AssertionError(f"{text!r} did not appear; the screen was:\n{screen}")


def test_tmux_navigates_to_verify_on_the_release(tmp_path: Path, trace_release_dir: Path) -> None:
    assert TRACE_TUI.exists(), f"{TRACE_TUI} is not installed (make install)"
    session = f"trace-tui-e2e-{os.getpid()}"
    env = {
        "TRACE_RELEASE_DIR": str(trace_release_dir),
        "TRACE_TUI_HOME": str(tmp_path / "home"),
        "TRACE_TUI_FAKE_NVML": "none",
        "PYTHONPATH": str(REPO / "tests"),
        "TERM": "xterm-256color",
    }
    command = " ".join(f"{k}={v}" for k, v in env.items()) + f" {TRACE_TUI}; echo EXITED=$?; sleep 30"
    target = start_terminal(session, 100, 30, command)
    try:
        wait_for_text(target, "Recipes on this machine")  # first paint
        wait_for_text(target, "No GPU")  # the probe says it plainly
        wait_for_text(target, "can run")  # the probe and the per-recipe checks finished
        tmux("send-keys", "-t", target, "v")
        wait_for_text(target, "VERIFIED")
        # the checklist's columns are fitted to its text after the verdict is shown: wait for the rows
        screen = wait_for_text(target, "rlvr/evaluation/trace_eval/results.json")
        assert "VERIFIED" in screen
        assert "passed" in screen and "absent" in screen and "failed" not in screen.split("VERIFIED")[1].split("\n")[0]
        tmux("send-keys", "-t", target, "?")
        wait_for_text(target, "Keys — Verify")
        tmux("send-keys", "-t", target, "Escape")
        deadline = time.monotonic() + 10  # a lone ESC is told from an escape sequence by a short wait
        while "Keys — Verify" in tmux("capture-pane", "-p", "-t", target) and time.monotonic() < deadline:
            time.sleep(0.1)
        tmux("send-keys", "-t", target, "q")
        wait_for_text(target, "EXITED=0")
    finally:
        tmux("kill-session", "-t", session, check=False)


@pytest.mark.parametrize("argv", [[], ["--campaign", "somewhere"]])
def test_without_a_terminal_says_so_in_one_line(argv: list[str], tmp_path: Path) -> None:
    out = subprocess.run([str(TRACE_TUI), *argv], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         timeout=60, env=dict(os.environ, TRACE_TUI_HOME=str(tmp_path)))
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "trace-tui: error: the terminal UI needs a terminal "
        "(run it in a terminal, or use a command: `trace-tui --help`)"]


def test_build_app_maps_the_command_line(tmp_path: Path) -> None:
    from tui_support import make_backends

    from trace_tui.cli import build_parser
    from trace_tui.commands.launch import run_request
    from trace_tui.tui.app import build_app

    backends = make_backends(tmp_path)
    app = build_app(run_request(build_parser().parse_args(["--campaign", str(tmp_path / "c")])), backends=backends)
    assert app.initial_campaign == (tmp_path / "c").resolve() and app.initial_recipe is None
    app = build_app(run_request(build_parser().parse_args(["--recipe", "demo", "--campaign", str(tmp_path / "c")])),
                    backends=backends)
    assert app.initial_recipe == "demo" and app.initial_campaign is None and not app.confirm_all
