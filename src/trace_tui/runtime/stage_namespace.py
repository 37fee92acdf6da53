"""`python -m trace_tui.runtime.stage_namespace [--net] RO_PATH... -- COMMAND...`, as root of a user namespace of
its own (`unshare --user --map-root-user --mount [--net]`): what a runtime without them (Charliecloud) lacks
of the stage contract, then COMMAND in place of this process.

- each RO_PATH is bind-mounted onto itself read-only; a later bind of it (ch-run's) keeps the flag, and the
  runtime's own namespace, made after this one, cannot lift it;
- with --net (a network namespace of its own, where the loopback starts down), the loopback is brought up,
  as Docker's `network_mode=none` leaves it: local sockets (torch's process group, vLLM's engine) work, and
  nothing else is reachable.

Standard library only (ctypes for mount(2), an ioctl for the interface), no `mount` or `ip` command: a
compute node may lack iproute2.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct
import sys

MS_RDONLY = 0x1
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1


def _mount(source: str, target: str, flags: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(source.encode(), target.encode(), None, flags, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def read_only(path: str) -> None:
    _mount(path, path, MS_BIND | MS_REC)
    _mount(path, path, MS_BIND | MS_REMOUNT | MS_RDONLY)


def loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        name = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, name + b"\0" * 22)[:18])[1]
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | IFF_UP) + b"\0" * 22)


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print("usage: stage_namespace [--net] RO_PATH... -- COMMAND...", file=sys.stderr)
        return 2
    cut = argv.index("--")
    paths, command = argv[:cut], argv[cut + 1:]
    try:
        if paths[:1] == ["--net"]:
            paths = paths[1:]
            loopback_up()
        for path in paths:
            read_only(path)
    except OSError as exc:
        print(f"trace-tui: setting up the stage's namespace failed: {exc}", file=sys.stderr)
        return 125
    os.execvp(command[0], command)
    return 127  # pragma: no cover - execvp does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
