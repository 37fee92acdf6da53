#!/usr/bin/env bash
# A stand-in for the release launcher's serving part, for tests only. `--print-config` is the
# release's own launcher (kept beside this file as run_trace_eval.real.sh); a run does what
# needs vLLM endpoints (generation, the Qwen3-32B judge) by writing the evaluator's campaign
# layout with the evaluator's own functions (tests/evaluator_layout.py), rows and scores from
# FAKE_EVAL_SPEC, and ends with the launcher's own closing status call. The release's status and
# verify scripts must accept what it writes.
#
# What it still stands in for, and why: the host tests (test_external_worker, test_external_campaign)
# run the whole suite (the launcher takes no benchmark filter: 24 benchmarks x 32,805 rows per model and
# seed, 576 slices with the published scores) where the host venv has no vLLM and the launcher's
# environment check (setup_trace_eval_env.sh --verify-only: torch 2.8.0, the `vllm` distribution) cannot
# pass on the CPU build of vLLM the cpu images carry. In the gpu infer image (`make test-gpu-images`) the
# real launcher passes that check and stops at the next, its dataset check, which re-hashes the published
# benchmark files (not here); a generation there needs a GPU. The worker under the production container
# options is tested in the image itself (test_release_eval_container), and the release's own pool, generation
# client and score campaign run for real below the launcher's driver in the cpu infer image
# (test_release_eval_pipeline_container, on the three benchmarks whose files are not md5-pinned).
set -euo pipefail
for a in "$@"; do
  if [[ "$a" == "--print-config" ]]; then exec bash "$(dirname "$0")/run_trace_eval.real.sh" "$@"; fi
done
exec "${PYTHON_BIN:-python3}" "${FAKE_EVAL_LAUNCHER:?}" "$@"
