"""Running trace-tui as an unprivileged user with rootless Podman, for the runtime tests.

As root (CI), the tests run trace-tui as a user of their own (`trace-tui-ci`, made here once, with
subordinate ids for rootless Podman and Podman's overlay storage, as a site's user would have): root's
Podman is not what a cluster user has. As any other user, they run as that user. The user runs this
tree's trace-tui with an interpreter it may execute (the test venv's may live under a private /root):
the system CPython of the same minor version, with the venv's site-packages on its path.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CI_USER = "trace-tui-ci"
SUBIDS = "300000-365535"
STORAGE_CONF = '[storage]\ndriver = "overlay"\n'


@dataclass(frozen=True)
class PodmanUser:
    name: str
    uid: int
    gid: int
    home: Path
    python: str
    pythonpath: str

    def command(self, *args: str, env: dict[str, str] | None = None) -> list[str]:
        """ARGS run as this user in its home folder (the caller's may be one the user cannot enter, such as a
        checkout under a 0700 `mktemp -d`) with a clean environment plus ENV."""
        base = {"HOME": str(self.home), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
                "PYTHONPATH": self.pythonpath, **(env or {})}
        pairs = [f"{k}={v}" for k, v in base.items()]
        if os.getuid() == self.uid:
            return ["env", "-i", "-C", str(self.home), *pairs, *args]
        return ["runuser", "-u", self.name, "--", "env", "-i", "-C", str(self.home), *pairs, *args]

    def trace_tui(self, *args: str, env: dict[str, str] | None = None) -> list[str]:
        return self.command(self.python, "-m", "trace_tui", *args, env=env)

    def folder(self, prefix: str) -> Path:
        """A new folder this user owns and may write, outside root's private temporary folders."""
        path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
        os.chown(path, self.uid, self.gid)
        return path


def _system_python() -> str:
    """A CPython the user may execute, of the venv's minor version (the venv's compiled packages load in it)."""
    want = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (f"/usr/bin/{want}", f"/usr/local/bin/{want}"):
        if os.access(candidate, os.X_OK):
            return candidate
    raise AssertionError(f"no system {want} for the unprivileged user (Debian: apt install {want})")


def podman_user() -> PodmanUser:
    if os.getuid() != 0:
        me = pwd.getpwuid(os.getuid())
        user = me.pw_name
    else:
        try:
            pwd.getpwnam(CI_USER)
        except KeyError:
            subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", CI_USER], check=True)
        subids = Path("/etc/subuid").read_text() if Path("/etc/subuid").exists() else ""
        if not any(line.startswith(f"{CI_USER}:") for line in subids.splitlines()):
            subprocess.run(["usermod", "--add-subuids", SUBIDS, "--add-subgids", SUBIDS, CI_USER], check=True)
        me = pwd.getpwnam(CI_USER)
        user = CI_USER
    home = Path(me.pw_dir)
    conf = home / ".config" / "containers" / "storage.conf"
    if not conf.exists():  # Podman 4's rootless default is vfs, a full copy of the image per layer
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text(STORAGE_CONF)
        if os.getuid() == 0:
            for path in (home / ".config", conf.parent, conf):
                os.chown(path, me.pw_uid, me.pw_gid)
    site = sysconfig.get_paths()["purelib"]
    return PodmanUser(name=user, uid=me.pw_uid, gid=me.pw_gid, home=home, python=_system_python(),
                      pythonpath=f"{ROOT / 'src'}:{site}")


@contextmanager
def traversable(*paths: Path) -> Iterator[None]:
    """Every folder above PATHS may be passed through by others while the block runs (a checkout under a
    `mktemp -d` folder is 0700): execute permission only, nothing becomes readable; modes are restored."""
    changed: list[tuple[Path, int]] = []
    for path in paths:
        for folder in [path, *path.parents]:
            mode = folder.stat().st_mode
            if folder.is_dir() and not mode & stat.S_IXOTH:
                os.chmod(folder, mode | stat.S_IXOTH)
                changed.append((folder, mode))
    try:
        yield
    finally:
        for folder, mode in reversed(changed):
            os.chmod(folder, stat.S_IMODE(mode))


def load_images(user: PodmanUser, refs: list[str]) -> None:
    """`docker save REFS | podman load` into the user's own Podman storage."""
    save = subprocess.Popen(["docker", "save", *refs], stdout=subprocess.PIPE)
    done = subprocess.run(user.command("podman", "load"), stdin=save.stdout, capture_output=True, text=True,
                          timeout=1800)
    save.stdout.close()
    assert save.wait() == 0 and done.returncode == 0, done.stderr[-2000:]


def remove_images(user: PodmanUser, ids: list[str]) -> None:
    """Give the disk back: the test user's whole Podman storage goes (it holds nothing else); a developer
    running the tests as themselves loses only the images the test loaded."""
    if user.name == CI_USER:
        subprocess.run(user.command("podman", "system", "reset", "--force"), capture_output=True, timeout=600)
    else:
        subprocess.run(user.command("podman", "rmi", "--force", *ids), capture_output=True, timeout=600)


def remove_folder(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
