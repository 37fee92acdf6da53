"""The record of one store entry (``entries/<kind>/<dir>/manifest.json``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MANIFEST_SCHEMA = "trace-tui-store-entry-v1"


class Expected(BaseModel):
    """A hash a trusted source stated for a file before it entered the store."""

    model_config = ConfigDict(extra="forbid")
    algorithm: Literal["sha256", "md5", "git-sha1"]
    value: str
    source: str  # where the expectation came from, e.g. "hub metadata (LFS sha256)"


class FileRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str  # relative to the entry's files/ folder, POSIX separators
    size: int
    sha256: str
    expected: list[Expected] = Field(default_factory=list)


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["huggingface", "git-raw", "url", "import", "local"]
    repo_id: str | None = None
    repo_type: Literal["model", "dataset"] | None = None
    revision: str | None = None
    url: str | None = None  # base URL or file URL (never with credentials)
    imported_from: str | None = None  # the directory or file a user named


class EntryRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: Literal["trace-tui-store-entry-v1"] = MANIFEST_SCHEMA
    name: str
    kind: str
    pinned: bool
    revision: str | None
    source: Source
    files: list[FileRecord]
    absent: list[str] = Field(default_factory=list, description="files the pin names that the source lacked")
    sha256set: str
    notes: dict[str, Any] = Field(default_factory=dict)
    added_at: str  # circumstance: recorded, never compared

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)
