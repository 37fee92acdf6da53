"""Command lines and environments for the release launcher (`run_trace_eval.sh`), as data.

    bash rlvr/evaluation/scripts/run_trace_eval.sh --model SLUG LOCAL_PATH IMMUTABLE_REVISION
        owner/repo@REVISION "LABEL" [--model ...] --seeds 42 43 44
        [--delta LABEL=MINUEND_SLUG=SUBTRAHEND_SLUG] [--run-tag TAG] [--print-config]
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

LAUNCHER = "rlvr/evaluation/scripts/run_trace_eval.sh"
VERIFIER = "rlvr/evaluation/scripts/verify_trace_eval.py"
STATUS = "rlvr/evaluation/scripts/status_trace_eval.py"
EVAL_DEPS = "rlvr/evaluation/.work/eval_deps"
Phase = Literal["generate", "score"]

# Which of the launcher's phases each of our steps turns on (EXTERNAL-SUITE.md, "Environment toggles").
PHASE_TOGGLES: dict[str, dict[str, str]] = {
    "generate": {"RUN_GENERATION": "1", "RUN_SCORING": "0", "RUN_SUMMARY": "0", "RUN_LOCAL_ARCHIVE": "0"},
    "score": {"RUN_GENERATION": "0", "RUN_SCORING": "1", "RUN_SUMMARY": "0", "RUN_LOCAL_ARCHIVE": "0"},
}


class EvaluatorModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    model_id: str  # ours (results.json model_id, or a local model's id)
    slug: str  # the evaluator's
    path: str  # where the weights are inside the container (the read-only store)
    revision: str  # the immutable revision (a commit, or sha256set: for local checkpoints)
    source: str  # owner/repo@revision (or local/<name>@<revision>)
    label: str


class PrintedConfig(BaseModel):
    """What `--print-config` says the launcher would run."""

    suite: str | None = None
    run_tag: str | None = None
    seeds: list[int] = []
    models: list[dict[str, str]] = []
    deltas: list[str] = []


def launcher_argv(models: list[EvaluatorModel], seeds: list[int], run_tag: str, *,
                  deltas: list[tuple[str, str, str]] = (), print_config: bool = False) -> list[str]:
    argv = ["bash", LAUNCHER]
    for m in models:
        argv += ["--model", m.slug, m.path, m.revision, m.source, m.label]
    argv += ["--seeds", *(str(s) for s in seeds)]
    for label, minuend, subtrahend in deltas:
        argv += ["--delta", f"{label}={minuend}={subtrahend}"]
    argv += ["--run-tag", run_tag]
    if print_config:
        argv.append("--print-config")
    return argv


def script_pythonpath(evaluator: str, inherited: str | None) -> str:
    """PYTHONPATH for the evaluator's scripts run outside its launcher: the one run_trace_eval.sh exports
    (the checkout's `.work/eval_deps`, where the image installs VLMEvalKit's dependencies, then src/, the
    scripts and VLMEvalKit), ahead of what the environment had. The dataset manifest script imports
    VLMEvalKit, which finds none of its dependencies without it."""
    root = evaluator.rstrip("/")
    vlm = f"{root}/external/VLMEvalKit"
    parts = [f"{root}/{EVAL_DEPS}", f"{root}/src", f"{root}/rlvr/evaluation/scripts", vlm, f"{vlm}/scripts"]
    return ":".join(parts + ([inherited] if inherited else []))


def launcher_env(phase: Phase, gpu_groups: list[list[int]]) -> dict[str, str]:
    """Phase toggles and GPU groups. Endpoints stay on the container's loopback (network none)."""
    if phase not in PHASE_TOGGLES:
        raise ValueError(f"unknown evaluator phase {phase!r}")
    groups = " ".join(",".join(str(g) for g in group) for group in gpu_groups)
    return {**PHASE_TOGGLES[phase], "GPU_GROUPS": groups}


EVALUATOR_PROVENANCE = "rlvr/evaluation/scripts/trace_eval_evaluator_provenance.py"
CODE_PROVENANCE = "rlvr/evaluation/scripts/trace_eval_code_provenance.py"


def verifier_argv(campaign_root: str, slugs: list[str], seeds: list[int], python: str = "python", *,
                  dataset_manifest: str | None = None) -> list[str]:
    """verify_trace_eval.py --phase score (its --model-slug is append: one flag per slug). DATASET_MANIFEST:
    the campaign's (its default is the checkout's `.work/LMUData`, where nothing is written)."""
    argv = [python, VERIFIER, "--campaign-root", campaign_root, "--phase", "score", "--json"]
    if dataset_manifest:
        argv += ["--dataset-manifest", dataset_manifest]
    for slug in slugs:
        argv += ["--model-slug", slug]
    return argv + ["--seeds", *(str(s) for s in seeds)]


def generation_verifier_argv(campaign_root: str, models: list[EvaluatorModel], seeds: list[int], *, code_hash: str,
                             evaluator_hash: str, python: str = "python",
                             dataset_manifest: str | None = None) -> list[str]:
    """verify_trace_eval.py --phase generation, as the launcher runs it after each model's generation."""
    argv = [python, VERIFIER, "--campaign-root", campaign_root, "--phase", "generation", "--json",
            "--code-hash", code_hash, "--evaluator-provenance-sha256", evaluator_hash]
    if dataset_manifest:
        argv += ["--dataset-manifest", dataset_manifest]
    for m in models:
        argv += ["--model-entry", f"{m.slug}={m.path}={m.revision}"]
    return argv + ["--seeds", *(str(s) for s in seeds)]


def provenance_argvs(python: str = "python") -> tuple[list[str], list[str]]:
    """The launcher's two fingerprints: the evaluator's (--hash-only) and the code's (append the first's hash)."""
    return ([python, EVALUATOR_PROVENANCE, "--repo-root", ".", "--vlmeval-root", "external/VLMEvalKit", "--hash-only"],
            [python, CODE_PROVENANCE, "--repo-root", ".", "--vlmeval-root", "external/VLMEvalKit", "--evaluator-sha256"])


def deltas_for(models: list[EvaluatorModel], base_of: dict[str, str]) -> list[tuple[str, str, str]]:
    """`--delta` for every trained model whose same-scale base is in the run (the paired change)."""
    by_id = {m.model_id: m for m in models}
    out = []
    for m in models:
        base = base_of.get(m.model_id)
        if base and base in by_id:
            out.append((f"{m.label} - {by_id[base].label}", m.slug, by_id[base].slug))
    return out


# run_trace_eval.sh prints `model=SLUG path=PATH revision=REV source=SRC label=LABEL` unquoted: the
# label (free text, spaces allowed) is the rest of the line; the other four have no spaces.
_MODEL_LINE = re.compile(r"^model=(?P<model>\S*) path=(?P<path>\S*) revision=(?P<revision>\S*) "
                         r"source=(?P<source>\S*) label=(?P<label>.*)$")
# The launcher's check of a model's source: owner/repo@ a 40- or 64-hex immutable revision.
SOURCE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*@([0-9a-f]{40}|[0-9a-f]{64})$")


def local_source(model_id: str, revision: str) -> str:
    """A local checkpoint's `source` in the form the launcher accepts: local/<name>@<64 hex>.

    Its immutable revision is `sha256set:<64 hex>` (the evaluator's content hash, register-local)
    or a commit; the launcher takes only the hex after `@`.
    """
    name = re.sub(r"[^A-Za-z0-9._-]", "-", model_id).lstrip("._-") or "model"
    return f"local/{name}@{revision.split(':', 1)[-1]}"


def parse_print_config(text: str) -> PrintedConfig:
    """`suite=`, `run_tag=`, `seeds=`, one `model=… path=… revision=… source=… label=…` line per model, `delta=`."""
    cfg = PrintedConfig()
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("model="):
            m = _MODEL_LINE.match(line)
            cfg.models.append(m.groupdict() if m else {"model": line.split()[0].split("=", 1)[1]})
        elif line.startswith("suite="):
            cfg.suite = line.split("=", 1)[1].strip()
        elif line.startswith("run_tag="):
            cfg.run_tag = line.split("=", 1)[1].strip()
        elif line.startswith("seeds="):
            cfg.seeds = [int(s) for s in re.findall(r"-?\d+", line.split("=", 1)[1])]
        elif line.startswith("delta="):
            cfg.deltas.append(line.split("=", 1)[1].strip())
    return cfg


def config_mismatches(printed: PrintedConfig, models: list[EvaluatorModel], seeds: list[int], run_tag: str,
                      suite_id: str) -> list[str]:
    """What the launcher would run that differs from what we asked (empty: it agrees)."""
    problems = []
    if printed.suite != suite_id:
        problems.append(f"suite {printed.suite!r}, expected {suite_id!r}")
    if printed.run_tag != run_tag:
        problems.append(f"run_tag {printed.run_tag!r}, expected {run_tag!r}")
    if printed.seeds != list(seeds):
        problems.append(f"seeds {printed.seeds}, expected {list(seeds)}")
    got = {m.get("model"): m for m in printed.models}
    for m in models:
        p = got.get(m.slug)
        if p is None:
            problems.append(f"model {m.slug} missing from the printed config")
            continue
        for key, want in (("path", m.path), ("revision", m.revision), ("source", m.source), ("label", m.label)):
            if p.get(key) != want:
                problems.append(f"model {m.slug}: {key} {p.get(key)!r}, expected {want!r}")
    extra = set(got) - {m.slug for m in models}
    problems += [f"model {s} printed but not asked for" for s in sorted(x for x in extra if x)]
    return problems
