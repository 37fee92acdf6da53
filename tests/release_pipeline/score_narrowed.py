"""The release's score campaign (run_trace_eval_official_score_campaign.py, what run_trace_eval_score_campaign.py
runs) through its own phases and checks, narrowed to the benchmarks given after --only.

Its main() cannot run on a part of the suite: its route sets are the suite's (the official, direct and
MME-Reasoning keys, checked against the scoring contract), its preflight wants all 24 workbooks and a judge
endpoint serving the judge model, and it requires the generation's max_tokens to be the release's 4096. Here
the route sets are cut to the given benchmarks, the per-benchmark max_tokens table it reads
(GENERATION_MAX_TOKENS_BY_KEY) says what generate.sh used, and the judge check is left out (no benchmark
here calls a judge). Everything else is its own: the runtime preflight, workbook discovery and staging, the
generation-input validation (rows, model, sampling, media contract, dataset snapshot, finish reasons), the
official phase (run_official_vlmevalkit_saved_score.py: the pinned dataset.evaluate), the direct phase (the
score queue, run_external_benchmark_score_queue.py) and the score-output validation, whose result goes into
main()'s per-seed completion receipt and is printed on the last line as `[score:validated] <json>`.
"""

import datetime as dt
import hashlib
import json
import os
import sys
from pathlib import Path

import run_trace_eval_official_score_campaign as campaign
from benchmark_queue_lib import spec_by_key


def main(argv: list[str]) -> None:
    cut = argv.index("--only")
    argv, keys = argv[:cut], argv[cut + 1:]
    campaign._activate_suite("trace_eval_v1")
    official = tuple(k for k in campaign.OFFICIAL_SCORE_KEYS if k in keys)
    direct = tuple(k for k in campaign.DIRECT_SCORE_KEYS if k in keys)
    if set(official + direct) != set(keys):
        raise SystemExit(f"not official or direct routes: {sorted(set(keys) - set(official + direct))}")
    args = campaign.build_parser().parse_args(argv)
    campaign.OFFICIAL_SCORE_KEYS, campaign.DIRECT_SCORE_KEYS = official, direct
    campaign.ALL_SCORE_KEYS = (*direct, *official)
    campaign.GENERATION_MAX_TOKENS_BY_KEY = {k: int(os.environ["MAX_TOKENS"]) for k in keys}
    # main()'s path normalisation
    campaigns = [campaign.Campaign(model=m, slug=s, root=Path(r).resolve()) for m, s, r in args.campaign]
    for name in ("score_root", "eval_deps", "vlmeval_root", "lmu_data", "hf_home", "judge_model",
                 "dataset_manifest"):
        setattr(args, name, getattr(args, name).resolve())
    args.python = args.python.absolute()
    endpoints = list(dict.fromkeys(campaign._normalize_endpoint(e) for e in args.judge_endpoint))
    seed_root = args.score_root / f"seed_{args.seed}"
    staged, bench_root, queue_root = seed_root / "runs", seed_root / "benchmark", seed_root / "queues"
    log_root = args.score_root / "logs"
    specs = {k: spec_by_key(k) for k in campaign.ALL_SCORE_KEYS}

    env = campaign._base_env(args)
    campaign._validate_runtime(args, env)
    manifest = json.loads(args.dataset_manifest.read_text(encoding="utf-8"))
    workbooks = campaign._discover_workbooks(campaigns, seed=args.seed, staged_run_root=staged, specs=specs)
    inputs = campaign._validate_generation_inputs(
        campaigns, workbooks, seed=args.seed,
        expected_dataset_snapshot=manifest["view_snapshot_sha256"][campaign.ACTIVE_DATASET_VIEW])
    print(f"[score:inputs] {json.dumps({s: sorted(v) for s, v in inputs.items()})}", flush=True)
    # Only the direct phase's queue name uses the contract hash; the full contract covers all 24 benchmarks.
    contract_sha256 = hashlib.sha256(json.dumps([keys, inputs], sort_keys=True).encode()).hexdigest()
    campaign._stage_workbooks(workbooks, resume=args.resume)
    if official:
        jobs = campaign._official_jobs(args, campaigns, workbooks, bench_root)
        campaign._run_official_phase(args, jobs, endpoints=endpoints, env=env, log_root=log_root)
        campaign._validate_score_outputs(campaigns, official, benchmark_root=bench_root, specs=specs,
                                         generation_inputs=inputs)
    if direct:
        campaign._run_direct_phase(args, campaigns, staged_run_root=staged, benchmark_root=bench_root,
                                   queue_root=queue_root, endpoints=endpoints, contract_sha256=contract_sha256,
                                   env=env, log_root=log_root, specs=specs, generation_inputs=inputs)
    done = campaign._validate_score_outputs(campaigns, campaign.ALL_SCORE_KEYS, benchmark_root=bench_root,
                                            specs=specs, generation_inputs=inputs)
    # main()'s completion receipt, over the benchmarks scored here
    receipt = (f"score_campaign_completion_seed_{args.seed}.json" if args.shared_seed_root
               else "score_campaign_completion.json")
    campaign._write_json(args.score_root / receipt, {
        "completed_at": dt.datetime.now(dt.timezone.utc).isoformat(), "contract_sha256": contract_sha256,
        "expected_slices": len(campaigns) * len(campaign.ALL_SCORE_KEYS), "completed_slices": len(done),
        "slices": done})
    print(f"[score:validated] {json.dumps(done, default=str)}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
