#!/usr/bin/env bash
# A stand-in for the release launcher, for tests only: the real one needs GPUs,
# vLLM and the benchmark data. It accepts the launcher's documented arguments,
# answers --print-config the documented way, and writes the documented campaign
# layout (EXTERNAL-SUITE.md) with scores taken from FAKE_EVAL_SCORES (a JSON file).
set -euo pipefail
exec python3 "$(dirname "$0")/fake_launcher.py" "$@"
