"""Errors that the CLI turns into one clear line and an exit code (never a traceback)."""

from __future__ import annotations

import errno


class ExitCode:
    OK = 0
    FAILED = 1  # a check or a step failed
    USAGE = 2  # usage error or bad input
    REQUIREMENTS = 3  # this machine or the store does not meet a recipe's needs
    INTERRUPTED = 130


class TraceTuiError(Exception):
    """An expected failure with a message meant for the user."""

    exit_code = ExitCode.FAILED

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def line(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UsageError(TraceTuiError):
    exit_code = ExitCode.USAGE


class RequirementsError(TraceTuiError):
    exit_code = ExitCode.REQUIREMENTS


class CheckFailed(TraceTuiError):
    exit_code = ExitCode.FAILED


def out_of_space(exc: BaseException) -> bool:
    """A write that failed for want of space: the disk is full (ENOSPC) or the quota spent (EDQUOT)."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
