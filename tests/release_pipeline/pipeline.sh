# The release's dataset preparation, generation and scoring for the benchmarks in ONLY, in the infer image
# (see tests/test_release_eval_pipeline_container.py). The environment is the one our worker gives the
# launcher (launch_environment), plus the harness's SLUG, MODEL, REVISION, SOURCE, SEED, RUN_TAG, ONLY, MAX_TOKENS.
set -euo pipefail
HARNESS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SCRIPTS="${EVALUATION_ROOT}/scripts"
VLM="${CHECKOUT_ROOT}/external/VLMEvalKit"
# The launcher's PYTHONPATH, for the steps that run before it is sourced.
export PYTHONPATH="${EVAL_DEPS_ROOT}:${CHECKOUT_ROOT}/src:${SCRIPTS}:${VLM}:${VLM}/scripts:${PYTHONPATH:-}"
mkdir -p "${TMPDIR}" "${HF_HOME}"

only=()
for key in ${ONLY}; do only+=(--only "$key"); done
echo "[pipeline] prepare"
"${PYTHON_BIN}" "${SCRIPTS}/prepare_trace_eval_manifest.py" "${only[@]}" --lmu-root "${LMUData}" \
  --manifest "${DATASET_MANIFEST}" --workers 2
"${PYTHON_BIN}" "${HARNESS}/complete_view.py" "${DATASET_MANIFEST}"

echo "[pipeline] generate"
bash "${HARNESS}/generate.sh"

echo "[pipeline] score"
# run_scoring's arguments (the judge endpoint is the launcher's; nothing here calls a judge)
# shellcheck disable=SC2086
"${PYTHON_BIN}" "${HARNESS}/score_narrowed.py" --suite trace_eval_v1 --seed "${SEED}" --shared-seed-root --resume \
  --campaign "${MODEL}" "${SLUG}" "${CAMPAIGN_ROOT}" --score-root "${SCORE_ROOT}" \
  --dataset-manifest "${DATASET_MANIFEST}" --python "$(command -v "${PYTHON_BIN}")" --eval-deps "${EVAL_DEPS_ROOT}" \
  --vlmeval-root "${VLM}" --lmu-data "${LMUData}" --hf-home "${HF_HOME}" \
  --judge-model "${MODEL}" --judge-api-model qwen3-32b-judge --judge-endpoint "http://127.0.0.1:18100/v1" \
  --official-workers 2 --direct-workers 2 --eval-nproc 2 --only ${ONLY}
echo "[pipeline:done]"
