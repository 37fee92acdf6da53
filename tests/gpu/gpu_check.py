#!/usr/bin/env python3
"""The GPU check a maintainer runs on a machine with an NVIDIA GPU: one script, one summary.

    python tests/gpu/gpu_check.py [--only hw,generate,train,plan] [--rows N] [--json]

Under 5 minutes on one GPU; no network, no Docker (the tiny model is built locally; the
TRACE sample comes from ../shared/trace-sample or TRACE_SAMPLE_DIR). Not collected by pytest.

Parts (each bounded by its own time limit; a part that fails or times out says why):
  hw        `trace-tui hw --json` against nvidia-smi: names, UUIDs, memory, driver, CUDA, MIG,
            ECC, NVLink (tests/gpu/check_hw_against_nvidia_smi.py)
  generate  the generate worker with the transformers backend on the tiny Qwen2.5-VL, bf16 on
            the GPU, N rows run twice: seconds per row, peak GPU memory, same responses twice
  train     one TRL GRPO step on the tiny model in bf16 (tests/gpu/train_smoke_gpu.py):
            step time, peak GPU memory, grad norm
  plan      the GPU plan on this machine (trace_tui.gpu_plan.run_plan) for validation, full,
            smoke-3b and smoke-7b: what each step's containers would be given

Exit 0 when every part asked for passed, 1 otherwise, 2 for bad arguments. `--device cpu`
runs the generate and train parts on the CPU, to check this script itself without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PARTS = ("hw", "generate", "train", "plan")
LIMIT_S = {"hw": 60, "generate": 90, "train": 150, "plan": 30}  # 330 s at most, in practice far less
PLAN_RECIPES = ("validation", "full", "smoke-3b", "smoke-7b")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="gpu_check.py", description=__doc__.splitlines()[0])
    p.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts (default: {','.join(PARTS)})")
    p.add_argument("--rows", type=int, default=8, help="rows the generate part runs (twice); default 8")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cpu: check this script on a machine without a GPU")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.add_argument("--sample-dir", type=Path,
                   default=Path(os.environ.get("TRACE_SAMPLE_DIR", REPO.parent / "shared" / "trace-sample")))
    p.add_argument("--work", type=Path, default=None, help="where to keep the runs (default: a temp dir)")
    args = p.parse_args(argv)
    parts = [x.strip() for x in args.only.split(",") if x.strip()]
    bad = [x for x in parts if x not in PARTS]
    if bad or not parts:
        p.error(f"--only {args.only!r}: {', '.join(bad) or 'nothing'} is not a part; choose from {', '.join(PARTS)}")
    if args.rows < 1:
        p.error(f"--rows {args.rows}: give at least 1")
    args.parts = parts
    return args


# --------------------------------------------------------------------------- the summary (pure)


def _fmt(value: Any, unit: str = "", digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}{unit}"
    return f"{value}{unit}"


def part_line(r: dict[str, Any]) -> str:
    """One line per part: verdict, its numbers, how long it took."""
    verdict = "PASS" if r.get("ok") else "FAIL"
    part = r["part"]
    if r.get("error"):
        detail = r["error"]
    elif part == "hw":
        detail = r.get("summary", "")
    elif part == "generate":
        detail = (f"{r.get('rows')} rows x2 on {r.get('device')} ({r.get('dtype')}): "
                  f"{_fmt(r.get('seconds_per_row'), ' s/row', 3)}, peak {_fmt(r.get('peak_gpu_memory_gib'), ' GiB')}, "
                  f"same responses twice: {'yes' if r.get('same_responses') else 'NO'}")
    elif part == "train":
        detail = (f"one GRPO step on {r.get('device')} (bf16 {r.get('bf16')}): step {_fmt(r.get('step_time_s'), ' s')}, "
                  f"peak {_fmt(r.get('peak_gpu_memory_gib'), ' GiB')}, grad norm {_fmt(r.get('grad_norm'), '', 4)}")
    elif part == "plan":
        detail = r.get("gpus", "") + "".join(f"\n{'':>17}{k}: " + f"\n{'':>19}".join(v)
                                             for k, v in (r.get("plans") or {}).items())
    else:  # pragma: no cover - parse_args allows only PARTS
        detail = ""
    return f"  {part:<9} {verdict}  {detail}  ({_fmt(r.get('seconds'), ' s', 1)})"


def summarize(results: list[dict[str, Any]], *, machine: str = "") -> tuple[str, bool]:
    """The one summary a maintainer pastes into README's "verified where" table, and the overall verdict."""
    ok = bool(results) and all(r.get("ok") for r in results)
    lines = [f"trace-tui GPU check{' on ' + machine if machine else ''}"]
    lines += [part_line(r) for r in results]
    lines.append(f"overall: {'PASS' if ok else 'FAIL'} ({sum(1 for r in results if r.get('ok'))}/{len(results)} parts)")
    return "\n".join(lines), ok


# --------------------------------------------------------------------------- the parts (I/O)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO / "src"), str(REPO / "tests"),
                                                                     os.environ.get("PYTHONPATH")) if p)}


def part_hw(args: argparse.Namespace) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, str(REPO / "tests/gpu/check_hw_against_nvidia_smi.py")], env=_env(),
                          capture_output=True, text=True, timeout=LIMIT_S["hw"], check=False)
    out = (proc.stdout.strip().splitlines() or [""])[-1]
    err = proc.stderr.strip()
    if proc.returncode != 0:
        return {"ok": False, "error": (err or out or f"exit {proc.returncode}").replace("\n", "; ")[:500]}
    return {"ok": True, "summary": out, "gpus": [line for line in proc.stdout.splitlines() if line.startswith("[")]}


def part_generate(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """In a child process (its own CUDA context, so the peak is this part's alone)."""
    proc = subprocess.run([sys.executable, __file__, "--_generate-child", str(work), str(args.rows), args.device,
                           str(args.sample_dir)], env=_env(), capture_output=True, text=True,
                          timeout=LIMIT_S["generate"], check=False)
    try:
        result = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"ok": False, "error": f"exit {proc.returncode}: {proc.stderr.strip()[-400:]}"}
    return result


def generate_child(work: Path, rows: int, device: str, sample_dir: Path) -> dict[str, Any]:
    import contextlib
    import io

    if device == "cpu":  # before torch initialises CUDA: the backend then picks the CPU (fp32)
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        return {"ok": False, "error": "torch sees no CUDA GPU"}
    from stages_support import responses, sample_generate_job

    from trace_tui.stages import generate
    from trace_tui.stages.tiny_model import build_tiny_qwen25vl

    model = build_tiny_qwen25vl(work / "tiny", seed=0)
    os.environ.update(TRACE_TUI_CAMPAIGN=str(work), TRACE_TUI_STORE=str(work / "store"),
                      TRACE_TUI_BACKEND="transformers")
    times = []
    for run in ("first", "second"):
        job = sample_generate_job(model, sample_dir, list(range(rows)), out=f"outputs/generate/{run}", batch_size=1)
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):  # the worker's progress lines
            generate.run(job)
        times.append(time.perf_counter() - t0)
    same = responses(work, "outputs/generate/first") == responses(work, "outputs/generate/second")
    peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None
    # the second run's time (the first includes loading and CUDA warm-up)
    return {"ok": bool(same), "rows": rows, "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
            "dtype": "bfloat16" if device == "cuda" else "float32", "seconds_per_row": times[1] / rows,
            "first_run_s": times[0], "peak_gpu_memory_gib": peak, "same_responses": same,
            **({} if same else {"error": "the two runs gave different responses"})}


def part_train(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, str(REPO / "tests/gpu/train_smoke_gpu.py"), "--device", args.device,
                           "--sample-dir", str(args.sample_dir), "--out", str(work)], env=_env(),
                          capture_output=True, text=True, timeout=LIMIT_S["train"], check=False)
    try:
        report = json.loads(proc.stdout[proc.stdout.index("{"):])
    except ValueError:
        return {"ok": False, "error": f"exit {proc.returncode}: {proc.stderr.strip()[-400:]}"}
    out = {"ok": bool(report.get("ok")), "device": report.get("device") or args.device, "bf16": report.get("bf16"),
           "step_time_s": report.get("step_time_s"), "peak_gpu_memory_gib": report.get("peak_gpu_memory_gib"),
           "grad_norm": report.get("grad_norm"), "reward_std": report.get("reward_std")}
    if not out["ok"]:
        out["error"] = str(report.get("error") or report.get("message") or report.get("stderr_tail", ""))[-400:]
    return out


def part_plan(args: argparse.Namespace) -> dict[str, Any]:
    sys.path[:0] = [str(REPO / "src")]
    from trace_tui.gpu_plan import run_plan
    from trace_tui.hardware import hardware_report
    from trace_tui.recipe.catalog import resolve_recipe

    with tempfile.TemporaryDirectory(prefix="gpu-check-home-") as home:
        report = hardware_report(Path(home))
    plans = {name: run_plan(resolve_recipe(name), report).lines() for name in PLAN_RECIPES}
    return {"ok": report.gpu.status == "ok", "gpus": report.gpu.message, "plans": plans,
            **({} if report.gpu.status == "ok" else {"error": report.gpu.message})}


def run_part(name: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        if name == "hw":
            result = part_hw(args)
        elif name == "generate":
            result = part_generate(args, work / "generate")
        elif name == "train":
            result = part_train(args, work / "train")
        else:
            result = part_plan(args)
    except subprocess.TimeoutExpired:
        result = {"ok": False, "error": f"ran past its {LIMIT_S[name]} s limit"}
    except Exception as exc:  # noqa: BLE001 - one part's failure is a line in the summary, not a traceback
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    return {"part": name, **result, "seconds": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--_generate-child"]:
        work, rows, device, sample = argv[1:5]
        sys.path[:0] = [str(REPO / "src"), str(REPO / "tests")]
        print(json.dumps(generate_child(Path(work), int(rows), device, Path(sample))))
        return 0
    args = parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="gpu-check-"))
    results = [run_part(name, args, work) for name in args.parts]
    machine = next((r.get("gpus") for r in results if r["part"] == "plan" and r.get("gpus")), "")
    text, ok = summarize(results, machine=machine)
    print(json.dumps({"ok": ok, "parts": results}, indent=2, default=str) if args.json else text)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
