"""YAML documents of a release, parsed the same way in-process or in a forked child.

Importing PyYAML compiles large regular expressions and costs about as much as all the rest
of `trace-tui verify --release-dir` (the release's training configs are its only YAML). The
verifier therefore forks a child that imports PyYAML and parses those files while the parent
reads and hashes everything else; the parent takes the child's result when it reaches them.
A child that cannot be started or fails for any reason changes nothing: the parent then
parses in-process, with the same result. The child is a copy of this process that only runs
this module; what it sends back is marshalled (values of YAML's safe types; a value marshal
cannot carry, such as a timestamp, makes the child fail and the parent parse).
"""

from __future__ import annotations

import json
import marshal
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from trace_tui.common.safe_read import MAX_DOCUMENT_BYTES, Folder, NotRead
from trace_tui.resources import release_lock_path

if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

    Parsed = tuple[Any, "str | None"]  # (value, error line)

TOO_DEEP = "nested too deeply to be a release document"


def is_yaml(path: str) -> bool:
    return path.endswith((".yaml", ".yml"))


def parse(data: bytes) -> Parsed:
    """(value, None), or (None, the one-line reason the bytes are not a YAML document)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(data.decode("utf-8"), Loader=loader), None  # noqa: S506 - a safe loader
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        return None, f"not valid YAML: {str(exc).splitlines()[0]}"
    except ValueError as exc:  # a value Python refuses to build, e.g. an integer of more than 4,300 digits
        return None, f"not valid YAML: {str(exc).split(';')[0]}"
    except RecursionError:
        return None, TOO_DEEP


class BackgroundParse:
    """Parses the YAML files ``paths`` under ``root`` in a forked child; ``take`` waits for its result.

    The child reads the files itself, so it can start before the verifier has read anything;
    a result is used only for the very bytes the verifier read. It reads as the verifier does
    (``common.safe_read``): a file that is not a regular file inside ``root``, or is too large,
    is left to the parent, which fails it without parsing it.
    """

    def __init__(self, root: Path, paths: list[str]) -> None:
        self._results: dict[str, tuple[bytes, Parsed]] | None = None
        self._pid, self._fd = self._start(root, paths) if paths and _fork_is_safe() else (0, -1)

    @staticmethod
    def _start(root: Path, paths: list[str]) -> tuple[int, int]:
        try:
            r, w = os.pipe()
            pid = os.fork()
        except OSError:
            return 0, -1
        if pid == 0:  # the child: parse, send, and leave without running the parent's exit handlers
            code = 1
            try:
                os.close(r)
                out = {}
                folder = Folder(root, "the release directory")
                for p in paths:
                    try:
                        data = folder.read(p, MAX_DOCUMENT_BYTES)
                    except NotRead:
                        continue
                    if data is not None:
                        out[p] = (data, parse(data))
                payload = marshal.dumps(out)
                with os.fdopen(w, "wb") as pipe:
                    pipe.write(payload)
                code = 0
            except BaseException:  # noqa: BLE001 - any failure: the parent parses instead
                pass
            finally:
                os._exit(code)
        os.close(w)
        return pid, r

    def _collect(self) -> dict[str, tuple[bytes, Parsed]]:
        if self._results is None:
            self._results = {}
            if self._pid:
                chunks = []
                try:
                    with os.fdopen(self._fd, "rb") as pipe:
                        while chunk := pipe.read(1 << 16):
                            chunks.append(chunk)
                    _, status = os.waitpid(self._pid, 0)
                    if os.waitstatus_to_exitcode(status) == 0:
                        self._results = marshal.loads(b"".join(chunks))
                except (OSError, EOFError, ValueError, TypeError):
                    self._results = {}
                self._pid = 0
        return self._results

    def take(self, path: str, data: bytes) -> Parsed:
        """The parse of ``data`` at ``path``: the child's when it parsed these very bytes, else done here."""
        got = self._collect().get(path)
        return tuple(got[1]) if got is not None and got[0] == data else parse(data)  # type: ignore[return-value]


def parse_configs_ahead(root: Path) -> BackgroundParse:
    """Start parsing the release's YAML (the training configs the release lock names) under ``root``."""
    try:
        lock = json.loads(release_lock_path().read_text(encoding="utf-8"))
        paths = sorted(p for p in lock["training"]["configs"].values() if is_yaml(p))
    except (OSError, ValueError, KeyError, AttributeError, TypeError):
        paths = []
    return BackgroundParse(root, paths)


def _fork_is_safe() -> bool:
    # Forking while other threads run (the TUI verifies in a worker thread) could copy a lock some
    # thread holds, the import lock included, into a child that then waits forever. Once PyYAML is
    # loaded there is nothing left to save.
    # (No threading module loaded: no thread was started through it.)
    threading = sys.modules.get("threading")
    alone = threading is None or threading.active_count() == 1
    return hasattr(os, "fork") and alone and "yaml" not in sys.modules
