#!/usr/bin/env bash
# A stand-in for the release launcher's GPU part, for tests only. `--print-config` is the
# release's own launcher (kept beside this file as run_trace_eval.real.sh); a run does what
# needs GPUs (vLLM generation and judge endpoints) by writing the evaluator's campaign layout
# with the evaluator's own functions (tests/evaluator_layout.py), rows and scores from
# FAKE_EVAL_SPEC. The release's status and verify scripts must accept what it writes.
set -euo pipefail
for a in "$@"; do
  if [[ "$a" == "--print-config" ]]; then exec bash "$(dirname "$0")/run_trace_eval.real.sh" "$@"; fi
done
exec "${PYTHON_BIN:-python3}" "${FAKE_EVAL_LAUNCHER:?}" "$@"
