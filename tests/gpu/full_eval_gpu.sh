#!/usr/bin/env bash
# `full` on real hardware: the GPU flavour of the images, the release's own evaluator
# (pinned VLMEvalKit, the release adapters, the Qwen3-32B judge), one model x one seed.
#
# The test suite drives the evaluator steps against a stand-in launcher (no GPU, no
# vLLM, no benchmark data where it runs); this script is their real counterpart and
# the only place the `full` path is verified. It needs an NVIDIA GPU with Docker's
# NVIDIA runtime and network access (model, judge and benchmark downloads: ~75 GB
# for the 3B model and the judge), and a GPU with enough memory for the Qwen3-32B
# judge (80 GB class; see `trace-tui hw --recipe full`).
#
# The release launcher takes no benchmark filter (it runs the whole suite), so this
# is one model x one seed x all 24 benchmarks (5,468 rows + judge scoring), not one
# benchmark: several hours on one H100-class GPU.
#
#   tests/gpu/full_eval_gpu.sh                      # qwen2.5-vl-3b-base, seed 42
#   MODEL=trace-qwen2.5-vl-3b SEED=43 tests/gpu/full_eval_gpu.sh
#
# Environment: MODEL, SEED, TRACE_TUI_HOME (default ./.gpu-home: store and campaigns),
# HF_TOKEN if the hub asks for one (never logged). Exit 0: the campaign completed, the
# evaluator's verification passed and `trace-tui verify --campaign` passed; the
# comparison with results.json is printed (a verdict is information, not a failure).
set -euo pipefail
cd "$(dirname "$0")/../.."

MODEL=${MODEL:-qwen2.5-vl-3b-base}
SEED=${SEED:-42}
export TRACE_TUI_HOME=${TRACE_TUI_HOME:-$PWD/.gpu-home}
CAMPAIGN=$TRACE_TUI_HOME/campaigns/gpu-full-$MODEL-$SEED
T=.venv/bin/trace-tui

command -v nvidia-smi >/dev/null || { echo "full_eval_gpu: no nvidia-smi: this script needs an NVIDIA GPU" >&2; exit 2; }
docker info --format '{{json .Runtimes}}' | grep -q nvidia \
  || { echo "full_eval_gpu: Docker has no NVIDIA runtime (install nvidia-container-toolkit)" >&2; exit 2; }

step() { printf '\n== %s\n' "$*"; }

step "hash-lock the GPU flavour's requirements (needs the package index and the PyTorch cu128 index)"
[ -f appliance/requirements/common-gpu.lock.txt ] || make install lock FLAVOR=gpu

step "build the GPU flavour (venv, wheelhouse, infer/score/train images with the release evaluator)"
make appliance FLAVOR=gpu

step "hardware and recipe check"
$T hw --recipe full

step "eval-setup for $MODEL: store fetch (model, judge, 24 benchmark files, release files) + offline preparation"
$T --recipe eval-setup --yes --models "$MODEL"

step "full: $MODEL x seed $SEED x all 24 benchmarks (generation, scoring, summary)"
$T --recipe full --yes --models "$MODEL" --seeds "$SEED" --campaign "$CAMPAIGN"

step "reproduced scores beside results.json"
$T report --campaign "$CAMPAIGN"
$T report --campaign "$CAMPAIGN" --format json > "$CAMPAIGN/report.json"
python3 - "$CAMPAIGN/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("verdict:", r["verdict"])
print("outside the canonical spread:", ", ".join(r["outside"]) or "none")
PY

step "offline re-check of the whole campaign"
$T verify --campaign "$CAMPAIGN"
