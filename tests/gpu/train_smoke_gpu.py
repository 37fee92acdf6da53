"""One GRPO smoke step on a GPU with the tiny local Qwen2.5-VL in bf16: step time and peak memory.

Run on a machine with an NVIDIA GPU (not collected by pytest):

    python tests/gpu/train_smoke_gpu.py [--release-dir DIR] [--sample-dir DIR] [--out DIR]

It builds the tiny model (no downloads), warms it up for a few supervised
steps on CPU (so that rewards vary), then runs the real worker
(`python -m trace_tui.stages.train_smoke`) with ``device: cuda`` under the
stage contract, and prints one JSON report: completed or not, step time,
peak GPU memory, reward mean/std, grad norm, checkpoint sha256set, versions.
bf16 comes from the profile (``mp_param_dtype: bf16``): fp32 master weights,
bf16 autocast. Exit code 0 only when the step completed with reward std > 0
and grad norm > 0.
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

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "src"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release-dir", type=Path,
                        default=Path(os.environ.get("TRACE_RELEASE_DIR", REPO.parent / "shared" / "trace-release")))
    parser.add_argument("--sample-dir", type=Path,
                        default=Path(os.environ.get("TRACE_SAMPLE_DIR", REPO.parent / "shared" / "trace-sample")))
    parser.add_argument("--out", type=Path, default=None, help="where to keep the run (default: a temp dir)")
    parser.add_argument("--prompts-per-step", type=int, default=4)
    parser.add_argument("--max-response-length", type=int, default=64)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cpu only to check this script itself on a machine without a GPU")
    args = parser.parse_args()

    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"ok": False, "error": "torch sees no CUDA GPU"}))
        return 3
    from fixtures_models import (
        WARM_LR,
        WARM_MAX_PIXELS,
        WARM_MIN_PIXELS,
        WARM_STEPS,
        trace_warm_up_examples,
    )

    from trace_tui.stages.tiny_model import build_tiny_qwen25vl, supervised_warm_up

    work = args.out or Path(tempfile.mkdtemp(prefix="train-smoke-gpu-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    tiny = build_tiny_qwen25vl(work / "tiny", seed=0)
    torch.set_num_threads(1)
    warm = supervised_warm_up(tiny, work / "tiny-warm", trace_warm_up_examples(args.sample_dir), steps=WARM_STEPS,
                              lr=WARM_LR, seed=0, min_pixels=WARM_MIN_PIXELS, max_pixels=WARM_MAX_PIXELS)
    prep_s = time.time() - t0

    job = {
        "step": "train-smoke", "recipe": "gpu-check",
        "slice": {"model": "tiny-qwen2.5-vl", "seed": 1, "benchmark": "train-smoke"},
        "inputs": {"model": str(warm), "profile": "rlvr/configs/trace-qwen2.5-vl-3b.yaml",
                   "system_prompt": "rlvr/examples/prompts/trace_vero_json_system_prompt_answer.txt",
                   "train_files": [str(args.sample_dir / "trace-sample.parquet")]},
        # Release pixel bounds and 8 rollouts per prompt, as the profile says; fewer prompts and shorter replies.
        "settings": {"device": args.device, "prompts_per_step": args.prompts_per_step,
                     "max_response_length": args.max_response_length},
    }
    job_path = work / "job.json"
    job_path.write_text(json.dumps(job))
    campaign = work / "campaign"
    env = {**os.environ, "TRACE_TUI_JOB": str(job_path), "TRACE_TUI_CAMPAIGN": str(campaign),
           "TRACE_TUI_STORE": str(args.release_dir),
           "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(REPO / "src")) if p)}
    t1 = time.time()
    proc = subprocess.run([sys.executable, "-m", "trace_tui.stages.train_smoke"], check=False, env=env, capture_output=True,
                          text=True)
    worker_s = time.time() - t1
    receipt_path = campaign / "train-smoke" / "run_receipt.json"
    receipt = json.loads(receipt_path.read_text()) if receipt_path.is_file() else {}
    circ = receipt.get("circumstance", {})
    report = {
        "ok": proc.returncode == 0 and receipt.get("reward_std", 0) > 0 and receipt.get("grad_norm", 0) > 0,
        "exit_code": proc.returncode,
        "status": receipt.get("status"),
        "message": receipt.get("message"),
        "device": receipt.get("hardware", {}).get("device_name"),
        "bf16": receipt.get("resolved_config", {}).get("trl", {}).get("bf16"),
        "step_time_s": circ.get("train_time_s"),
        "peak_gpu_memory_gib": circ.get("peak_gpu_memory_gib"),
        "worker_wall_s": round(worker_s, 2),
        "prepare_s": round(prep_s, 2),
        "reward_mean": receipt.get("reward_mean"),
        "reward_std": receipt.get("reward_std"),
        "grad_norm": receipt.get("grad_norm"),
        "completions": len(receipt.get("rewards", [])),
        "checkpoint": receipt.get("checkpoint", {}).get("sha256set"),
        "trl_version_adaptations": receipt.get("trl_version_adaptations"),
        "versions": receipt.get("versions"),
        "run_dir": str(work),
    }
    if proc.returncode != 0:
        report["stderr_tail"] = proc.stderr[-3000:]
    print(json.dumps(report, indent=2))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
