"""The release's YAML parsed in a forked child (verify.yaml_docs) gives exactly the in-process parse.

Each case runs in a fresh interpreter: the background parse only forks while PyYAML is not yet
loaded and no other thread runs, which a pytest process (PyYAML loaded) never is.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

DRIVER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from trace_tui.verify import yaml_docs

    root, path, mode = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    if mode == "thread":
        import threading
        stop = threading.Event()
        threading.Thread(target=stop.wait, daemon=True).start()
    ahead = yaml_docs.BackgroundParse(root, [path])
    forked = bool(ahead._pid)
    if mode == "rewrite":  # the file changes after the child read it: the parent's bytes win
        (root / path).write_text("model: changed\\n", encoding="utf-8")
    data = (root / path).read_bytes()
    value, err = ahead.take(path, data)
    print(json.dumps({"forked": forked, "value": value, "err": err, "same": [value, err] == list(yaml_docs.parse(data))},
                     default=str))
""")


def _run(tmp_path: Path, text: str, mode: str = "plain") -> dict:
    (tmp_path / "rlvr/configs").mkdir(parents=True)
    (tmp_path / "rlvr/configs/c.yaml").write_text(text, encoding="utf-8")
    out = subprocess.run([sys.executable, "-c", DRIVER, str(tmp_path), "rlvr/configs/c.yaml", mode],
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def test_the_child_parse_is_the_in_process_parse(tmp_path: Path) -> None:
    got = _run(tmp_path, "model:\n  path: Qwen/Qwen2.5-VL-3B-Instruct\n  lr: 1.0e-6\nseeds: [1, 2, 3]\nflag: yes\n")
    assert got["forked"] is True
    assert got["value"] == {"model": {"path": "Qwen/Qwen2.5-VL-3B-Instruct", "lr": 1e-6}, "seeds": [1, 2, 3],
                            "flag": True}
    assert got["err"] is None and got["same"] is True


def test_invalid_yaml_gives_the_same_one_line_error(tmp_path: Path) -> None:
    got = _run(tmp_path, "a: [1, 2\nb: }\n")
    assert got["forked"] is True and got["value"] is None
    assert got["err"].startswith("not valid YAML: ") and "\n" not in got["err"]
    assert got["same"] is True


@pytest.mark.parametrize("text", ["when: 2025-01-31\n", "deep: " + "[" * 5000 + "]" * 5000 + "\n"],
                         ids=["date", "deep"])
def test_what_the_child_cannot_send_is_parsed_here(tmp_path: Path, text: str) -> None:
    """A date (marshal cannot carry it) or a too-deep document: the parent parses, same result."""
    got = _run(tmp_path, text)
    assert got["same"] is True
    assert got["err"] is None or "\n" not in got["err"]


def test_bytes_changed_after_the_child_read_them_are_parsed_again(tmp_path: Path) -> None:
    got = _run(tmp_path, "model: first\n", mode="rewrite")
    assert got["value"] == {"model": "changed"} and got["same"] is True


def test_no_fork_while_another_thread_runs(tmp_path: Path) -> None:
    """The TUI verifies in a worker thread: forking then could copy a held lock into the child."""
    got = _run(tmp_path, "model: x\n", mode="thread")
    assert got["forked"] is False and got["value"] == {"model": "x"}
