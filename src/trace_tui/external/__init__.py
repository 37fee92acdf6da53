"""The release's own evaluator (trace_eval_v1), driven from outside: its reproduction compared with the
release (compare.py) and the report over a finished campaign (summary.py).

Its command lines and its campaign layout, which the stage workers that run it also read, are a layer
down (trace_tui.evaluator.launcher, trace_tui.evaluator.layout). The evaluator runs unchanged inside the
GPU infer and score images (EXTERNAL-SUITE.md); nothing here re-implements a benchmark scorer.
"""
