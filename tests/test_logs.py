"""trace_tui.logs: JSON lines for machines, a readable console on a terminal, and never a secret."""

from __future__ import annotations

import io
import json
import os
import pty
from pathlib import Path

import pytest
import structlog

from trace_tui import logs

TOKEN = "hf_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3"  # shaped like a Hugging Face token, not a real one


@pytest.fixture(autouse=True)
def _reset_structlog():
    yield
    structlog.reset_defaults()


def _lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_json_format_writes_one_object_per_line() -> None:
    out = io.StringIO()
    logs.configure("json", stream=out)
    log = logs.get_logger()
    log.info("step started", step="generate", rows=2000)
    log.warning("slow", seconds=1.5)
    lines = _lines(out)
    assert [x["event"] for x in lines] == ["step started", "slow"]
    assert lines[0]["level"] == "info" and lines[1]["level"] == "warning"
    assert lines[0]["step"] == "generate" and lines[0]["rows"] == 2000
    assert lines[0]["timestamp"].endswith("Z")  # ISO 8601, UTC


def test_level_filter() -> None:
    out = io.StringIO()
    logs.configure("json", stream=out, level=30)
    log = logs.get_logger()
    log.info("hidden")
    log.error("shown")
    assert [x["event"] for x in _lines(out)] == ["shown"]


def test_hf_token_is_redacted_everywhere(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    out = io.StringIO()
    log_file = tmp_path / "run" / "events.jsonl"
    logs.configure("console", stream=out, log_file=log_file)
    log = logs.get_logger()
    log.info(f"login with {TOKEN}", hf_token=TOKEN, headers={"Authorization": f"Bearer {TOKEN}"},
             argv=["--token", TOKEN], note=f"env said {TOKEN}!")
    console = out.getvalue()
    written = log_file.read_text()
    for text in (console, written):
        assert TOKEN not in text
        assert logs.REDACTED in text
    event = json.loads(written.splitlines()[0])  # the log file is JSON lines even for a console run
    assert event["hf_token"] == logs.REDACTED
    assert event["headers"]["Authorization"] == logs.REDACTED
    assert event["argv"] == ["--token", logs.REDACTED]
    assert event["event"] == f"login with {logs.REDACTED}"


def test_token_shape_is_redacted_without_the_environment(monkeypatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    assert TOKEN not in logs.redact_text(f"url?auth={TOKEN}&x=1")


def test_secret_keys_are_redacted_but_counts_are_not() -> None:
    event = {"api_key": "abc", "password": "pw", "HF_TOKEN": "zzz", "access_token": "t", "client_secret": "s",
             "max_tokens": 4096, "tokens": 12, "token_count": 3, "prompt_tokens": 7, "secret_sauce_recipe": "ok"}
    red = logs.redact(event)
    for k in ("api_key", "password", "HF_TOKEN", "access_token", "client_secret"):
        assert red[k] == logs.REDACTED, k
    # Generation settings and usage counts are data, not secrets.
    assert red["max_tokens"] == 4096 and red["tokens"] == 12 and red["token_count"] == 3 and red["prompt_tokens"] == 7
    assert red["secret_sauce_recipe"] == "ok"
    assert logs.redact({"token": None})["token"] is None  # nothing to hide: say so


def test_console_on_a_terminal_is_coloured_and_readable(monkeypatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w", buffering=1, closefd=True) as tty:
            assert tty.isatty()
            logs.configure("console", stream=tty)
            logs.get_logger().info("hardware checked", gpus=0)
            tty.flush()
            text = os.read(master, 65536).decode()
    finally:
        os.close(master)
    assert "hardware checked" in text and "gpus" in text
    assert "\x1b[" in text  # ANSI colour on a terminal
    assert not text.lstrip().startswith("{")  # people get a line, not JSON


def test_console_without_a_terminal_or_with_no_color_has_no_escapes(monkeypatch) -> None:
    out = io.StringIO()
    logs.configure("console", stream=out)
    logs.get_logger().info("plain", x=1)
    assert "plain" in out.getvalue() and "\x1b[" not in out.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w", buffering=1) as tty:
            logs.configure("console", stream=tty)
            logs.get_logger().info("still plain")
            tty.flush()
            text = os.read(master, 65536).decode()
    finally:
        os.close(master)
    assert "still plain" in text and "\x1b[" not in text
