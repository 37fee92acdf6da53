"""Logging with structlog: readable on a terminal, JSON lines on request, never a secret."""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from trace_tui.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from structlog.typing import FilteringBoundLogger

# Keys whose values are never written, and environment values scrubbed from any text.
# A key names a secret when its last word does (hf_token, client_secret, api-key, Authorization),
# not when a word merely contains one: max_tokens, token_count and prompt_tokens are data.
_SECRET_KEY = re.compile(
    r"(?:^|[_\-.])(?:token|secret|secret[_-]?key|private[_-]?key|password|passwd|api[_-]?key|apikey|"
    r"authorization|auth|credentials?|cookie)$", re.I)
_SECRET_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_TOKEN", "HF_HUB_TOKEN")
_TOKEN_SHAPE = re.compile(r"\bhf_[A-Za-z0-9]{20,}\b")
# A URL's userinfo (https://USER:PASSWORD@host/...) is a credential wherever the URL came from (an environment
# variable such as TRACE_TUI_RELEASE_URL, a configuration file): it is never written.
_URL_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^/\s@'\"]+@")
REDACTED = "***"


def redact_text(text: str) -> str:
    for name in _SECRET_ENV:
        value = os.environ.get(name)
        if value and len(value) >= 4:
            text = text.replace(value, REDACTED)
    return _URL_USERINFO.sub(rf"\1{REDACTED}@", _TOKEN_SHAPE.sub(REDACTED, text))


def redact(value: object, key: str | None = None) -> object:
    """Scrub secrets from a log event or any JSON-like value written to disk."""
    if key is not None and _SECRET_KEY.search(key) and value not in (None, "", False):
        return REDACTED
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value


def _redact_processor(_logger: object, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    return {k: redact(v, k if k != "event" else None) for k, v in event.items()}


def configure(fmt: str = "console", *, log_file: Path | None = None, stream: TextIO | None = None,
              level: int = logging.INFO) -> None:
    """Set up structlog once per process. `fmt` is "console" or "json".

    The log file, when given, always receives JSON lines (machine-readable runs).
    """
    import structlog

    stream = stream or sys.stderr
    shared = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _redact_processor,
    ]
    renderer: Any
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer(sort_keys=True)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=stream.isatty() and "NO_COLOR" not in os.environ)

    files: list[TextIO] = [stream]
    json_renderer = structlog.processors.JSONRenderer(sort_keys=True)
    log_handle: TextIO | None = None
    if log_file is not None:
        try:
            log_file.parent.mkdir(parents=True, exist_ok=True)
            # never a FIFO: opening one waits for a reader that may never come (/dev/null and the like are fine)
            if log_file.is_fifo():
                raise UsageError(f"--log-file {log_file}: a FIFO, which would wait for a reader",
                                 hint="name a file to append log lines to")
            log_handle = open(log_file, "a", encoding="utf-8")  # noqa: SIM115 - lives for the process
        except OSError as exc:
            raise UsageError(f"--log-file {log_file}: cannot be written ({exc.strerror or exc})",
                             hint="name a file in a writable directory") from None

    def _emit(logger: object, name: str, event: dict[str, Any]) -> str:
        if log_handle is not None:
            log_handle.write(json_renderer(logger, name, dict(event)) + "\n")
            log_handle.flush()
        return renderer(logger, name, event)

    structlog.configure(
        processors=[*shared, _emit],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=files[0]),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str = "trace-tui") -> FilteringBoundLogger:
    import structlog

    return structlog.get_logger(name)
