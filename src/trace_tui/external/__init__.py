"""The release's own evaluator (trace_eval_v1), driven from outside: command lines,
its campaign layout as progress, and the reproduction compared with the release.

The evaluator runs unchanged inside the GPU infer and score images
(EXTERNAL-SUITE.md); nothing here re-implements a benchmark scorer.
"""
