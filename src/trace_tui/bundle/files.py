"""The bundle's own files: the manifest's model, listing and reading the bundle folder (refusing
links and special files by name), and checking every file against the manifest."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Annotated, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trace_tui.errors import CheckFailed, UsageError
from trace_tui.recipe.schema import Recipe
from trace_tui.store.hashing import sha256_files

MANIFEST = "manifest.json"
CHUNK = 8 << 20
Say = Callable[[str], None]


class BundleFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    bytes: int = Field(ge=0)


# A bundle names its recipe by the recipe's own `name:` (recipe_schema.Recipe.name: lower-case
# letters, digits and dashes), never a path: the import prints it inside a command to run.
RecipeName = Annotated[(str, *Recipe.model_fields["name"].metadata)]  # (a tuple: Python 3.10)


class BundleManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: Literal["trace-tui-bundle-v1"] = "trace-tui-bundle-v1"
    trace_tui_version: str = Field(pattern=r"^[0-9A-Za-z][0-9A-Za-z.+!-]{0,63}$")  # a PEP 440 version
    recipe: RecipeName
    entries: list[str]
    images: dict[str, str]  # name -> image id
    files: dict[str, BundleFile]


LOCK_FILE = "images.lock.json"
CHARLIECLOUD_DIR = "images/charliecloud"  # KIND.tar: a Charliecloud directory image, for a site without Docker
MANIFEST_LIMIT = 256 << 20  # a manifest of a million files is well under this
RECORD_LIMIT = 64 << 20  # an image lock, a store entry's record
REEXPORT = "export the bundle again with `trace-tui bundle export` where the appliance was built"


def shown(text: object, limit: int = 160) -> str:
    """Text from a bundle as a message may show it: unprintable characters escaped (a name in a
    bundle must not start a second line, move the cursor or colour the terminal), long text cut."""
    safe = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in str(text))
    return safe if len(safe) <= limit else safe[:limit - 3] + "..."


def _first_error(exc: ValidationError) -> str:
    """A pydantic error in one line: the first bad field, what is wrong with it, the value found."""
    errors = exc.errors(include_url=False)
    err = errors[0]
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    if err["type"] == "json_invalid":
        return f"not valid JSON ({shown(err['msg'])})"
    where = ".".join(str(part) for part in err["loc"]) or "(the whole file)"
    found = "" if err["type"] == "missing" else f", found {shown(repr(err['input']), 80)}"
    return f"field '{shown(where)}': {err['msg']}{found}{more}"


def bundle_files(src: Path) -> set[str]:
    """The bundle's files (paths relative to SRC), from directory listings alone. A symbolic link
    anywhere (a file or a folder, manifest.json included), or anything but a plain file or folder,
    refuses the bundle by name before any content is read: a link would be hashed and imported from
    wherever it points, outside the bundle, and reading a FIFO would block for ever."""
    files: set[str] = set()
    folders = [src]
    while folders:
        folder = folders.pop()
        for item in _listing(folder):
            rel = Path(item.path).relative_to(src).as_posix()
            kind = _kind(item)
            if kind == "dir":
                folders.append(Path(item.path))
            elif kind == "file":
                files.add(rel)
            else:
                raise CheckFailed(f"bundle refused: {shown(rel)} is {kind}",
                                  hint=f"a bundle holds plain files and folders only; {REEXPORT}")
    return files


def _listing(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as items:
            return sorted(items, key=lambda item: item.name)
    except OSError as exc:
        raise CheckFailed(f"{shown(folder)}: cannot be listed ({exc.strerror or exc})",
                          hint="make the whole bundle readable by this user") from None


def _kind(item: os.DirEntry) -> str:
    try:
        if item.is_symlink():
            return "a symbolic link"
        if item.is_dir(follow_symlinks=False):
            return "dir"
        return "file" if item.is_file(follow_symlinks=False) else "not a plain file or folder"
    except OSError as exc:
        raise CheckFailed(f"{shown(item.path)}: cannot be examined ({exc.strerror or exc})") from None


def _read_bundle_file(src: Path, rel: str, *, limit: int) -> bytes:
    """A small file of the bundle, refused by name if it is missing, a link, not a plain file, larger
    than LIMIT or unreadable. Opened without following links or waiting on a FIFO."""
    path = src / rel
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise CheckFailed(f"{shown(path)}: missing from the bundle", hint=REEXPORT) from None
    except OSError as exc:
        what = "is a symbolic link" if os.path.islink(path) else f"cannot be read ({exc.strerror or exc})"
        raise CheckFailed(f"{shown(path)}: {what}", hint=f"make the bundle's files readable; or {REEXPORT}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise CheckFailed(f"{shown(path)}: not a plain file", hint=REEXPORT)
    with open(fd, "rb") as fh:
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise CheckFailed(f"{shown(path)}: cannot be read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise CheckFailed(f"{shown(path)}: larger than {limit >> 20} MiB, far more than such a file holds",
                          hint=REEXPORT)
    return data


def read_manifest(src: Path) -> BundleManifest:
    if not src.is_dir():
        raise UsageError(f"{src} is not a directory", hint="name the folder `trace-tui bundle export` wrote")
    path = src / MANIFEST
    if not os.path.lexists(path):
        # a folder with no manifest is not a bundle at all: bad input, like a file or a missing path
        raise UsageError(f"{path}: missing; {src} is not a trace-tui bundle (or an incomplete one)",
                         hint="name the folder `trace-tui bundle export` wrote, manifest.json and all")
    return parse_manifest(read_manifest_bytes(src), path)


def read_manifest_bytes(src: Path) -> bytes:
    return _read_bundle_file(src, MANIFEST, limit=MANIFEST_LIMIT)


def parse_manifest(data: bytes, path: Path) -> BundleManifest:
    try:
        return BundleManifest.model_validate_json(data)
    except ValidationError as exc:
        raise CheckFailed(f"{path}: not a valid bundle manifest: {_first_error(exc)}", hint=REEXPORT) from None


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError as exc:
        raise CheckFailed(f"{shown(path)}: cannot be examined ({exc.strerror or exc})") from None


def check_bundle(src: Path, manifest: BundleManifest, say: Say = print, on_disk: set[str] | None = None) -> list[str]:
    """Every problem with the bundle's files, one line each, naming the file. Empty: intact.
    ON_DISK: the bundle's files as `bundle_files` found them (listed here when not given)."""
    found = (bundle_files(src) if on_disk is None else on_disk) - {MANIFEST}
    listed = set(manifest.files)
    problems = [f"{shown(rel)}: missing from the bundle" for rel in sorted(listed - found)]
    problems += [f"{shown(rel)}: extra file, not in the bundle manifest" for rel in sorted(found - listed)]
    sizes = {rel: _size(src / rel) for rel in sorted(found & listed)}
    problems += [f"{shown(rel)}: {size} bytes, the manifest says {manifest.files[rel].bytes}"
                 for rel, size in sizes.items() if size != manifest.files[rel].bytes]
    sized_ok = [rel for rel, size in sizes.items() if size == manifest.files[rel].bytes]
    say(f"checking {len(sized_ok)} files ({sum(sizes[rel] for rel in sized_ok) >> 20} MiB)")
    unreadable: dict[Path, OSError] = {}
    digests = sha256_files([src / rel for rel in sized_ok], errors=unreadable)
    problems += [f"{shown(path.relative_to(src).as_posix())}: cannot be read ({exc.strerror or exc})"
                 for path, exc in unreadable.items()]
    for path, digest in digests.items():
        rel = path.relative_to(src).as_posix()
        if digest != manifest.files[rel].sha256:
            problems.append(f"{shown(rel)}: sha256 {digest} differs from the manifest's {manifest.files[rel].sha256}")
    return sorted(problems)
