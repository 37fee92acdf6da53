"""Body of the test stand-in launcher (see run_trace_eval.sh)."""

import hashlib
import json
import os
import sys
from pathlib import Path

argv = sys.argv[1:]
models, seeds, deltas, run_tag, print_config = [], [], [], None, False
i = 0
while i < len(argv):
    a = argv[i]
    if a == "--model":
        models.append(argv[i + 1:i + 6])
        i += 6
    elif a == "--seeds":
        i += 1
        while i < len(argv) and not argv[i].startswith("--"):
            seeds.append(int(argv[i]))
            i += 1
    elif a == "--delta":
        deltas.append(argv[i + 1])
        i += 2
    elif a == "--run-tag":
        run_tag = argv[i + 1]
        i += 2
    elif a == "--print-config":
        print_config = True
        i += 1
    else:
        sys.exit(f"unknown argument {a}")

if print_config:
    print("suite=trace_eval_v1")
    print(f"run_tag={run_tag}")
    print("seeds=" + " ".join(map(str, seeds)))
    for slug, path, rev, source, label in models:
        print(f'model={slug} path={path} revision={rev} source={source} label="{label}"')
    for d in deltas:
        print(f"delta={d}")
    sys.exit(0)

spec = json.loads(Path(os.environ["FAKE_EVAL_SPEC"]).read_text())
rows = spec["rows"]
scores = spec["scores"]  # "slug/seed/bench" -> score
root = Path("rlvr/evaluation/.work") / run_tag
print(f"GPU_GROUPS={os.environ.get('GPU_GROUPS')} RUN_GENERATION={os.environ['RUN_GENERATION']} "
      f"RUN_SCORING={os.environ['RUN_SCORING']}", flush=True)
if os.environ.get("FAKE_EVAL_FAIL"):
    print("CUDA out of memory", flush=True)
    sys.exit(3)
for seed in seeds:
    slices = []
    for slug, *_ in models:
        for bench, n in rows.items():
            run = root / f"seed_{seed}" / "runs" / bench / slug / "r0"
            if os.environ["RUN_GENERATION"] == "1":
                (run / "api_row_results").mkdir(parents=True, exist_ok=True)
                for k in range(n):
                    (run / "api_row_results" / f"{k}.{k:016x}.json").write_text("{}")
                (run / "generation_summary.json").write_text(json.dumps({"rows": n, "expected_rows": n}))
            if os.environ["RUN_SCORING"] == "1":
                out = root / "scoring" / f"seed_{seed}" / "benchmark" / bench / slug / "r0" / "scores.json"
                out.parent.mkdir(parents=True, exist_ok=True)
                metric = "accuracy" if bench == "mme_reasoning" else "score"  # as documented for MME-Reasoning
                out.write_text(json.dumps({metric: scores[f"{slug}/{seed}/{bench}"]}))
                slices.append({"benchmark_key": bench, "model_slug": slug, "rows": n,
                               "score": scores[f"{slug}/{seed}/{bench}"],
                               "scores_path": out.relative_to(root).as_posix(),
                               "scores_sha256": hashlib.sha256(out.read_bytes()).hexdigest()})
    if os.environ["RUN_SCORING"] == "1":
        (root / "scoring" / f"score_campaign_completion_seed_{seed}.json").write_text(json.dumps(
            {"expected_slices": len(slices), "completed_slices": len(slices), "slices": slices}))
