"""The bottom layer (trace_tui.common): one definition of each hash, JSON form, atomic write and
image-lock reader, and the drift each of them replaced."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from trace_tui.common import atomic, digest
from trace_tui.common.images_lock import read_image_lock

# Made by the code before the definitions were unified: the store's record of a folder holding
# config.json = b'{"a": 1}' and données/x.bin = b"x" (local:model/unicode-paths). It is also what
# the release's evaluator computes (prepare_trace_eval_models.py: json.dumps(..., ensure_ascii=True)).
STORED_BEFORE = "sha256set:f0346bd2030fd1425f791632234da1a718968e3ffae75c6ef518ea19254ddb76"


def _unicode_folder(root: Path) -> Path:
    (root / "données").mkdir(parents=True)
    (root / "données" / "x.bin").write_bytes(b"x")
    (root / "config.json").write_bytes(b'{"a": 1}')
    return root


def test_sha256set_is_one_value_for_non_ascii_paths_everywhere(tmp_path):
    """The store, the generate worker and the training worker used to give `données/x.bin` two identities."""
    from trace_tui.stages import jobs, train_smoke
    from trace_tui.store.store import Store

    folder = _unicode_folder(tmp_path / "model")
    rec = Store(tmp_path / "store").import_local("local:model/unicode-paths", folder)
    files, from_jobs = jobs.dir_sha256set(folder)
    assert rec.sha256set == from_jobs == train_smoke.sha256set(files) == STORED_BEFORE
    evaluator_form = json.dumps(files, ensure_ascii=True, sort_keys=True, separators=(",", ":"))
    assert STORED_BEFORE == "sha256set:" + hashlib.sha256(evaluator_form.encode()).hexdigest()


def test_a_store_entry_recorded_before_still_checks(tmp_path):
    """An entry whose manifest carries the pre-change value passes a deep check unchanged."""
    from trace_tui.store.store import Store

    store = Store(tmp_path / "store")
    store.import_local("local:model/unicode-paths", _unicode_folder(tmp_path / "model"))
    manifest = json.loads((store.entry_dir("local:model/unicode-paths") / "manifest.json").read_text("utf-8"))
    assert manifest["sha256set"] == STORED_BEFORE
    assert all(c.ok for c in store.verify(deep=True))


def test_file_hash_has_one_return_convention(tmp_path):
    from trace_tui.stages import protocol

    f = tmp_path / "f.bin"
    f.write_bytes(b"abc" * 1000)
    want = hashlib.sha256(f.read_bytes()).hexdigest()
    assert digest.sha256_file(f) == want == digest.sha256_bytes(f.read_bytes())
    assert digest.sha256_file_size(f) == (want, 3000)
    seen: list[int] = []
    assert digest.sha256_file(f, block=1024, on_bytes=seen.append) == want and sum(seen) == 3000
    assert protocol.artifact.__globals__["sha256_file_size"] is digest.sha256_file_size


def test_canonical_json_is_sorted_compact_utf8_and_keeps_old_hashes():
    obj = {"b": [1, {"é": "ü"}], "a": None}
    assert digest.canonical_json(obj) == '{"a":null,"b":[1,{"é":"ü"}]}'
    # the engine's job input hashes and receipts' content_sha256 were this form: campaigns keep their hashes
    old = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    assert digest.sha256_json(obj) == hashlib.sha256(old.encode("utf-8")).hexdigest()
    assert digest.sha256_text("é") == hashlib.sha256("é".encode()).hexdigest()


def test_no_second_copy_of_the_helpers_remains():
    """Every module that hashes or writes atomically uses the common one (no local twin)."""
    from trace_tui.engine import planner, receipts
    from trace_tui.recipe import catalog as recipes
    from trace_tui.stages import generate, jobs, train_smoke
    from trace_tui.store import hashing

    assert planner.sha256_json is digest.sha256_json and planner.canonical_json is digest.canonical_json
    assert receipts.sha256_json is digest.sha256_json and receipts.atomic_write_json is atomic.atomic_write_json
    assert train_smoke.sha256set is jobs.sha256set is digest.sha256set
    assert hashing.sha256_file is digest.sha256_file
    assert generate.sha256_json is digest.sha256_json
    assert recipes.sha256_json is digest.sha256_json and not hasattr(recipes, "canonical_sha256")


def _record_dir_fsyncs(monkeypatch) -> list[str]:
    seen: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        seen.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real(fd)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    return seen


def test_atomic_write_fsyncs_file_and_directory_and_leaves_nothing_on_failure(tmp_path, monkeypatch):
    seen = _record_dir_fsyncs(monkeypatch)
    atomic.atomic_write_json(tmp_path / "a" / "x.json", {"k": "é"})
    assert json.loads((tmp_path / "a" / "x.json").read_text("utf-8")) == {"k": "é"}
    assert seen == ["file", "dir"]

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(atomic.os, "replace", boom)
    with pytest.raises(OSError):
        atomic.atomic_write_text(tmp_path / "a" / "x.json", "new")
    assert json.loads((tmp_path / "a" / "x.json").read_text("utf-8")) == {"k": "é"}
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["x.json"]


def test_atomic_write_batch_fsyncs_each_file_and_the_folder_once_with_atomic_write_jsons_bytes(tmp_path, monkeypatch):
    """A generate batch's rows: each file as atomic_write_json writes it, the folder fsync'd once after."""
    seen = _record_dir_fsyncs(monkeypatch)
    rows = [(tmp_path / "rows" / f"{i:06d}.json", {"index": i, "response": "é" * i}) for i in range(3)]
    atomic.atomic_write_batch([(path, atomic.json_bytes(obj)) for path, obj in rows])
    assert seen == ["file", "file", "file", "dir"]
    atomic.atomic_write_json(tmp_path / "one.json", rows[2][1])
    assert (tmp_path / "rows/000002.json").read_bytes() == (tmp_path / "one.json").read_bytes()
    assert sorted(p.name for p in (tmp_path / "rows").iterdir()) == [p.name for p, _ in rows]


def test_verify_report_is_written_with_the_directory_fsync(tmp_path, monkeypatch):
    """`verify --report-dir` had its own atomic write without the directory fsync."""
    from types import SimpleNamespace

    from trace_tui.commands import verify as verify_cmd

    seen = _record_dir_fsyncs(monkeypatch)
    monkeypatch.setattr(verify_cmd, "as_json", lambda result, strict: {"ok": True})
    monkeypatch.setattr(verify_cmd, "render_markdown", lambda result, strict, tables_md: "# ok\n")
    result = SimpleNamespace(checks=[SimpleNamespace(status="failed", group="results")])
    verify_cmd.write_report(result, tmp_path / "out", strict=False, root=tmp_path)
    assert json.loads((tmp_path / "out" / "report.json").read_text()) == {"ok": True}
    assert seen.count("dir") == 2


def test_one_image_lock_reader_for_the_probe_and_the_runtime(tmp_path, monkeypatch):
    """The hardware probe skipped string entries that the Docker runtime ran: both now read the same."""
    from trace_tui import hardware
    from trace_tui.runtime import docker as docker_runtime

    lock = tmp_path / "images.lock.json"
    lock.write_text(json.dumps({"flavor": "cpu", "images": {"infer": "reg/infer:1", "train": {"tag": "reg/train:1",
                                                                                                "id": "sha256:ab"},
                                                            "bad": 3}}))
    monkeypatch.setenv("TRACE_TUI_IMAGES_LOCK", str(lock))
    read = hardware.read_image_lock(lock)
    assert read.status == "ok" and read.flavor == "cpu"
    assert sorted(read.entries) == ["infer", "train"] and read.entries["infer"] == {"tag": "reg/infer:1"}
    assert docker_runtime._images_lock() == {"infer": "reg/infer:1", "train": "reg/train:1"}
    assert hardware.read_image_lock is read_image_lock
    lock.write_text("{not json")
    assert read_image_lock(lock).status == "unreadable" and docker_runtime._images_lock() == {}
    assert read_image_lock(tmp_path / "none.json").status == "missing"


def test_one_error_root(tmp_path, capsys):
    """JobError is a TraceTuiError (bad input, exit 2), so every worker handler gives one line for it."""
    from trace_tui.errors import ExitCode, TraceTuiError, UsageError
    from trace_tui.stages.jobs import JobError, run_worker

    err = JobError("job field 'x' is missing", "add it")
    assert isinstance(err, UsageError) and isinstance(err, TraceTuiError)
    assert err.exit_code == ExitCode.USAGE and err.line() == "job field 'x' is missing (add it)" and err.fix == "add it"
    job = tmp_path / "job.json"
    job.write_text("{}")

    def fn(_job):
        raise err

    assert run_worker(fn, str(job)) == 2
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last == {"type": "status", "state": "failed", "message": err.line(), "exit_code": 2}


def test_the_seams_name_their_types():
    """`step: Any  # recipes.Step` and `extraction: Any  # Extraction` now say what they hold."""
    import typing

    from trace_tui.engine.planner import PlannedJob, needs_gpus, step_groups
    from trace_tui.recipe.schema import Step
    from trace_tui.scoring.extraction import Extraction
    from trace_tui.scoring.judge import ValidationRowScore

    ns = {"Step": Step, "Extraction": Extraction}
    assert typing.get_type_hints(PlannedJob, localns=ns)["step"] is Step
    assert typing.get_type_hints(needs_gpus, localns=ns)["step"] is Step
    assert typing.get_type_hints(step_groups, localns=ns)["step"] is Step
    assert typing.get_type_hints(ValidationRowScore, localns=ns)["extraction"] is Extraction


# The generate worker's row key for these inputs, as the previous code computed it (its
# UTF-8 sha256set of the model and ASCII-escaped JSON elsewhere), over config.json + données/x.bin.
PREVIOUS_ROW_KEY = "443feee63dfee4b8cc8ec4567ec164fd4cd71528100d78cb7a79249e7664f1c4"


def test_rows_generated_before_under_a_non_ascii_model_path_are_kept_on_resume(tmp_path):
    """Unifying sha256set changed the model's identity for non-ASCII paths; rows already made stay done."""
    from trace_tui.stages import generate
    from trace_tui.stages.jobs import dir_sha256set

    model_files, model_set = dir_sha256set(_unicode_folder(tmp_path / "model"))
    settings = {"temperature": 0.0, "max_tokens": 16, "seed": 42, "note": "café"}
    content_inputs = {"model_sha256set": model_set, "dataset_sha256": "1" * 64,
                      "system_prompt_sha256": digest.sha256_text("Réponds."),
                      "settings_sha256": digest.sha256_json(settings), "prompt_key": "prompt_answer",
                      "image_key": "images", "backend": "transformers"}
    now = digest.sha256_json(content_inputs)
    previous = generate.previous_inputs_sha256(content_inputs, model_files, settings)
    assert previous == PREVIOUS_ROW_KEY != now
    rows = tmp_path / "rows"
    rows.mkdir()
    for i, key in enumerate((PREVIOUS_ROW_KEY, now, "0" * 64)):
        # whole rows: a resume keeps only a row whose response is its response_sha256's
        (rows / f"{i:06d}.json").write_text(json.dumps({"index": i, "inputs_sha256": key, "seed": 42, "response": "r",
                                                        "response_sha256": digest.sha256_text("r")}))
    assert generate.existing_rows(rows, now, also=(previous,)) == {0, 1}
    assert generate.existing_rows(rows, now) == {1}
