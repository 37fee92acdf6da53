"""The generate worker on vLLM's CPU engine, in the cpu infer image, against bare ``LLM.generate``.

vLLM's CPU build loads only on the image's Debian trixie (its extension needs GCC 13's
libstdc++), so the measurement runs inside the cpu infer image (`make appliance` builds it):
``vllm_cpu_in_image.py`` is mounted into a container with the tiny model and the sample rows.
One engine is loaded once and serves both sides, so load time is in neither:

- bare: the rows' prompts rendered and ``LLM.generate`` called with one ``SamplingParams(seed=…)``
  per row (what any script would do);
- worker: ``trace_tui.stages.generate.run`` on the same rows and settings with that engine, which
  adds the model's sha256set, the dataset hash, one atomic file per row, progress events and
  the receipt. RATIO worker rows/s over bare rows/s, the median over back-to-back pairs; goal >= 0.95.

For information, the same worker with the transformers backend on the same rows: the vLLM
backend's rows/s over the transformers backend's on this CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

GOAL = 0.95
# TRACE_TUI_BENCH_APP=1 mounts this checkout's package over the image's (a change measured before a rebuild).
_APP_MOUNT = (["-v", f"{Path(__file__).resolve().parents[1] / 'src/trace_tui'}:/opt/trace-tui-app/trace_tui:ro"]
              if os.environ.get("TRACE_TUI_BENCH_APP") == "1" else [])


def _sample_dir() -> Path:
    repo = Path(__file__).resolve().parents[1]
    return Path(os.environ.get("TRACE_SAMPLE_DIR", repo.parent / "shared" / "trace-sample")).resolve()


def run() -> list[str]:
    from trace_tui import images
    from trace_tui.stages.jobs import quiet_libraries
    from trace_tui.stages.tiny_model import build_tiny_qwen25vl

    tag = images.image_tag("infer", "cpu")
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode != 0:
        return [f"skipped: {tag} is not built (`make appliance FLAVOR=cpu`)"]
    quiet_libraries()
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        model = build_tiny_qwen25vl(Path(tmp) / "model", seed=0)
        out = Path(tmp) / "out"
        out.mkdir()
        done = subprocess.run(
            ["docker", "run", "--rm", "--network", "none", "--user", f"{os.getuid()}:{os.getgid()}",
             "-e", "HOME=/tmp", "-v", f"{model}:/models/tiny:ro", "-v", f"{_sample_dir()}:/sample:ro",
             "-v", f"{Path(__file__).with_name('vllm_cpu_in_image.py')}:/bench/vllm_cpu_in_image.py:ro",
             "-v", f"{out}:/out", *_APP_MOUNT, tag, "python3", "/bench/vllm_cpu_in_image.py", "/models/tiny", "/sample", "/out"],
            capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"the in-image bench failed: {done.stderr[-1500:]}")
        r = json.loads((out / "result.json").read_text())
    ratio = r["paired_ratio"]  # the median of back-to-back pairs: a shared machine's drift cancels in each
    return [f"vLLM {r['vllm']} CPU engine, {r['rows']} rows x {r['repeats']} pairs, max_tokens {r['max_tokens']}",
            f"bare LLM.generate: {r['bare_rows_s']:.1f} rows/s; generate worker on vLLM: {r['worker_rows_s']:.1f} rows/s",
            f"RATIO generate worker / bare LLM.generate (rows/s, median of pairs): {ratio:.2f}x "
            f"(goal >= {GOAL}: {'ok' if ratio >= GOAL else 'MISSED'})",
            f"generate worker on transformers: {r['transformers_rows_s']:.1f} rows/s; "
            f"vLLM backend / transformers backend (rows/s, information): "
            f"{r['worker_rows_s'] / r['transformers_rows_s']:.1f}x"]
