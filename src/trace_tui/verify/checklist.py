"""The checklist that ``verify_release`` returns: one ``Check`` per claim, one ``FileReport`` per file.

Nothing here prints or exits; the command and the TUI render the checklist.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from trace_tui.verify.record import Record, Verification

if TYPE_CHECKING:  # pragma: no cover
    from typing import Literal

    Status = Literal["passed", "failed", "absent"]
    FileState = Literal["verified", "failed", "absent", "unverified"]


# Records, not pydantic models: the checklist is built from our own values (hundreds per
# run) on the timed `trace-tui verify` path, which must not pay for importing pydantic.
class Check(Record):
    """One line of the checklist. ``file`` is the file the status is about (blamed when failed)."""

    __slots__ = ("id", "group", "title", "file", "status", "expected", "actual", "message", "source", "details")
    _defaults = {"expected": None, "actual": None, "message": "", "source": None, "details": list}
    id: str
    group: Literal["lock", "declared", "document", "results", "aggregates", "validation"]
    title: str
    file: str
    status: Status
    expected: str | None
    actual: str | None
    message: str
    source: str | None  # where the expected value comes from
    details: list[str]


class FileReport(Record):
    __slots__ = ("path", "state", "needed", "sha256", "trusted_sha256", "trusted_by")
    _defaults = {"needed": False, "sha256": None, "trusted_sha256": None, "trusted_by": None}
    path: str
    state: FileState
    needed: bool
    sha256: str | None
    trusted_sha256: str | None
    trusted_by: str | None  # the declaration the trusted hash came from


class ReleaseVerification(Verification):
    __slots__ = ("release_dir", "checks", "files")
    release_dir: str
    checks: list[Check]
    files: list[FileReport]

    # -- views used by the CLI and the TUI --
    def by_status(self, status: Status) -> list[Check]:
        return [c for c in self.checks if c.status == status]

    @property
    def failed(self) -> list[Check]:
        return self.by_status("failed")

    @property
    def failed_files(self) -> list[str]:
        return sorted({c.file for c in self.failed})

    def files_in(self, state: FileState) -> list[FileReport]:
        return [f for f in self.files if f.state == state]

    @property
    def needed_absent(self) -> list[str]:
        return [f.path for f in self.files if f.needed and f.state == "absent"]

    def counts(self) -> dict[str, int]:
        c = Counter(x.status for x in self.checks)
        f = Counter(x.state for x in self.files)
        return {
            "checks": len(self.checks), "checks_passed": c["passed"], "checks_failed": c["failed"],
            "checks_absent": c["absent"], "files": len(self.files), "files_verified": f["verified"],
            "files_failed": f["failed"], "files_unverified": f["unverified"], "files_absent": f["absent"],
            "files_needed_absent": len(self.needed_absent),
        }

    def ok(self, strict: bool = False) -> bool:
        if self.failed or self.needed_absent:
            return False
        # --strict: the whole release, every file verified (nothing absent, nothing outside the chain).
        return not (strict and (self.by_status("absent") or self.files_in("absent") or self.files_in("unverified")))

