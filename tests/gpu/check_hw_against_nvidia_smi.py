#!/usr/bin/env python3
"""Check `trace-tui hw --json` against `nvidia-smi` on a real GPU machine.

The test suite fakes NVML (there is no GPU where it runs); this script is the
real-hardware counterpart. Run it on a machine with the NVIDIA driver:

    python tests/gpu/check_hw_against_nvidia_smi.py [--trace-tui "python -m trace_tui"]

It compares, per GPU: index, name, UUID, total memory (exact to the MiB),
free memory (within 2 GiB: other processes move it), compute capability, MIG
mode, volatile uncorrectable ECC errors and NVLink links up; and the driver
and CUDA driver versions. Exit 0 when everything agrees, 1 with a line per
difference otherwise, 2 when nvidia-smi is missing. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
import sys

FIELDS = ["index", "name", "uuid", "memory.total", "memory.free", "compute_cap", "mig.mode.current",
          "ecc.errors.uncorrected.volatile.total", "driver_version"]
MIB = 1024 * 1024
FREE_TOLERANCE_MIB = 2048


def _na(value: str) -> str | None:
    value = value.strip()
    return None if value in ("[N/A]", "N/A", "[Not Supported]", "Not Supported", "") else value


def smi_gpus() -> list[dict[str, str | None]]:
    out = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(FIELDS)}", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        rows.append({k: _na(v) for k, v in zip(FIELDS, parts)})
    return rows


def smi_cuda_version() -> str | None:
    out = subprocess.run(["nvidia-smi"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"CUDA Version:\s*([0-9.]+)", out)
    return m.group(1) if m else None


def smi_nvlinks_up(index: int) -> int:
    proc = subprocess.run(["nvidia-smi", "nvlink", "--status", "-i", str(index)], capture_output=True, text=True)
    if proc.returncode != 0:
        return 0
    return len(re.findall(r"Link \d+:\s*[0-9.]+\s*GB/s", proc.stdout))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace-tui", default=f"{shlex.quote(sys.executable)} -m trace_tui",
                    help="how to run trace-tui (default: this Python's trace_tui module)")
    args = ap.parse_args()
    if not shutil.which("nvidia-smi"):
        print("nvidia-smi not found: run this on a machine with the NVIDIA driver", file=sys.stderr)
        return 2
    hw = json.loads(subprocess.run(shlex.split(args.trace_tui) + ["hw", "--json"], capture_output=True, text=True,
                                   check=True).stdout)["hardware"]["gpu"]
    smi = smi_gpus()
    problems: list[str] = []

    def same(what: str, ours: object, theirs: object) -> None:
        if ours != theirs:
            problems.append(f"{what}: trace-tui {ours!r} != nvidia-smi {theirs!r}")

    same("status", hw["status"], "ok")
    same("GPU count", len(hw["gpus"]), len(smi))
    if smi:
        same("driver version", hw["driver_version"], smi[0]["driver_version"])
    same("CUDA driver version", hw["cuda_driver_version"], smi_cuda_version())
    for ours, theirs in zip(hw["gpus"], smi):
        i = ours["index"]
        same(f"GPU {i} index", str(i), theirs["index"])
        same(f"GPU {i} name", ours["name"], theirs["name"])
        same(f"GPU {i} uuid", ours["uuid"], theirs["uuid"])
        same(f"GPU {i} memory.total MiB", ours["memory_total_bytes"] // MIB, int(theirs["memory.total"] or -1))
        free = ours["memory_free_bytes"] // MIB
        if abs(free - int(theirs["memory.free"] or 0)) > FREE_TOLERANCE_MIB:
            problems.append(f"GPU {i} memory.free: trace-tui {free} MiB vs nvidia-smi {theirs['memory.free']} MiB "
                            f"(more than {FREE_TOLERANCE_MIB} MiB apart)")
        if theirs["compute_cap"] is not None:  # older nvidia-smi lacks the field
            same(f"GPU {i} compute capability", ours["compute_capability"], theirs["compute_cap"])
        mig = {"Enabled": "enabled", "Disabled": "disabled", None: "n/a"}.get(theirs["mig.mode.current"], "?")
        same(f"GPU {i} MIG mode", ours["mig_mode"], mig)
        ecc = theirs["ecc.errors.uncorrected.volatile.total"]
        same(f"GPU {i} volatile uncorrected ECC", ours["ecc_volatile_uncorrected"], int(ecc) if ecc else None)
        same(f"GPU {i} NVLink links up", ours["nvlink_links_up"], smi_nvlinks_up(i))
    for g in hw["gpus"]:
        print(f"[{g['index']}] {g['name']} {g['memory_total_bytes'] // MIB} MiB cc {g['compute_capability']} "
              f"MIG {g['mig_mode']} ECC {g['ecc_volatile_uncorrected']} NVLink {g['nvlink_links_up']}")
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    print(f"trace-tui hw agrees with nvidia-smi on {len(smi)} GPU(s), driver {hw['driver_version']}, "
          f"CUDA {hw['cuda_driver_version']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
