"""Slurm, through its own commands only (sbatch, squeue, sacct, scancel).

Beside the Docker and local runtimes, below the engine: this module knows batch
scripts and job states, nothing about campaigns. The script text is built by pure
functions; the thin edges run Slurm's commands with subprocess.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from trace_tui.errors import RequirementsError, TraceTuiError

# squeue/sacct state -> what a person reads; every other state is shown as Slurm names it.
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED",
            "BOOT_FAIL", "DEADLINE"}
TIMEOUT_S = 60


@dataclass(frozen=True)
class BatchOptions:
    """What a site chooses for every job the campaign submits."""

    partition: str | None = None
    account: str | None = None
    gpus_per_node: int = 0
    time: str | None = None  # Slurm's time format: MINUTES, HH:MM:SS, D-HH:MM:SS
    cpus_per_task: int = 1


@dataclass(frozen=True)
class TaskState:
    """One job or array task as Slurm reports it."""

    job_id: str  # 123 or 123_4
    state: str  # PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, CANCELLED, ...
    reason: str = ""  # why a pending job waits (Resources, Priority, Dependency, ...)
    node: str = ""
    exit_code: str = ""


def _q(value: str) -> str:
    return shlex.quote(value)


def directives(name: str, log: str, opts: BatchOptions, *, array: str | None = None) -> list[str]:
    """``#SBATCH`` lines (pure)."""
    out = [f"#SBATCH --job-name={name}", f"#SBATCH --output={log}", f"#SBATCH --cpus-per-task={opts.cpus_per_task}",
           "#SBATCH --nodes=1", "#SBATCH --ntasks=1"]
    if array:
        out.append(f"#SBATCH --array={array}")
    if opts.partition:
        out.append(f"#SBATCH --partition={opts.partition}")
    if opts.account:
        out.append(f"#SBATCH --account={opts.account}")
    if opts.gpus_per_node:
        out.append(f"#SBATCH --gres=gpu:{opts.gpus_per_node}")
    if opts.time:
        out.append(f"#SBATCH --time={opts.time}")
    return out


def array_spec(indices: list[int], max_parallel: int | None) -> str:
    """``0-23%8`` or ``1,5,7%8``: the array tasks to run, throttled to ``max_parallel`` at once."""
    if not indices:
        raise ValueError("an array needs at least one task")
    ordered = sorted(set(indices))
    if ordered == list(range(ordered[0], ordered[-1] + 1)) and len(ordered) > 1:
        spec = f"{ordered[0]}-{ordered[-1]}"
    else:
        spec = ",".join(str(i) for i in ordered)
    return f"{spec}%{max_parallel}" if max_parallel else spec


def array_script(*, name: str, log: str, opts: BatchOptions, array: str, commands: dict[int, list[str]],
                 record: str, env: dict[str, str] | None = None) -> str:
    """A job array: task ``i`` runs ``commands[i]`` and records its exit status in ``record`` (a path template).

    The record lets the campaign tell a task's outcome even on a cluster whose
    accounting (sacct) is off; Slurm's own state is preferred where it has one.
    """
    lines = ["#!/bin/bash", *directives(name, log, opts, array=array), "set -u"]
    for key, value in sorted((env or {}).items()):
        lines.append(f"export {key}={_q(value)}")
    lines.append('case "$SLURM_ARRAY_TASK_ID" in')
    for index, argv in sorted(commands.items()):
        lines.append(f"  {index}) cmd=({' '.join(_q(a) for a in argv)}) ;;")
    lines.append('  *) echo "no shard for array task $SLURM_ARRAY_TASK_ID" >&2; exit 2 ;;')
    lines.append("esac")
    lines += _recorded_run(record)
    return "\n".join(lines) + "\n"


def single_script(*, name: str, log: str, opts: BatchOptions, commands: list[list[str]], record: str,
                  env: dict[str, str] | None = None) -> str:
    """One job that runs ``commands`` in order and stops at the first that fails."""
    lines = ["#!/bin/bash", *directives(name, log, opts), "set -u"]
    for key, value in sorted((env or {}).items()):
        lines.append(f"export {key}={_q(value)}")
    # the commands run one after another inside the recorded run (a bash function)
    lines.append("steps() {")
    for argv in commands:
        lines.append(f"  {' '.join(_q(a) for a in argv)} || return $?")
    lines.append("}")
    lines.append("cmd=(steps)")
    lines += _recorded_run(record)
    return "\n".join(lines) + "\n"


def _recorded_run(record: str) -> list[str]:
    # The command runs in the background so that the shell outlives scancel's SIGTERM (which Slurm sends
    # to every process of the job, the command included) and writes the record once the command has
    # saved its state.
    return [
        'echo "trace-tui: job ${SLURM_JOB_ID} task ${SLURM_ARRAY_TASK_ID:-} on $(hostname): ${cmd[*]}"',
        '"${cmd[@]}" &',
        "child=$!",
        "trap ':' TERM INT",
        "wait $child; rc=$?",
        "while kill -0 $child 2>/dev/null; do wait $child; rc=$?; done",
        f'record="{record}"',
        'mkdir -p "$(dirname "$record")"',
        'printf \'{"job_id": "%s", "array_job_id": "%s", "task": "%s", "node": "%s", "exit_code": %d, '
        '"finished_at": %d}\\n\' "${SLURM_JOB_ID}" "${SLURM_ARRAY_JOB_ID:-}" "${SLURM_ARRAY_TASK_ID:-}" '
        '"$(hostname)" "$rc" "$(date +%s)" > "$record.tmp" && mv "$record.tmp" "$record"',
        "exit $rc",
    ]


# --------------------------------------------------------------------------- the commands


def require_sbatch() -> str:
    path = shutil.which("sbatch")
    if path is None:
        raise RequirementsError("--scheduler slurm: `sbatch` is not on PATH on this machine",
                                hint="run on a Slurm login node, or load Slurm (e.g. `module load slurm`)")
    return path


def _run(argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise RequirementsError(f"`{argv[0]}` is not on PATH", hint="load Slurm on this machine") from None
    except subprocess.TimeoutExpired:
        raise TraceTuiError(f"`{' '.join(argv[:2])}` did not answer in {TIMEOUT_S} s (is slurmctld up?)") from None
    if check and proc.returncode != 0:
        err = " ".join((proc.stderr or proc.stdout).split())[:300]
        raise TraceTuiError(f"`{' '.join(_q(a) for a in argv)}` failed: {err}")
    return proc


def sbatch_argv(script: Path, *, dependency: str | None = None, array: str | None = None,
                test_only: bool = False) -> list[str]:
    argv = ["sbatch", "--parsable"]
    if test_only:
        argv.append("--test-only")
    if array:
        argv.append(f"--array={array}")
    if dependency:
        argv.append(f"--dependency={dependency}")
    argv.append(str(script))
    return argv


def submit(script: Path, *, dependency: str | None = None, array: str | None = None) -> str:
    """Submit a batch script; its job id."""
    proc = _run(sbatch_argv(script, dependency=dependency, array=array))
    job_id = proc.stdout.strip().split(";")[0]
    if not re.fullmatch(r"\d+", job_id):
        raise TraceTuiError(f"sbatch {script} answered {proc.stdout.strip()!r}, not a job id")
    return job_id


def test_only(script: Path, *, dependency: str | None = None, array: str | None = None) -> str:
    """``sbatch --test-only``: Slurm checks the script and says when it would start it; nothing is submitted."""
    proc = _run(sbatch_argv(script, dependency=dependency, array=array, test_only=True))
    return " ".join((proc.stderr + proc.stdout).split())


def queue(job_ids: list[str]) -> dict[str, TaskState]:
    """Jobs and array tasks slurmctld still holds (squeue, every state; finished ones go after MinJobAge)."""
    if not job_ids:
        return {}
    proc = _run(["squeue", "-h", "-r", "-t", "all", "-j", ",".join(job_ids), "-o", "%i|%T|%r|%N"], check=False)
    out: dict[str, TaskState] = {}
    for line in proc.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 4:
            reason = "" if parts[2] in ("None", "(null)") else parts[2]
            out[parts[0]] = TaskState(job_id=parts[0], state=parts[1], reason=reason, node=parts[3])
    return out


def accounting(job_ids: list[str]) -> dict[str, TaskState]:
    """Every job and array task of ``job_ids`` with its final state (sacct); empty where accounting is off."""
    if not job_ids or shutil.which("sacct") is None:
        return {}
    proc = _run(["sacct", "-n", "-P", "-X", "-j", ",".join(job_ids), "-o", "JobID,State,ExitCode,NodeList"],
                check=False)
    if proc.returncode != 0:
        return {}
    out: dict[str, TaskState] = {}
    for line in proc.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 4:
            state = parts[1].split()[0] if parts[1] else ""  # "CANCELLED by 0" -> CANCELLED
            out[parts[0]] = TaskState(job_id=parts[0], state=state, node=parts[3], exit_code=parts[2])
    return out


def cancel(job_ids: list[str]) -> None:
    if job_ids:
        _run(["scancel", *job_ids])


__all__ = ["BatchOptions", "TERMINAL", "TaskState", "accounting", "array_script", "array_spec", "cancel",
           "directives", "queue", "require_sbatch", "sbatch_argv", "single_script", "submit", "test_only"]
