"""Local runtime: the stage contract as subprocesses in the current Python environment.

For machines without Docker and for fast tests. The worker gets the same three
things a container gets, by environment instead of mounts: TRACE_TUI_JOB,
TRACE_TUI_CAMPAIGN, TRACE_TUI_STORE. Nothing is isolated: no read-only store,
no network namespace, no memory limit (the runner says so when a step asks).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from trace_tui import __version__
from trace_tui.common.safe_write import open_append
from trace_tui.runtime.base import ExitInfo, Launch, Tail, step_env

_PR_SET_PDEATHSIG = 1
NEUTRAL_CWD = "/"  # a directory nobody but root writes to
try:  # resolved here, in the parent: the child between fork and exec must not load libraries
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _prctl = None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    # A kill -9 of the runner must not leave a worker writing into the campaign behind it.
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))


class LocalHandle:
    def __init__(self, proc: subprocess.Popen[bytes], log: IO[str]) -> None:
        self.proc = proc
        self._log = log
        self._tail = Tail()
        self._stopped = threading.Event()
        self._log_lock = threading.Lock()
        self._stderr_thread = threading.Thread(target=self._pump_stderr, daemon=True)
        self._stderr_thread.start()

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", errors="replace")
            self._tail.add(line)
            with self._log_lock:
                self._log.write(line)

    def lines(self) -> Iterator[str]:
        for batch in self.batches():
            yield from batch

    def batches(self) -> Iterator[list[str]]:
        """stdout as lists of the complete lines that arrived together (one read each, up to 256 KiB).

        What the runner coalesces: progress lines a worker wrote in one burst are read in one
        system call, not one per line.
        """
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        rest = b""
        while True:
            chunk = os.read(fd, 1 << 18)
            if not chunk:
                break
            data = rest + chunk
            cut = data.rfind(b"\n") + 1
            if cut:
                # One decode per read: b"\n" is never part of a multi-byte UTF-8 sequence, so this
                # decodes each line exactly as decoding it alone would.
                yield self._texts(data[:cut].decode("utf-8", errors="replace").split("\n")[:-1], "\n")
            rest = data[cut:]
        if rest:
            yield self._texts([rest.decode("utf-8", errors="replace")], "")

    def _texts(self, texts: list[str], end: str) -> list[str]:
        out = []
        for text in texts:
            line = text + end
            if not line.startswith("{"):
                self._tail.add(line)
                with self._log_lock:
                    self._log.write(line)
            out.append(line)
        return out

    def wait(self) -> ExitInfo:
        code = self.proc.wait()
        self._stderr_thread.join(timeout=5)
        with self._log_lock:
            self._log.close()
        # A negative code is a signal: SIGKILL from outside is the usual sign of the kernel's OOM killer.
        return ExitInfo(exit_code=code if code >= 0 else 128 - code, stopped=self._stopped.is_set(),
                        tail=self._tail.lines())

    def stop(self, grace: float = 5.0) -> None:
        self._stopped.set()
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def spawn(argv: list[str], env: dict[str, str], log_path: Path) -> LocalHandle:
    """A stage's process: stdout read by the runner, stderr into LOG_PATH, dying with the runner."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open_append(log_path)  # never through a link planted in its place; closed by the handle
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        # Never the campaign: `python -m` puts the working directory first on sys.path, and a
        # json.py or trace_tui/ a campaign holds would run as the user in place of ours.
        cwd=NEUTRAL_CWD,
        # Own process group: Ctrl-C in the terminal reaches the runner, which stops workers itself.
        start_new_session=True, preexec_fn=_die_with_parent,
    )
    return LocalHandle(proc, log)


class LocalRuntime:
    name = "local"

    def __init__(self, python: str | None = None, **_: object) -> None:
        self.python = python or sys.executable

    def check(self, image_kinds: set[str], *, gpus: bool) -> list[str]:
        return []

    def image_id(self, kind: str | None) -> str:
        # No image: the identity of what runs is this interpreter and this package version.

        return f"local:python{sys.version_info[0]}.{sys.version_info[1]}:trace-tui-{__version__}"

    def start(self, launch: Launch) -> LocalHandle:
        from trace_tui.recipe.schema import entry_point_problem

        problem = entry_point_problem([launch.module, *launch.args])
        if problem is not None:  # the last gate before a process starts: only trace-tui's own workers
            raise ValueError(f"step {launch.step}: run {problem}; not started")
        env = dict(os.environ)
        env.update(step_env(launch))
        env.update({
            "TRACE_TUI_JOB": str(launch.job_dir / "job.json"),
            "TRACE_TUI_CAMPAIGN": str(launch.campaign),
            "TRACE_TUI_STORE": str(launch.store),
            "PYTHONUNBUFFERED": "1",
        })
        if launch.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in launch.gpus)
        src = str(Path(__file__).resolve().parents[2])  # the trace_tui package, also when not installed
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
        # -P (Python >= 3.11): the worker never has its working directory on sys.path. A flag, not
        # PYTHONSAFEPATH, so that the scripts a worker runs (the release evaluator's) keep their own
        # directory on sys.path for their sibling imports.
        safe_path = ["-P"] if sys.version_info >= (3, 11) and self.python == sys.executable else []
        return spawn([self.python, *safe_path, "-m", launch.module,
                      *(a.replace("{campaign}", str(launch.campaign)).replace("{store}", str(launch.store))
                        for a in launch.args)], env, launch.log_path)

    def cleanup(self, campaign_id: str, *, keep_owner: str | None = None) -> int:
        return 0  # workers die with their runner (PR_SET_PDEATHSIG)
