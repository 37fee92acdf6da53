"""Release verification on the real release files, and on tampered copies of them (tmp_path).

Every check reads the real data files through TRACE_RELEASE_DIR; tampering is
done on a private copy, never on the shared directory.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from trace_tui.common.digest import sha256_bytes
from trace_tui.release import release_lock
from trace_tui.verify.release import verify_release
from trace_tui.verify.trust import RELEASE_FILES, RELEASE_RECEIPTS, needed_documents

REPO = Path(__file__).resolve().parents[1]
RELEASE = Path(os.environ.get("TRACE_RELEASE_DIR", REPO.parent / "shared" / "trace-release")).resolve()
PRESENT = sorted(str(p.relative_to(RELEASE)) for p in RELEASE.rglob("*") if p.is_file())
RESULTS = "rlvr/evaluation/trace_eval/results.json"
SUITE = "rlvr/evaluation/trace_eval/suite.v1.json"


def copy_release(dst: Path) -> Path:
    shutil.copytree(RELEASE, dst)
    for p in dst.rglob("*"):  # the shared copy is read-only; the private copy must be writable
        p.chmod(0o755 if p.is_dir() else 0o644)
    dst.chmod(0o755)
    return dst


@pytest.fixture
def release_copy(tmp_path: Path) -> Path:
    return copy_release(tmp_path / "release")


@pytest.fixture(scope="module")
def real():
    return verify_release(RELEASE)


def test_real_release_verifies(real, trace_release_dir: Path) -> None:
    assert Path(real.release_dir) == trace_release_dir
    assert real.failed == []
    assert real.needed_absent == []
    assert real.ok() and real.exit_code() == 0
    counts = real.counts()
    # 20 data files present and verified, the paper and the 119 code/doc files absent.
    assert counts["files_verified"] == len(PRESENT) == 20
    assert counts["files_absent"] == 120
    assert counts["files_unverified"] == 0 and counts["files_failed"] == 0
    # The shared copy lacks the paper and code files: --strict fails on them.
    assert not real.ok(strict=True) and real.exit_code(strict=True) == 1


def test_absent_files_are_reported_absent_never_passed(real) -> None:
    paper = [c for c in real.checks if c.file == "paper.pdf"]
    assert paper and {c.status for c in paper} == {"absent"}
    for c in real.checks:
        if c.status == "passed":
            assert (RELEASE / c.file).is_file(), c
    absent = {f.path for f in real.files_in("absent")}
    assert "rlvr/train.py" in absent and "paper.pdf" in absent
    assert not any((RELEASE / p).exists() for p in absent)


def test_every_declared_hash_is_checked(real) -> None:
    ids = {c.id for c in real.checks}
    # The trust chain of SPEC §4: lock, release_files, receipts, validation receipt, configs, results' suite hash.
    for expected in (
        f"lock:{RESULTS}", f"lock:{RELEASE_FILES}", "lock:paper.pdf",
        f"declared:{RELEASE_FILES}#files[0].sha256",
        f"declared:{RELEASE_RECEIPTS}#canonical_files[3].sha256",
        "declared:rlvr/evaluation/trace_validation/release_receipt.v1.json#public_release.results_sha256",
        "declared:rlvr/configs/trace-qwen2.5-vl-3b.yaml#release.prompt.sha256",
        "declared:rlvr/configs/trace-qwen2.5-vl-7b.yaml#release.dataset.equivalence_receipt_sha256",
        f"declared:{RESULTS}#suite.suite_sha256",
        "declared:rlvr/evaluation/trace_validation/suite.v1.json#prompt.system_prompt_sha256",
    ):
        assert expected in ids, expected
    release_files = json.loads((RELEASE / RELEASE_FILES).read_text())
    declared = [c for c in real.checks if c.id.startswith(f"declared:{RELEASE_FILES}#files[")]
    assert len(declared) == len(release_files["files"]) == 138


def test_content_checks_pass_on_the_real_release(real) -> None:
    content = {c.id: c for c in real.checks if c.group in ("results", "aggregates", "validation")}
    for cid in ("results.complete", "results.evaluated_rows", "results.suite", "results.models",
                "aggregates.benchmark_summaries", "aggregates.category_scores", "aggregates.category_summaries",
                "aggregates.overall_scores", "aggregates.overall_summaries", "aggregates.overall_deltas",
                "aggregates.benchmark_deltas", "aggregates.pairs", "validation.models", "validation.rows",
                "validation.receipt", "validation.scores", "validation.suite"):
        assert content[cid].status == "passed", content[cid]
    assert "576 scores" in content["results.complete"].message


def test_trusted_hashes_come_from_the_lock(real) -> None:
    by = {f.path: f for f in real.files}
    assert by[RESULTS].trusted_by == "release lock"
    assert by["rlvr/configs/trace-qwen2.5-vl-3b.yaml"].trusted_by.startswith(RELEASE_FILES)
    for f in real.files_in("verified"):
        assert f.sha256 == f.trusted_sha256 == sha256_bytes((RELEASE / f.path).read_bytes())


@pytest.mark.parametrize("fraction", [0.0, 0.5, 0.83])
def test_a_flipped_byte_fails_that_file_and_no_other(tmp_path: Path, fraction: float) -> None:
    root = copy_release(tmp_path / "release")
    wrong: list[str] = []
    for rel in PRESENT:
        path = root / rel
        original = path.read_bytes()
        i = min(int(len(original) * fraction), len(original) - 1)
        data = bytearray(original)
        data[i] ^= 0x01
        path.write_bytes(bytes(data))
        try:
            result = verify_release(root)
            if result.failed_files != [rel] or result.exit_code() != 1:
                wrong.append(f"{rel}@{i}: failed files {result.failed_files}")
            states = {f.path: f.state for f in result.files}
            if states[rel] != "failed":
                wrong.append(f"{rel}@{i}: state {states[rel]}")
        finally:
            path.write_bytes(original)
    assert wrong == []


@pytest.mark.parametrize("rel", [RESULTS, SUITE, "rlvr/evaluation/trace_validation/results.v1.json",
                                 "rlvr/configs/trace-qwen2.5-vl-3b.yaml", RELEASE_FILES])
def test_broken_json_or_yaml_is_named(release_copy: Path, rel: str) -> None:
    path = release_copy / rel
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])  # truncated
    result = verify_release(release_copy)
    assert result.failed_files == [rel]
    doc = next(c for c in result.checks if c.id == f"document:{rel}")
    assert doc.status == "failed"
    assert "not valid" in doc.message


def test_schema_violation_is_named(release_copy: Path) -> None:
    path = release_copy / RESULTS
    data = json.loads(path.read_text())
    data["scores"]["benchmark_scores"][5]["score"] = "31.2"  # a string where a number belongs
    path.write_text(json.dumps(data))
    result = verify_release(release_copy)
    assert result.failed_files == [RESULTS]
    doc = next(c for c in result.checks if c.id == f"document:{RESULTS}")
    assert doc.status == "failed" and "scores.benchmark_scores.5.score" in doc.message


def test_a_removed_needed_file_is_absent_and_fails(release_copy: Path) -> None:
    (release_copy / RESULTS).unlink()
    result = verify_release(release_copy)
    assert result.failed == []
    assert result.needed_absent == [RESULTS]
    assert result.exit_code() == 1
    assert {c.status for c in result.checks if c.file == RESULTS} == {"absent"}
    complete = next(c for c in result.checks if c.id == "results.complete")
    assert complete.status == "absent"


def test_a_removed_optional_file_is_absent_and_passes(release_copy: Path) -> None:
    rel = "rlvr/examples/prompts/chat_template_no_think.jinja"
    (release_copy / rel).unlink()
    result = verify_release(release_copy)
    assert result.failed == [] and result.exit_code() == 0
    assert rel in {f.path for f in result.files_in("absent")}
    assert result.exit_code(strict=True) == 1


def test_needed_documents_cover_results_suites_receipts_provenance_configs() -> None:
    needed = set(needed_documents(release_lock()))
    assert RESULTS in needed and SUITE in needed and RELEASE_RECEIPTS in needed
    assert "rlvr/evaluation/trace_eval/benchmark_provenance.v1.json" in needed
    assert "rlvr/configs/trace-qwen2.5-vl-7b.yaml" in needed
    assert "paper.pdf" not in needed


def _alter_receipt_hash(root: Path) -> tuple[str, str]:
    path = root / RELEASE_RECEIPTS
    text = path.read_text()
    good = "569ea2463ace4c6b505d1fb168957e558667641810e90a8d9ede80f555823c98"  # results.json, as published
    assert text.count(good) == 2
    bad = "0" * 64
    path.write_text(text.replace(f'"sha256": "{good}"', f'"sha256": "{bad}"', 1))
    return good, bad


def test_a_receipt_stating_a_wrong_hash_is_blamed_not_the_file(release_copy: Path) -> None:
    _alter_receipt_hash(release_copy)
    result = verify_release(release_copy)
    assert result.failed_files == [RELEASE_RECEIPTS]
    declared = next(c for c in result.checks if c.id == f"declared:{RELEASE_RECEIPTS}#canonical_files[3].sha256")
    assert declared.status == "failed" and declared.file == RELEASE_RECEIPTS
    assert declared.expected == "0" * 64
    assert {f.path: f.state for f in result.files}[RESULTS] == "verified"


def test_an_intact_receipt_with_a_wrong_hash_is_its_own_failure(release_copy: Path) -> None:
    """A receipt whose own bytes are trusted but which states a wrong hash: the receipt fails, the file does not.

    The chain is re-sealed (release_files states the altered receipt's hash, and the
    lock used here pins the altered release_files), so only the statement is wrong.
    """
    _alter_receipt_hash(release_copy)
    receipts_sha = sha256_bytes((release_copy / RELEASE_RECEIPTS).read_bytes())
    rf_path = release_copy / RELEASE_FILES
    rf = json.loads(rf_path.read_text())
    for f in rf["files"]:
        if "rlvr/" + f["path"] == RELEASE_RECEIPTS:
            f["sha256"] = receipts_sha
    rf_path.write_text(json.dumps(rf, indent=2))
    lock = release_lock()
    hashes = [h.model_copy(update={"sha256": sha256_bytes(rf_path.read_bytes())}) if h.path == RELEASE_FILES else h
              for h in lock.published_hashes]
    lock = lock.model_copy(update={"published_hashes": hashes})
    result = verify_release(release_copy, lock)
    assert result.failed_files == [RELEASE_RECEIPTS]
    states = {f.path: f.state for f in result.files}
    assert states[RESULTS] == "verified"
    bad = next(c for c in result.failed)
    assert "whose bytes match the trusted hash" in bad.message


def test_a_broken_manifest_leaves_the_rest_unverified_not_failed(release_copy: Path) -> None:
    (release_copy / RELEASE_FILES).write_text("{ not json")
    result = verify_release(release_copy)
    assert result.failed_files == [RELEASE_FILES]
    states = {f.path: f.state for f in result.files}
    assert states[RESULTS] == "verified"  # pinned by the lock itself
    assert states["rlvr/requirements-cu128.txt"] == "unverified"  # only release_files covers it


def test_an_altered_score_fails_the_aggregates_against_results(release_copy: Path) -> None:
    path = release_copy / RESULTS
    data = json.loads(path.read_text())
    data["scores"]["benchmark_scores"][0]["score"] += 0.5
    path.write_text(json.dumps(data))
    result = verify_release(release_copy)
    assert result.failed_files == [RESULTS]
    failed = {c.id for c in result.failed}
    assert {"aggregates.benchmark_summaries", "aggregates.overall_scores", "aggregates.benchmark_deltas"} <= failed
    bs = next(c for c in result.failed if c.id == "aggregates.benchmark_summaries")
    assert "qwen2.5-vl-3b-base/chartqapro mean" in bs.message


def test_a_duplicate_score_row_fails_completeness(release_copy: Path) -> None:
    path = release_copy / RESULTS
    data = json.loads(path.read_text())
    rows = data["scores"]["benchmark_scores"]
    rows[1] = dict(rows[0])
    path.write_text(json.dumps(data))
    result = verify_release(release_copy)
    assert result.failed_files == [RESULTS]
    complete = next(c for c in result.failed if c.id == "results.complete")
    assert "missing score" in complete.message and "duplicate" in " ".join(complete.details)


def test_a_directory_in_place_of_a_file_fails_it(release_copy: Path) -> None:
    rel = "rlvr/evaluation/trace_validation/reproducibility_patches.v1.json"
    (release_copy / rel).unlink()
    (release_copy / rel).mkdir()
    result = verify_release(release_copy)
    assert result.failed_files == [rel]
    assert any("not a regular file" in c.message for c in result.failed)


def test_a_declared_path_outside_the_release_is_the_declarer_failure(release_copy: Path) -> None:
    path = release_copy / RELEASE_RECEIPTS
    data = json.loads(path.read_text())
    data["canonical_files"][0]["path"] = "../../../etc/passwd"
    path.write_text(json.dumps(data))
    result = verify_release(release_copy)
    assert result.failed_files == [RELEASE_RECEIPTS]
    assert any("outside the release" in c.message for c in result.failed)
    assert not any("passwd" in f.path for f in result.files)


@pytest.mark.parametrize("rel", [RESULTS, "rlvr/configs/trace-qwen2.5-vl-3b.yaml"])
@pytest.mark.parametrize("depth", [900, 200_000])
def test_deeply_nested_json_or_yaml_fails_that_file_only(release_copy: Path, rel: str, depth: int) -> None:
    """Nesting past the interpreter's recursion limit (and just under it) fails the file, never verify."""
    path = release_copy / rel
    path.write_text('{"a": ' * depth + "1" + "}" * depth if rel.endswith(".json") else "[" * depth + "]" * depth)
    result = verify_release(release_copy)
    assert result.failed_files == [rel]
    doc = next(c for c in result.checks if c.id == f"document:{rel}")
    assert doc.status == "failed"


@pytest.mark.parametrize("tamper", ["none", "config_models"])
def test_the_lock_read_without_pydantic_checks_as_the_validated_lock(release_copy: Path, tamper: str) -> None:
    """`verify` reads the packaged lock as plain JSON (no pydantic on its timed path): every check,
    failure messages with the pinned repo@revision included, is the same as with the validated lock."""
    if tamper == "config_models":
        cfg = release_copy / "rlvr/configs/trace-qwen2.5-vl-3b.yaml"
        text = cfg.read_text()
        for m in ("66285546d2b821cf421d4f5eb2576359d3770cd3",):
            assert m in text
            text = text.replace(m, "f" * 40)
        cfg.write_text(text)
    light = verify_release(release_copy)
    full = verify_release(release_copy, release_lock())
    assert light.model_dump() == full.model_dump()
    if tamper == "config_models":
        assert any("base_model differs" in c.message and "@66285546" in (c.expected or "")
                   for c in light.failed), [c.message for c in light.failed]


def test_a_score_of_1e308_fails_its_checks_and_verify_goes_on(release_copy: Path) -> None:
    """Sums and squares of 1e308 leave the floats (OverflowError): the aggregates that cannot be recomputed
    fail, naming results.json; every other check still runs."""
    path = release_copy / RESULTS
    data = json.loads(path.read_text())
    data["scores"]["benchmark_scores"][0]["score"] = 1e308
    path.write_text(json.dumps(data))
    result = verify_release(release_copy)
    assert result.failed_files == [RESULTS]
    overflowed = [c for c in result.failed if c.group == "aggregates" and "out of range" in c.message]
    assert overflowed, [c.message for c in result.failed]
    assert next(c for c in result.checks if c.id == "results.complete").status == "failed"
    assert {c.group for c in result.checks} >= {"lock", "document", "declared", "results", "aggregates", "validation"}


def test_an_integer_of_100001_digits_in_a_config_fails_that_file(release_copy: Path) -> None:
    rel = "rlvr/configs/trace-qwen2.5-vl-3b.yaml"
    (release_copy / rel).write_text("1" + "0" * 100_000)
    result = verify_release(release_copy)
    assert result.failed_files == [rel]
    doc = next(c for c in result.checks if c.id == f"document:{rel}")
    assert doc.status == "failed" and doc.message.startswith("not valid YAML: Exceeds the limit (4300 digits)")
