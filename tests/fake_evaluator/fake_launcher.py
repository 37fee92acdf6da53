"""Body of the test stand-in launcher (see run_trace_eval.sh): the GPU phases, as files.

Arguments are the launcher's own (already accepted by the real `--print-config`). With
RUN_GENERATION=1 it writes each (model, seed, benchmark) slice's finished rows (all of
the suite's rows, or FAKE_EVAL_SPEC's "rows" when a test wants a short run) and, for a
full slice, the generation summary; with RUN_SCORING=1 the score files and the per-seed
score campaign receipts. It ends as the launcher ends: the release's status_trace_eval.py
with --fail-if-incomplete, whose exit is the launcher's (1 after a generate-only run).
Everything is laid out by tests/evaluator_layout.py through the evaluator's own
functions, under the launcher's campaign root (CAMPAIGN_ROOT, default .work/<run tag>).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.environ["FAKE_EVAL_TESTS"])
import evaluator_layout as lay  # noqa: E402

checkout = Path.cwd()
lay.use(checkout)
argv = sys.argv[1:]
models, seeds, run_tag = [], [], None
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
    elif a in ("--delta", "--run-tag"):
        run_tag = argv[i + 1] if a == "--run-tag" else run_tag
        i += 2
    else:
        sys.exit(f"[fatal] unknown argument: {a}")

spec = json.loads(Path(os.environ["FAKE_EVAL_SPEC"]).read_text())
# where the real launcher writes: CAMPAIGN_ROOT and DATASET_MANIFEST when given (the worker gives them), else
# under its TMP_ROOT (.work)
work = Path(os.environ.get("TMP_ROOT") or checkout / "rlvr/evaluation/.work")
root = Path(os.environ.get("CAMPAIGN_ROOT") or work / run_tag)
manifest = Path(os.environ.get("DATASET_MANIFEST") or work / "LMUData/trace_eval_v1_dataset_manifest.json")
data = json.loads(manifest.read_text())
view = data["dataset_views"]["trace_eval_v1"]
dataset = {"snapshot": data["view_snapshot_sha256"]["trace_eval_v1"],
           "revision": f"{data['schema_version']}:{data['view_snapshot_sha256']['trace_eval_v1']}"}
print(f"[trace-eval] tag={run_tag} GPU_GROUPS={os.environ.get('GPU_GROUPS')} "
      f"RUN_GENERATION={os.environ['RUN_GENERATION']} RUN_SCORING={os.environ['RUN_SCORING']}", flush=True)
if os.environ.get("FAKE_EVAL_FAIL"):
    print("CUDA out of memory", flush=True)
    sys.exit(3)
suite_rows = lay.suite().rows_by_benchmark
for seed in seeds:
    for slug, path, revision, _source, _label in models:
        for bench in view:
            if os.environ["RUN_GENERATION"] == "1":
                rows = int((spec.get("rows") or {}).get(bench, suite_rows[bench]))
                lay.write_generation(root, checkout, slug=slug, model=path, revision=revision, seed=seed, bench=bench,
                                     rows=rows, dataset=dataset, row_files=spec.get("row_files", True))
    if os.environ["RUN_SCORING"] == "1":
        scores = {(slug, bench): spec["scores"][f"{slug}/{seed}/{bench}"] for slug, *_ in models for bench in view}
        lay.write_scores(root, checkout, seed=seed, models={m[0]: m[1] for m in models}, scores=scores,
                         dataset=dataset)

# The launcher's last step, as the release's run_trace_eval.sh ends (`status_args` then the status script with
# --fail-if-incomplete; set -e makes its exit the launcher's): the real status script on what was written.
status = [sys.executable, str(checkout / "rlvr/evaluation/scripts/status_trace_eval.py"),
          "--campaign-root", str(root), "--score-root", str(root / "scoring"), "--dataset-manifest", str(manifest),
          "--archive-spool-root", str(root / "hf_archive"), "--vlmeval-root", str(checkout / "external/VLMEvalKit")]
for slug, *_ in models:
    status += ["--model-slug", slug]
status += ["--seeds", *(str(s) for s in seeds), "--no-gpu", "--fail-if-incomplete"]
sys.exit(subprocess.run(status, cwd=checkout, check=False).returncode)
