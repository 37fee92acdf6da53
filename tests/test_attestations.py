"""Attestations of a campaign: `verify --campaign DIR --vsa FILE` (a SLSA verification summary),
`--provenance OUTDIR` (each step's receipt as SLSA provenance) and `verify --attestation FILE` reading
them back, offline.

Real campaigns made by the real CLI (a selftest recipe on the local runtime, about a second; a Slurm
parent with one shard run locally and merged), real keys made by `trace-tui keys init`, the real CLI
in a subprocess; what it writes is read back with the libraries' own code: securesystemslib's DSSE
envelope, in-toto-attestation's Statement and its VSA and provenance protobuf messages.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
from in_toto_attestation.predicates.vsa.v1 import vsa_pb2
from in_toto_attestation.v1.statement import Statement
from in_toto_attestation.v1.statement_pb2 import Statement as StatementProto
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey

from trace_tui import __version__
from trace_tui.resources import release_lock_path
from trace_tui.signing import predicates
from trace_tui.signing.envelopes import Subject, sign, statement
from trace_tui.signing.keys import load_signer

REPO = Path(__file__).resolve().parents[1]
RECIPE = """name: attesttest
title: attestation test
purpose: a small campaign to attest
canonical: false
selection: {suite: demo, seeds: all, benchmarks: all}
local_models:
  - {id: tiny-a, label: A, store_entry: "local:model/tiny-a"}
demo_tasks:
  - {key: t1, rows: 3}
  - {key: t2, rows: 2}
steps:
  - {id: gen, title: rows, stage: host, per_slice: true, run: [trace_tui.stages.selftest, rows]}
"""
SCORE = "outputs/gen/tiny-a/42/t1/score.json"
RECEIPTS = ["receipts/gen/tiny-a/42/t1.json", "receipts/gen/tiny-a/42/t2.json"]


def cli(*args: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TRACE_TUI_DEBUG"}
    return subprocess.run([sys.executable, "-m", "trace_tui", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=env)


def ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    return done


def one_line(done: subprocess.CompletedProcess[str], code: int, *must: str) -> str:
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert done.returncode == code, (done.returncode, done.stdout[-2000:], done.stderr)
    assert len(lines) == 1 and "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    for text in must:
        assert text in lines[0], (text, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A finished campaign; a signing home (its key), a reader's home that trusts that key, and a home with a
    key of its own that trusts nothing else."""
    root = tmp_path_factory.mktemp("attest")
    recipe = root / "r.yaml"
    recipe.write_text(RECIPE)
    homes = {name: root / name for name in ("signer", "reader", "stranger", "keyless")}
    ok(cli("keys", "init", "--home", str(homes["signer"])))
    ok(cli("keys", "init", "--home", str(homes["stranger"])))
    ok(cli("keys", "trust", str(homes["signer"] / "keys" / "signing-key.pub.json"), "--home", str(homes["reader"])))
    campaign = root / "campaign"
    ok(cli("--home", str(homes["keyless"]), "--recipe", str(recipe), "--yes", "--runtime", "local", "--campaign",
           str(campaign)))
    vsa = root / "out" / "campaign.vsa.json"
    prov = root / "out" / "provenance"
    ok(cli("verify", "--home", str(homes["signer"]), "--campaign", str(campaign), "--vsa", str(vsa), "--provenance",
           str(prov)))
    return {"root": root, "recipe": recipe, "campaign": campaign, "vsa": vsa, "provenance": prov, **homes}


def public_key(home: Path) -> SSlibKey:
    doc = json.loads((home / "keys" / "signing-key.pub.json").read_text())
    return SSlibKey.from_dict(doc.pop("keyid"), doc)


def library_statement(path: Path, home: Path) -> dict[str, Any]:
    """The statement of the envelope at PATH, verified with securesystemslib against HOME's public key and
    validated as an in-toto Statement v1 by in-toto-attestation."""
    env = Envelope.from_dict(json.loads(path.read_text()))
    assert env.payload_type == "application/vnd.in-toto+json"
    env.verify([public_key(home)], 1)
    doc = json.loads(env.payload)
    Statement.copy_from_pb(json_format.ParseDict(doc, StatementProto())).validate()
    return doc


def parse_vsa(predicate: dict[str, Any]) -> vsa_pb2.VerificationSummary:
    """The predicate parsed by the library's VSA message, strictly (no field it does not define)."""
    levels = predicate["verifiedLevels"]
    assert isinstance(levels, list)  # the SLSA VSA v1 specification's array
    field = vsa_pb2.VerificationSummary.DESCRIPTOR.fields_by_name["verified_levels"]
    if field.is_repeated:
        return json_format.ParseDict(predicate, vsa_pb2.VerificationSummary())
    # in-toto-attestation 0.9.3 declares the field a single string (in-toto/attestation#425): the one level
    # written goes into it as a string, and every other field is parsed as written.
    assert len(levels) == 1
    return json_format.ParseDict({**predicate, "verifiedLevels": levels[0]}, vsa_pb2.VerificationSummary())


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_summary_verifies_with_the_libraries_own_code(made) -> None:
    doc = library_statement(made["vsa"], made["signer"])
    assert doc["predicateType"] == "https://slsa.dev/verification_summary/v1"
    vsa = parse_vsa(doc["predicate"])
    assert vsa.verification_result == "PASSED"
    assert doc["predicate"]["verifiedLevels"] == ["TRACE_TUI_CAMPAIGN_VERIFIED"]
    assert vsa.slsa_version == "1.0"
    assert vsa.verifier.id == f"urn:trace-tui:verifier:{__version__}"
    assert vsa.resource_uri == made["campaign"].resolve().as_uri()
    assert vsa.time_verified.seconds > 0
    # The policy travels in its uri; its digest is the sha256 of that document, which names the release lock
    # trace-tui ships and the campaign's recipe.json by their sha256.
    prefix = "data:application/json;base64,"
    assert vsa.policy.uri.startswith(prefix)
    policy_bytes = base64.b64decode(vsa.policy.uri[len(prefix):])
    assert vsa.policy.digest["sha256"] == hashlib.sha256(policy_bytes).hexdigest()
    policy = json.loads(policy_bytes)
    assert policy["releaseLock"]["digest"]["sha256"] == sha256(release_lock_path())
    assert policy["recipe"]["digest"]["sha256"] == sha256(made["campaign"] / "recipe.json")
    # Subjects: the identity, the recipe, each receipt and each output it lists, with their sha256 now.
    subjects = {s["name"]: s["digest"]["sha256"] for s in doc["subject"]}
    want = ["campaign.json", "recipe.json", *RECEIPTS, SCORE, "outputs/gen/tiny-a/42/t1/rows.jsonl",
            "outputs/gen/tiny-a/42/t2/score.json", "outputs/gen/tiny-a/42/t2/rows.jsonl"]
    assert sorted(subjects) == sorted(want)
    assert all(subjects[name] == sha256(made["campaign"] / name) for name in want)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl on this machine")
def test_the_envelope_signature_verifies_with_openssl(made, tmp_path) -> None:
    """What the README shows a reviewer: DSSE's pre-authentication encoding signed with ECDSA P-256 / SHA-256,
    checked by OpenSSL with the PEM public key; one byte changed and it fails."""
    env = json.loads(made["vsa"].read_text())
    payload = base64.b64decode(env["payload"])
    kind = env["payloadType"].encode()
    pae = tmp_path / "pae"
    pae.write_bytes(b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload))
    sig = tmp_path / "sig"
    sig.write_bytes(base64.b64decode(env["signatures"][0]["sig"]))
    pem = made["signer"] / "keys" / "signing-key.pub.pem"

    def openssl() -> subprocess.CompletedProcess[str]:
        return subprocess.run(["openssl", "dgst", "-sha256", "-verify", str(pem), "-signature", str(sig), str(pae)],
                              capture_output=True, text=True, timeout=60)

    assert openssl().stdout.strip() == "Verified OK"
    pae.write_bytes(pae.read_bytes().replace(b"PASSED", b"PASSES"))
    assert openssl().returncode != 0


def test_the_summary_checks_with_verify_attestation_at_another_site(made) -> None:
    done = ok(cli("verify", "--home", str(made["reader"]), "--attestation", str(made["vsa"]), "--campaign",
                  str(made["campaign"])))
    assert "SLSA verification summary v1, signed by key" in done.stdout
    assert "verification PASSED (TRACE_TUI_CAMPAIGN_VERIFIED)" in done.stdout
    assert "8 of 8 subjects equal" in done.stdout
    assert done.stdout.rstrip().endswith("VERIFIED")
    # The public key given on the command line instead of trusted beforehand.
    ok(cli("verify", "--home", str(made["stranger"]), "--attestation", str(made["vsa"]), "--trust-key",
           str(made["signer"] / "keys" / "signing-key.pub.json")))
    data = json.loads(ok(cli("verify", "--home", str(made["signer"]), "--attestation", str(made["vsa"]),
                             "--json")).stdout)
    assert data["ok"] and data["signed_by"] == public_key(made["signer"]).keyid and data["problems"] == []


def test_a_changed_or_missing_subject_is_named(made, tmp_path) -> None:
    copy_dir = tmp_path / "copy"
    shutil.copytree(made["campaign"], copy_dir, ignore=shutil.ignore_patterns(".lock"))
    score = copy_dir / SCORE
    score.write_text(score.read_text().replace("100.0", "99.0"))
    (copy_dir / RECEIPTS[1]).unlink()
    done = cli("verify", "--home", str(made["reader"]), "--attestation", str(made["vsa"]), "--campaign", str(copy_dir))
    assert done.returncode == 1, done.stdout + done.stderr
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAILED ")]
    assert len(failed) == 2, done.stdout
    assert any(f"subject {SCORE}: differs" in line and sha256(score) in line for line in failed), failed
    assert any(f"subject {RECEIPTS[1]}: absent" in line for line in failed), failed
    assert "6 of 8 subjects equal" in done.stdout


@pytest.mark.parametrize("home", ["stranger", "keyless"])
def test_a_summary_signed_by_a_key_this_site_does_not_trust_is_refused_in_one_line(made, home: str) -> None:
    line = one_line(cli("verify", "--home", str(made[home]), "--attestation", str(made["vsa"]), "--campaign",
                        str(made["campaign"])), 1, str(made["vsa"]), "signed by key")
    assert "does not trust" in line or "trusts no key" in line


def test_a_summary_changed_after_signing_is_refused_in_one_line(made, tmp_path) -> None:
    env = json.loads(made["vsa"].read_text())
    doc = json.loads(base64.b64decode(env["payload"]))
    doc["predicate"]["verificationResult"] = "PASSED"
    doc["subject"][0]["digest"]["sha256"] = "0" * 64
    env["payload"] = base64.b64encode(json.dumps(doc).encode()).decode()
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(env))
    one_line(cli("verify", "--home", str(made["reader"]), "--attestation", str(forged)), 1,
             "changed after signing")


def test_an_unsigned_summary_says_so_and_is_accepted_only_when_asked(made, tmp_path) -> None:
    vsa = tmp_path / "unsigned.json"
    done = ok(cli("verify", "--home", str(made["keyless"]), "--campaign", str(made["campaign"]), "--vsa", str(vsa)))
    assert "unsigned: this home has no signing key" in done.stdout
    doc = json.loads(vsa.read_text())
    Statement.copy_from_pb(json_format.ParseDict(doc, StatementProto())).validate()
    parse_vsa(doc["predicate"])
    refused = cli("verify", "--home", str(made["reader"]), "--attestation", str(vsa), "--campaign",
                  str(made["campaign"]))
    assert refused.returncode == 1
    assert [x for x in refused.stdout.splitlines() if x.startswith("FAILED ") and "unsigned" in x], refused.stdout
    accepted = ok(cli("verify", "--home", str(made["reader"]), "--attestation", str(vsa), "--campaign",
                      str(made["campaign"]), "--allow-unsigned"))
    assert "unsigned" in accepted.stdout and "8 of 8 subjects equal" in accepted.stdout


def test_a_campaign_that_fails_verification_gets_a_failed_summary(made, tmp_path) -> None:
    copy_dir = tmp_path / "copy"
    shutil.copytree(made["campaign"], copy_dir, ignore=shutil.ignore_patterns(".lock"))
    score = copy_dir / SCORE
    score.write_text(score.read_text().replace("100.0", "99.0"))
    vsa, prov = tmp_path / "failed.json", tmp_path / "provenance"
    done = cli("verify", "--home", str(made["signer"]), "--campaign", str(copy_dir), "--vsa", str(vsa),
               "--provenance", str(prov))
    assert done.returncode == 1 and "FAILED" in done.stdout
    # No provenance is signed for receipts whose outputs did not verify.
    assert f"nothing written to {prov}: the campaign did not verify" in done.stdout
    assert not [p for p in prov.rglob("*") if p.is_file()]
    doc = library_statement(vsa, made["signer"])
    summary = parse_vsa(doc["predicate"])
    assert summary.verification_result == "FAILED" and doc["predicate"]["verifiedLevels"] == ["FAILED"]
    # The subjects are the files as they are: the changed score with its new sha256.
    assert {s["name"]: s["digest"]["sha256"] for s in doc["subject"]}[SCORE] == sha256(score)
    checked = cli("verify", "--home", str(made["reader"]), "--attestation", str(vsa), "--campaign", str(copy_dir))
    assert checked.returncode == 1
    assert "verificationResult FAILED" in checked.stdout and "8 of 8 subjects equal" in checked.stdout


def test_each_receipt_is_exported_as_provenance_that_validates(made) -> None:
    files = sorted(p.relative_to(made["provenance"]).as_posix() for p in made["provenance"].rglob("*") if p.is_file())
    assert files == ["gen/tiny-a/42/t1.intoto.json", "gen/tiny-a/42/t2.intoto.json"]
    for name, receipt_rel in zip(files, RECEIPTS):
        doc = library_statement(made["provenance"] / name, made["signer"])
        assert doc["predicateType"] == "https://slsa.dev/provenance/v1"
        prov = json_format.ParseDict(doc["predicate"], provenance_pb2.Provenance())
        receipt = json.loads((made["campaign"] / receipt_rel).read_text())
        content, circumstance = receipt["content"], receipt["circumstance"]
        assert {s["name"]: s["digest"]["sha256"] for s in doc["subject"]} == \
            {rel: v["sha256"] for rel, v in content["outputs"].items()}
        build = prov.build_definition
        assert build.build_type == "urn:trace-tui:campaign-step:v1"
        params = json_format.MessageToDict(build.external_parameters)
        assert params["step"] == content["inputs"]["step"]
        assert params["seed"] == "42" and params["slice"] == content["slice"]  # numbers as strings: exact
        assert params["recipe"]["configSha256"] == json.loads((made["campaign"] / "recipe.json").read_text())[
            "config_sha256"]
        deps = {d.name: d for d in build.resolved_dependencies}
        assert deps["recipe.json"].digest["sha256"] == sha256(made["campaign"] / "recipe.json")
        assert deps["image:host"].uri == content["inputs"]["image_id"]
        assert deps["model:tiny-a"].uri == "trace-tui-store:local:model/tiny-a"
        run = prov.run_details
        assert run.builder.id == "urn:trace-tui:runner:local"
        assert run.metadata.started_on.ToJsonString()[:19] == predicates.timestamp(circumstance["started_at"])[:19]
        assert run.metadata.finished_on.ToJsonString()[:19] == predicates.timestamp(circumstance["finished_at"])[:19]
        checked = ok(cli("verify", "--home", str(made["reader"]), "--attestation", str(made["provenance"] / name),
                         "--campaign", str(made["campaign"])))
        assert "SLSA provenance v1" in checked.stdout and "2 of 2 subjects equal" in checked.stdout


def test_a_signed_statement_whose_predicate_is_not_valid_fails_its_check(made, tmp_path) -> None:
    doc = library_statement(made["vsa"], made["signer"])
    bad = copy.deepcopy(doc["predicate"])
    bad["verificationResult"] = "MOSTLY"
    bad["reviewer"] = "me"  # a field the VSA message does not define
    subjects = [Subject(s["name"], s["digest"]) for s in doc["subject"]]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(sign(statement(subjects, doc["predicateType"], bad), load_signer(made["signer"]))))
    done = cli("verify", "--home", str(made["reader"]), "--attestation", str(path))
    assert done.returncode == 1
    assert [x for x in done.stdout.splitlines() if "not a valid SLSA verification summary v1 predicate" in x
            and "reviewer" in x], done.stdout
    with pytest.raises(ValueError, match="MOSTLY"):
        predicates.check_predicate(predicates.VSA_TYPE, {**doc["predicate"], "verificationResult": "MOSTLY"})
    with pytest.raises(ValueError, match="timeVerified"):
        predicates.check_predicate(predicates.VSA_TYPE, {k: v for k, v in doc["predicate"].items()
                                                         if k != "timeVerified"})


@pytest.mark.parametrize("content, words", [
    (b"not json", "not JSON"),
    (b'{"hello": 1}', "neither a DSSE envelope"),
    (None, "a directory"),
])
def test_an_attestation_that_is_not_one_is_a_usage_line(made, tmp_path, content: bytes | None, words: str) -> None:
    path = tmp_path / "a.json"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    one_line(cli("verify", "--home", str(made["reader"]), "--attestation", str(path)), 2, words)


@pytest.mark.parametrize("argv, words", [
    (["--vsa", "x.json"], "give --campaign DIR"),
    (["--attestation", "x.json", "--vsa", "y.json"], "does not go with --vsa"),
    (["--trust-key", "k.json"], "give --attestation FILE"),
])
def test_flags_that_do_not_go_together_are_one_usage_line(argv: list[str], words: str) -> None:
    one_line(cli("verify", *argv), 2, words)


def test_attestations_are_never_written_into_the_campaign(made) -> None:
    before = sorted(p.relative_to(made["campaign"]) for p in made["campaign"].rglob("*"))
    one_line(cli("verify", "--home", str(made["signer"]), "--campaign", str(made["campaign"]), "--vsa",
                 str(made["campaign"] / "vsa.json")), 2, "inside the campaign")
    one_line(cli("verify", "--home", str(made["signer"]), "--campaign", str(made["campaign"]), "--provenance",
                 str(made["campaign"] / "outputs" / "prov")), 2, "inside the campaign")
    assert sorted(p.relative_to(made["campaign"]) for p in made["campaign"].rglob("*")) == before


@pytest.fixture(scope="module")
def parent(made) -> tuple[Path, Any]:
    """A Slurm parent of the same recipe: one shard (seed 42) run on the local runtime, then merged."""
    from trace_tui.campaign_files.shard_files import read_plan
    from trace_tui.campaign_files.shards import shard_arguments

    root, home = made["root"], str(made["keyless"])
    folder = root / "parent"
    ok(cli("--home", home, "--recipe", str(made["recipe"]), "--scheduler", "slurm", "--dry-run", "--yes",
           "--campaign", str(folder), "--seeds", "42"))
    plan = read_plan(folder)
    shard = plan.shards[0]
    ok(cli("--home", home, "--recipe", str(made["recipe"]), *shard_arguments(plan, shard)[2:], "--yes", "--runtime",
           "local", "--campaign", str(folder / shard.dir)))
    ok(cli("merge", "--campaign", str(folder)))
    return folder, shard


def test_a_slurm_parent_is_attested_with_its_shards_files(made, parent) -> None:
    root = made["root"]
    parent, shard = parent
    vsa, prov = root / "parent.vsa.json", root / "parent-provenance"
    ok(cli("verify", "--home", str(made["signer"]), "--campaign", str(parent), "--vsa", str(vsa), "--provenance",
           str(prov)))
    names = {s["name"] for s in library_statement(vsa, made["signer"])["subject"]}
    assert {"shards.json", "merged.json", "recipe.json", f"{shard.dir}/{SCORE}", f"{shard.dir}/{RECEIPTS[0]}"} <= names
    done = ok(cli("verify", "--home", str(made["reader"]), "--attestation", str(vsa), "--campaign", str(parent)))
    assert f"{len(names)} of {len(names)} subjects equal" in done.stdout
    exported = sorted(p.relative_to(prov).as_posix() for p in prov.rglob("*.intoto.json"))
    assert exported == [f"{shard.dir}/gen/tiny-a/42/t1.intoto.json", f"{shard.dir}/gen/tiny-a/42/t2.intoto.json"]
    ok(cli("verify", "--home", str(made["reader"]), "--attestation", str(prov / exported[0]), "--campaign",
           str(parent)))


@pytest.mark.slow
def test_the_demo_is_attested_with_its_per_row_files_covered_by_their_receipts(demo_campaign, made, tmp_path) -> None:
    assert demo_campaign["run"].returncode == 0, demo_campaign["run"].stderr[-2000:]
    campaign, signer = demo_campaign["campaign"], made["signer"]
    vsa, prov = tmp_path / "demo.vsa.json", tmp_path / "provenance"
    done = ok(cli("verify", "--home", str(signer), "--campaign", str(campaign), "--vsa", str(vsa), "--provenance",
                  str(prov), timeout=600))
    # The demo's own verify step writes nothing: its receipt is a subject, but there is no step output to attest.
    assert "not exported: receipts/verify/_step.json (its receipt lists no outputs)" in done.stdout
    names = {s["name"] for s in library_statement(vsa, signer)["subject"]}
    slice_ = "tiny-qwen2.5-vl/42/counting"
    assert not [n for n in names if "/rows/" in n]
    assert {f"receipts/generate/{slice_}.json", f"outputs/score/{slice_}/score.json", "receipts/verify/_step.json",
            "outputs/train-smoke/_step/checkpoint-1/model.safetensors"} <= names
    exported = sorted(p.relative_to(prov).as_posix() for p in prov.rglob("*.intoto.json"))
    assert len(exported) == 14 and "train-smoke/_step.intoto.json" in exported
    # The generate step's provenance names each row file it wrote; the extract step's, the generate receipt of
    # its own slice as what it read.
    generated = library_statement(prov / f"generate/{slice_}.intoto.json", signer)
    assert len([s for s in generated["subject"] if "/rows/" in s["name"]]) == 8
    extracted = library_statement(prov / f"extract/{slice_}.intoto.json", signer)
    deps = [d["name"] for d in extracted["predicate"]["buildDefinition"]["resolvedDependencies"]
            if d["name"].startswith("receipts/")]
    assert deps == [f"receipts/generate/{slice_}.json"]
    for name in (vsa, prov / f"generate/{slice_}.intoto.json"):
        ok(cli("verify", "--home", str(made["reader"]), "--attestation", str(name), "--campaign", str(campaign)))


@pytest.mark.parametrize("damage", ["plan", "shard state"])
def test_a_damaged_slurm_parent_gets_a_failed_summary_not_a_traceback(made, parent, tmp_path, damage: str) -> None:
    folder, shard = parent
    copy_dir = tmp_path / "parent"
    shutil.copytree(folder, copy_dir, symlinks=True, ignore=shutil.ignore_patterns(".lock"))
    if damage == "plan":
        (copy_dir / "shards.json").write_text("{")
    else:
        (copy_dir / shard.dir / "state.sqlite").write_bytes(b"not a database")
    vsa = tmp_path / "vsa.json"
    done = cli("verify", "--home", str(made["signer"]), "--campaign", str(copy_dir), "--vsa", str(vsa))
    assert done.returncode == 1, (done.stdout[-2000:], done.stderr)
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    assert library_statement(vsa, made["signer"])["predicate"]["verificationResult"] == "FAILED"
