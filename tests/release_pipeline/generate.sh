# The release launcher's generation, below its environment check, for the benchmarks in ONLY.
#
# run_trace_eval.sh is sourced up to its driver (the line that prints "[trace-eval] tag="): its own argument
# parsing, folders, provenance hashes (code, evaluator, dataset revision: what the generation client stamps on
# every row) and functions. Its driver is not run: validate_environment (setup_trace_eval_env.sh
# --verify-only) refuses this CPU build, and run_generation_pass takes no benchmark filter (it would generate
# all 24). So this calls the launcher's start_pool / endpoint_args / stop_pool and the generation client with
# run_generation_pass's arguments, adding only `--only ... --exact-only` and a small --max-tokens (MAX_TOKENS:
# the tiny model never stops on its own; the launcher's 4096 is hours of CPU).
set -euo pipefail
L="${EVALUATION_ROOT}/scripts/run_trace_eval.sh"
driver=$(grep -n '^echo "\[trace-eval\] tag=' "$L" | cut -d: -f1)
[[ -n "$driver" ]] || { echo "run_trace_eval.sh: no driver line" >&2; exit 1; }
set -- --model "$SLUG" "$MODEL" "$REVISION" "$SOURCE" "$SLUG" --seeds "$SEED" --run-tag "$RUN_TAG"
# shellcheck disable=SC1090
source <(head -n $((driver - 1)) "$L")
echo "[generate] code=${TRACE_EVAL_CODE_HASH} dataset=${TRACE_EVAL_DATASET_REVISION}"
start_pool "$MODEL" "$SLUG" "${GEN_PORT_START}" "${LOG_ROOT}/vllm_generation_${SLUG}" \
  "${GEN_MAX_MODEL_LEN}" "${GEN_MAX_NUM_SEQS}" "${GEN_MAX_NUM_BATCHED_TOKENS}" "${GEN_GPU_MEMORY_UTILIZATION}"
mapfile -t endpoints < <(endpoint_args "${GEN_PORT_START}" --api-base)
run_root="${CAMPAIGN_ROOT}/seed_${SEED}/runs"
mkdir -p "${run_root}"
# shellcheck disable=SC2206
common=(--model "$MODEL" --model-slug "$SLUG" --api-model "$SLUG"
  --media-transport file-url --allowed-local-media-path "${LMUData}"
  --dataset-manifest "${DATASET_MANIFEST}" --dataset-manifest-view trace_eval_v1
  --min-image-pixels 3136 --max-image-pixels 12845056
  --run-set trace_eval_v1 --run-root "${run_root}"
  --temperature 0.6 --top-p 1 --top-k -1 --presence-penalty 0
  --repetition-penalty 1 --max-tokens "${MAX_TOKENS}" --seed "${SEED}" --compact-prediction-tables
  --only ${ONLY} --exact-only)
eval_python "${SCRIPTS_ROOT}/run_external_benchmark_generation_api_queue.py" "${common[@]}" \
  "${endpoints[@]}" --parallelism-per-endpoint "${GEN_PARALLELISM_PER_ENDPOINT}" \
  --preparation-workers "${GEN_PREPARATION_WORKERS}" --queue-capacity "${GEN_QUEUE_CAPACITY}" \
  --persistence-workers "${GEN_PERSISTENCE_WORKERS}" --finalization-workers "${GEN_FINALIZATION_WORKERS}" \
  --defer-finalization 2>&1 | tee "${LOG_ROOT}/generation_${SLUG}_seed${SEED}.log"
stop_pool
eval_python "${SCRIPTS_ROOT}/run_external_benchmark_generation_api_queue.py" "${common[@]}" --finalize-only \
  --finalization-workers "${GEN_FINALIZATION_WORKERS}" --preparation-workers "${GEN_PREPARATION_WORKERS}" \
  --queue-capacity "${GEN_QUEUE_CAPACITY}" --persistence-workers "${GEN_PERSISTENCE_WORKERS}" \
  2>&1 | tee "${LOG_ROOT}/generation_finalize_${SLUG}_seed${SEED}.log"
echo "[generate:done]"
