"""Each step's receipt as in-toto provenance (SLSA provenance v1): what a job of a campaign produced,
from what, run by which runtime and when.

Subjects: the outputs the receipt lists, with the sha256 the receipt recorded when the job finished
(what the step produced; a file changed since is caught when the statement's subjects are re-hashed).
The build definition holds the step and the recipe as external parameters, and as resolved
dependencies the campaign's resolved recipe, the step's image, its models and the receipts of the step
before it (those of its own slice); the run details hold the runtime and the receipt's times.

A receipt whose content no longer hashes to its recorded content_sha256 is not exported: a statement of
it would vouch for a record that was changed (the service exports nothing for a campaign that does not
verify). Numbers go into strings: in-toto-attestation keeps a
predicate as a protobuf Struct, where every number becomes a float.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from trace_tui.campaign_files.recipe_file import RECIPE_FILE, read_campaign_recipe
from trace_tui.campaign_files.state import MIB, read_campaign_json
from trace_tui.common.digest import sha256_json
from trace_tui.common.safe_read import Folder, NotRead
from trace_tui.errors import TraceTuiError
from trace_tui.signing import envelopes, predicates
from trace_tui.signing.envelopes import Subject
from trace_tui.verify.attest_subjects import CampaignPart, JobReceipt, campaign_parts, job_receipts, listed_outputs
from trace_tui.verify.campaign import IDENTITY_FILE

BUILD_TYPE = "urn:trace-tui:campaign-step:v1"
BUILDER_PREFIX = "urn:trace-tui:runner:"
RECEIPTS_FOLDER = "receipts"
SUFFIX = ".intoto.json"


@dataclass(frozen=True)
class StepContext:
    """What every receipt of one campaign part shares: its identity and resolved recipe."""

    campaign_id: str
    recipe: dict[str, Any]  # recipe.json's content
    recipe_sha256: str | None  # recipe.json's bytes (None: not readable)


def why_not_exported(r: JobReceipt) -> str | None:
    """Why receipt R cannot be exported as provenance, or None."""
    if r.content is None or r.receipt is None:
        return "its receipt cannot be read"
    if sha256_json(r.content) != r.receipt.get("content_sha256"):
        return "its receipt content does not hash to its content_sha256 (it was changed)"
    if not any(isinstance(v.get("sha256"), str) for v in listed_outputs(r.content).values()):
        return "its receipt lists no outputs"
    return None


def step_statement(r: JobReceipt, ctx: StepContext, upstream: list[tuple[str, str]]) -> dict[str, Any]:
    """The provenance statement of receipt R (``why_not_exported(r)`` is None); UPSTREAM: the receipts of the
    step before it that this job read from, as (campaign-relative name, sha256 of the file)."""
    content = r.content or {}
    subjects = [Subject(r.part.prefix + rel, {"sha256": v["sha256"]})
                for rel, v in sorted(listed_outputs(content).items()) if isinstance(v.get("sha256"), str)]
    predicate = {"buildDefinition": _build_definition(r, ctx, upstream), "runDetails": _run_details(r, ctx)}
    predicates.check_predicate(predicates.PROVENANCE_TYPE, predicate)
    return envelopes.statement(subjects, predicates.PROVENANCE_TYPE, predicate)


def _words(value: Any) -> Any:
    """VALUE with every number a string (a Struct would turn 42 into 42.0)."""
    if isinstance(value, dict):
        return {str(k): _words(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_words(v) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


def _build_definition(r: JobReceipt, ctx: StepContext, upstream: list[tuple[str, str]]) -> dict[str, Any]:
    content = r.content or {}
    inputs = content.get("inputs") if isinstance(content.get("inputs"), dict) else {}
    recipe = ctx.recipe.get("recipe") if isinstance(ctx.recipe.get("recipe"), dict) else {}
    external: dict[str, Any] = {
        "recipe": {"name": recipe.get("name"), "runTag": ctx.recipe.get("run_tag"),
                   "configSha256": ctx.recipe.get("config_sha256")},
        "step": inputs.get("step") or {"id": content.get("step")},
        "slice": content.get("slice"),
    }
    for key in ("model", "seed", "benchmark"):
        if content.get(key) is not None:
            external[key] = content[key]
    if inputs.get("settings_sha256"):
        external["settingsSha256"] = inputs["settings_sha256"]
    internal = {"inputHash": content.get("input_hash"), "receipt": r.name,
                "receiptContentSha256": r.receipt.get("content_sha256") if r.receipt else None,
                "rows": content.get("rows"), "total": content.get("total"), "score": content.get("score")}
    deps = []
    if ctx.recipe_sha256:
        deps.append({"name": r.part.prefix + RECIPE_FILE, "digest": {"sha256": ctx.recipe_sha256}})
    image = _image(content, recipe)
    if image is not None:
        deps.append(image)
    deps += [_model(m) for m in _models(inputs)]
    deps += [{"name": name, "digest": {"sha256": digest}} for name, digest in upstream]
    return {"buildType": BUILD_TYPE, "externalParameters": _words(external),
            "internalParameters": _words({k: v for k, v in internal.items() if v is not None}),
            "resolvedDependencies": deps}


def _image(content: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any] | None:
    image_id = (content.get("inputs") or {}).get("image_id")
    if not isinstance(image_id, str) or not image_id:
        return None
    step = next((s for s in recipe.get("steps", []) if isinstance(s, dict) and s.get("id") == content.get("step")),
                {})
    name = f"image:{step.get('image') or 'host'}"
    if image_id.startswith("sha256:"):  # a Docker image id: the sha256 of its configuration
        return {"name": name, "digest": {"sha256": image_id.removeprefix("sha256:")}}
    return {"name": name, "uri": image_id}  # the host's Python (the local runtime): no digest to give


def _models(inputs: dict[str, Any]) -> list[dict[str, Any]]:
    if isinstance(inputs.get("model"), dict):
        return [inputs["model"]]
    return [m for m in inputs.get("models") or [] if isinstance(m, dict)]


def _model(m: dict[str, Any]) -> dict[str, Any]:
    name = f"model:{m.get('id')}"
    if m.get("repo_id") and m.get("revision"):
        return {"name": name, "uri": f"https://huggingface.co/{m['repo_id']}/tree/{m['revision']}"}
    if m.get("store_entry"):
        return {"name": name, "uri": f"trace-tui-store:{m['store_entry']}"}
    return {"name": name}


def _run_details(r: JobReceipt, ctx: StepContext) -> dict[str, Any]:
    content = r.content or {}
    circumstance = (r.receipt or {}).get("circumstance")
    circumstance = circumstance if isinstance(circumstance, dict) else {}
    metadata: dict[str, Any] = {"invocationId": f"{ctx.campaign_id}/{content.get('step')}/{content.get('slice')}"}
    for key, field in (("started_at", "startedOn"), ("finished_at", "finishedOn")):
        when = circumstance.get(key)
        if isinstance(when, (int, float)) and not isinstance(when, bool) and when > 0:
            metadata[field] = predicates.timestamp(float(when))
    runtime = circumstance.get("runtime") if isinstance(circumstance.get("runtime"), str) else "unknown"
    return {"builder": {"id": BUILDER_PREFIX + runtime}, "metadata": metadata}


def upstream_receipts(r: JobReceipt, receipts: list[JobReceipt], file_sha256: dict[str, str]) -> list[tuple[str, str]]:
    """The receipts of the step before R that R's inputs name: the job whose input hash R's inputs hold (a
    per-slice step after a per-slice one), else every receipt of that step (a step that read them all)."""
    inputs = (r.content or {}).get("inputs")
    named = inputs.get("upstream") if isinstance(inputs, dict) else None
    if not isinstance(named, dict):
        return []
    out = []
    for step, input_hash in sorted(named.items()):
        same_part = [x for x in receipts if x.part == r.part and x.job.step == step]
        exact = [x for x in same_part if x.job.input_hash == input_hash]
        for x in exact or same_part:
            if x.name in file_sha256:
                out.append((x.name, file_sha256[x.name]))
    return out


@dataclass(frozen=True)
class Exported:
    """One receipt's provenance: where it goes (relative to the output folder) and the statement."""

    name: str
    receipt: str  # the receipt it restates, campaign-relative
    statement: dict[str, Any]


def file_name(r: JobReceipt) -> str:
    """Where receipt R's statement is written in the output folder: its path under receipts/ (a shard's under
    shards/ID/), ``.json`` replaced by ``.intoto.json``."""
    rel = PurePosixPath(r.rel)
    if rel.parts[:1] == (RECEIPTS_FOLDER,):
        rel = PurePosixPath(*rel.parts[1:])
    return r.part.prefix + str(rel.with_suffix("")) + SUFFIX


def campaign_statements(root: Path) -> tuple[list[Exported], list[tuple[str, str]]]:
    """(the provenance statement of each completed job's receipt, [(receipt, why it was not exported)])."""
    exported: list[Exported] = []
    skipped: list[tuple[str, str]] = []
    folder = Folder(root, name="the campaign")
    for part in campaign_parts(root):
        receipts = job_receipts(part)
        file_sha256: dict[str, str] = {}
        for r in receipts:
            try:
                digest = folder.sha256(r.name)
            except NotRead:
                digest = None
            if digest is not None:
                file_sha256[r.name] = digest
        ctx = _context(part)
        for r in receipts:
            why = why_not_exported(r)
            if why is not None:
                skipped.append((r.name, why))
                continue
            exported.append(Exported(file_name(r), r.name, step_statement(r, ctx, upstream_receipts(r, receipts,
                                                                                                      file_sha256))))
    return exported, skipped


def _context(part: CampaignPart) -> StepContext:
    try:
        recipe = read_campaign_recipe(part.root)
    except TraceTuiError:
        recipe = {}
    try:
        identity = read_campaign_json(part.root / IDENTITY_FILE, limit=MIB)
    except (FileNotFoundError, TraceTuiError):
        identity = {}
    try:
        recipe_sha256 = Folder(part.root, name="the campaign").sha256(RECIPE_FILE)
    except NotRead:
        recipe_sha256 = None
    campaign_id = identity.get("id") if isinstance(identity, dict) else None
    return StepContext(str(campaign_id or part.root.name), recipe, recipe_sha256)
