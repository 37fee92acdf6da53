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


# C0 and C1 control characters: written escaped (\n, \x1b) wherever a message echoes a name it was given.
_CONTROL = {c: repr(chr(c))[1:-1] for c in (*range(0x20), *range(0x7F, 0xA0))}


def printable(text: str) -> str:
    """TEXT with its control characters escaped as Python writes them (a newline as \\n, ESC as \\x1b):
    a path holding them would otherwise break a one-line message or drive the terminal."""
    return text.translate(_CONTROL)


_PATH_PROBLEMS = {
    errno.ENAMETOOLONG: "a name in it is too long (at most 255 bytes a folder or file name, 4096 the whole path)",
    errno.ELOOP: "a symbolic link loop (a link that leads back to itself)",
    errno.EACCES: "permission denied (a folder on the way this user may not read or enter)",
    errno.EPERM: "operation not permitted",
    errno.ENOTDIR: "a part of the path is a file, not a directory",
    errno.ENOENT: "no such file or directory",
    errno.EROFS: "on a read-only filesystem",
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
}


def os_error_line(exc: OSError) -> str | None:
    """One line for an OSError about a path ("PATH: what is wrong with it, and the fix"); None for one that names
    no path (a surprise, reported as such)."""
    if exc.filename is None:
        return None
    what = _PATH_PROBLEMS.get(exc.errno or 0) or (exc.strerror or type(exc).__name__).lower()
    fix = "free space there and run the same command again" if out_of_space(exc) else "give a path that can be used"
    return f"{exc.filename}: {what} ({fix})"
