"""Reading a file of a folder handed to trace-tui: only a regular file, only inside the folder, only so much.

A release directory or a campaign is data, and any file in it may be something else than it
seems: a link to /etc/passwd or to a copy elsewhere (its bytes would be verified as the
release's), a FIFO (opening it waits for a writer that never comes), a character device
(/dev/zero never ends), a directory, a file without read permission. ``Folder`` reads a
file only when its real path lies inside the real path of the folder and it is a regular
file; anything else raises ``NotRead`` with a phrase saying why, which a checklist line or
an error line can quote. Nothing is ever opened before it is known to be a regular file, so
no device is opened (some act on open) and no FIFO blocks.

Standard library only, like the rest of ``common``; the stage workers read campaign files
inside the images with it.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat

# Far above any document a release or a campaign holds (the release's largest, results.json, is
# about 350 KiB; a full campaign's recipe.json well under 1 MiB), far below what would exhaust memory.
MAX_DOCUMENT_BYTES = 64 << 20

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a link"))


class NotRead(Exception):
    """Something is there, but it was not read; ``reason`` is why, a phrase such as "not a regular file (a FIFO)"."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a file")


def _cannot(exc: OSError) -> NotRead:
    return NotRead(f"cannot be read ({exc.strerror or exc})")


def _open_regular(path: str, st: os.stat_result, flags: int = 0) -> io.FileIO:
    """``path`` (whose stat is ``st``) opened for reading, known to be a regular file; raises NotRead otherwise."""
    if not stat.S_ISREG(st.st_mode):
        raise NotRead(f"not a regular file ({_kind(st.st_mode)}); not read")
    try:
        # O_NONBLOCK: should a FIFO have been put in its place since the stat, the open returns at once.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | flags)
    except OSError as exc:
        raise _cannot(exc) from None
    fh = io.FileIO(fd, "rb")
    now = os.fstat(fd)
    if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
        fh.close()
        raise NotRead("replaced while being read; not read")
    return fh


def _read_at_most(fh: io.FileIO, limit: int) -> bytes:
    too_large = NotRead(f"larger than {limit >> 20} MiB, the most a document may be; not read")
    with fh:
        try:
            size = os.fstat(fh.fileno()).st_size
            if size > limit:
                raise too_large
            parts: list[bytes] = []
            got = 0
            ask = size + 1  # one more than its size: a file that grows meanwhile is read on, up to the limit
            while part := fh.read(ask):
                got += len(part)
                if got > limit:
                    raise too_large
                parts.append(part)
                ask = min(1 << 20, limit + 1 - got)
        except OSError as exc:  # EIO from a failing disk, ...
            raise _cannot(exc) from None
        return b"".join(parts)


def _sha256(fh: io.FileIO) -> str:
    with fh:
        h = hashlib.sha256()
        buf = bytearray(1 << 20)
        view = memoryview(buf)
        try:
            while n := fh.readinto(buf):
                h.update(view[:n])
        except OSError as exc:
            raise _cannot(exc) from None
        return h.hexdigest()


def read_regular_file(path: os.PathLike | str, limit: int = MAX_DOCUMENT_BYTES) -> bytes:
    """The bytes of the regular file at ``path`` (links followed), at most ``limit`` of them.

    Raises FileNotFoundError when nothing is there, NotRead when it is not a regular file,
    cannot be read or is larger than ``limit``.
    """
    path = os.fspath(path)
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        if os.path.islink(path):
            raise NotRead("a link to a file that does not exist; not read") from None
        raise FileNotFoundError(path) from None
    except OSError as exc:
        raise _cannot(exc) from None
    return _read_at_most(_open_regular(path, st), limit)


class Folder:
    """The files under ``root`` whose real path lies inside root's real path; ``name`` names root in reasons."""

    def __init__(self, root: os.PathLike | str, name: str = "the folder") -> None:
        self.root = os.fspath(root)
        real = os.path.realpath(self.root)
        self._inside = real if real.endswith(os.sep) else real + os.sep
        self.name = name
        self._real_folders: dict[str, str] = {}

    def _open(self, rel: str) -> io.FileIO | None:
        """``rel`` opened for reading; None when nothing is there (a path through a plain file included)."""
        path = os.path.join(self.root, rel)
        failure = None
        try:
            # Most paths a release lists are absent: one call settles them (no link is there either).
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:  # EACCES on a folder on the way, ELOOP, ...
            st, failure = None, _cannot(exc)
        link = st is not None and stat.S_ISLNK(st.st_mode)
        if link:
            try:
                os.stat(path)
            except (FileNotFoundError, NotADirectoryError):
                failure = NotRead("a link to a file that does not exist; not read")
            except OSError as exc:
                failure = _cannot(exc)
        # The real path decides, wherever the link is: the file itself or any folder on the way. (A
        # folder's real path is looked up once: a release's files share a few folders.)
        folder, name = os.path.split(path)
        if link or failure is not None or name in ("", ".", ".."):
            real = os.path.realpath(path)
        else:
            real_folder = self._real_folders.get(folder)
            if real_folder is None:
                real_folder = self._real_folders[folder] = os.path.realpath(folder)
            real = os.path.join(real_folder, name)
        if not real.startswith(self._inside):
            raise NotRead(f"a link out of {self.name}; not read")
        if failure is not None:
            raise failure
        # What is opened is the real path, checked above, not the path through the links again.
        if link or real != path:
            try:
                st = os.stat(real, follow_symlinks=False)
            except OSError as exc:
                raise _cannot(exc) from None
        return _open_regular(real, st, getattr(os, "O_NOFOLLOW", 0))

    def read(self, rel: str, limit: int = MAX_DOCUMENT_BYTES) -> bytes | None:
        """The bytes of ``rel`` (at most ``limit``); None when absent; NotRead when it may not or cannot be read."""
        fh = self._open(rel)
        return None if fh is None else _read_at_most(fh, limit)

    def sha256(self, rel: str) -> str | None:
        """The hex sha256 of ``rel``, streamed (any size); None when absent; NotRead as ``read``."""
        fh = self._open(rel)
        return None if fh is None else _sha256(fh)

    def sha256_size(self, rel: str, keep: int = 0) -> tuple[str, int, bytes | None] | None:
        """(hex sha256, bytes, the bytes themselves when there are at most ``keep``) of ``rel``, streamed (any
        size): one open and read per file, for a checker that also parses the small ones (a campaign's rows).
        None when absent; NotRead as ``read``."""
        fh = self._open(rel)
        if fh is None:
            return None
        with fh:
            try:
                if os.fstat(fh.fileno()).st_size <= keep:
                    parts: list[bytes] = []
                    got = 0
                    while part := fh.read(keep + 1 - got if got <= keep else 1 << 20):
                        parts.append(part)
                        got += len(part)
                    data = b"".join(parts)
                    return hashlib.sha256(data).hexdigest(), len(data), data if len(data) <= keep else None
                h = hashlib.sha256()
                buf = bytearray(1 << 20)
                view = memoryview(buf)
                size = 0
                while n := fh.readinto(buf):
                    h.update(view[:n])
                    size += n
                return h.hexdigest(), size, None
            except OSError as exc:
                raise _cannot(exc) from None
