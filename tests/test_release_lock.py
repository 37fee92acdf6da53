"""The release lock ships with the package and agrees with the real release files."""

from __future__ import annotations

import hashlib
import json

from trace_tui.release import release_lock


def test_lock_loads_and_pins_the_paper_matrix():
    lock = release_lock()
    assert len(lock.models) == 8
    assert lock.trace_eval.seeds == [42, 43, 44]
    assert len(lock.trace_eval.benchmarks) == 24
    assert sum(b.rows for b in lock.trace_eval.benchmarks) == lock.trace_eval.rows_per_model_seed == 32805
    assert len(lock.trace_eval.categories) == 6
    assert lock.dataset.revision == "4e5b54361360296a855542b40cfd8b7f81b355fe"
    assert len(lock.dataset.files) == 17


def test_lock_hashes_match_the_release_copy(trace_release_dir):
    lock = release_lock()
    for pin in lock.published_hashes:
        path = trace_release_dir / pin.path
        if path.exists():
            assert hashlib.sha256(path.read_bytes()).hexdigest() == pin.sha256, pin.path


def test_lock_models_match_results_json(trace_release_dir):
    results = json.loads((trace_release_dir / release_lock().trace_eval.results_path).read_text())
    published = {m["model_id"]: (m["repository_id"], m["repository_revision"]) for m in results["models"]}
    assert {m.id: (m.repo_id, m.revision) for m in release_lock().models} == published
