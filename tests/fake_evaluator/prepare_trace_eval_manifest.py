"""Test stand-in for the release's prepare_trace_eval_manifest.py (run from the repository root).

Documented interface only: it prepares the 24-entry dataset view under
rlvr/evaluation/.work/LMUData/ and writes trace_eval_v1_dataset_manifest.json
(per benchmark: status, alias, rows, media files with size and sha256, a dataset
snapshot sha256). It reads the provenance matrix the repository carries and
finds each benchmark's file under the name of its published location; a missing
file is a "missing" benchmark and a non-zero exit. Rows: a TSV's lines after its header.
"""

import hashlib
import json
import sys
from pathlib import Path

PROVENANCE = Path("rlvr/evaluation/trace_eval/benchmark_provenance.v1.json")
LMU = Path("rlvr/evaluation/.work/LMUData")

if sys.argv[1:]:
    sys.exit(f"unexpected arguments {sys.argv[1:]}")
prov = json.loads(PROVENANCE.read_text())
entries, missing = [], []
for b in prov["benchmarks"]:
    art = b["evaluation_artifact"]
    url = art.get("url") or art["path"]
    name = b["benchmark_id"] if "/tree/" in url else url.split("?")[0].rsplit("/", 1)[-1]
    where = LMU / name
    files = sorted(p for p in ([where] if where.is_file() else where.rglob("*") if where.is_dir() else []) if p.is_file())
    if not files:
        missing.append(b["benchmark_id"])
        entries.append({"benchmark_id": b["benchmark_id"], "alias": b["official_alias"], "status": "missing"})
        continue
    media = [{"path": str(p.relative_to(LMU)), "size": p.stat().st_size,
              "sha256": hashlib.sha256(p.read_bytes()).hexdigest()} for p in files]
    rows = sum(max(len(p.read_text().splitlines()) - 1, 0) for p in files if p.suffix == ".tsv")
    snapshot = hashlib.sha256(json.dumps(media, sort_keys=True).encode()).hexdigest()
    entries.append({"benchmark_id": b["benchmark_id"], "alias": b["official_alias"], "status": "ready", "rows": rows,
                    "media_files": media, "dataset_snapshot_sha256": snapshot})
(LMU / "trace_eval_v1_dataset_manifest.json").write_text(json.dumps({"suite_id": prov["suite_id"],
                                                                       "benchmarks": entries}, indent=1))
print(f"{len(entries) - len(missing)} ready, {len(missing)} missing: {' '.join(missing)}")
sys.exit(1 if missing else 0)
