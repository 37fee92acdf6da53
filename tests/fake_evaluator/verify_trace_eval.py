"""Test stand-in for the release's verify_trace_eval.py: complete when every score file exists."""

import json
import sys
from pathlib import Path

args = sys.argv[1:]
root = Path(args[args.index("--campaign-root") + 1])
files = list((root / "scoring").rglob("scores.json"))
print(json.dumps({"schema_version": "trace-eval-verification-v1", "complete": bool(files),
                  "completed_slices": len(files), "expected_slices": len(files), "incomplete": [], "records": []}))
sys.exit(0 if files else 1)
