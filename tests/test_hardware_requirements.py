"""The memory classes per model size cover the arithmetic they are derived from (hardware module docstring)."""

from __future__ import annotations

from trace_tui.hardware import MEMORY_SLACK, REQUIREMENTS, describe_requirement, estimate_generate_gib, kv_bytes_per_token
from trace_tui.release import release_lock


def test_kv_cache_per_token():
    assert kv_bytes_per_token("3B") == 36 * 1024
    assert kv_bytes_per_token("7B") == 56 * 1024
    assert kv_bytes_per_token("judge") == 256 * 1024


def test_generation_classes_cover_the_estimate_for_both_suites():
    lock = release_lock()
    for settings in (lock.trace_eval.generation.model_dump(), lock.trace_validation.generation.model_dump()):
        for scale in ("3B", "7B"):
            need = estimate_generate_gib(scale, settings)
            tp1 = next(o for o in REQUIREMENTS["generate"][scale].options if o.tp == 1)
            assert need <= tp1.min_gib * MEMORY_SLACK, (scale, need)
    # the binding case (trace_eval: 12.8 MP images + 4096 tokens) is what sets the 7B class above 24 GiB
    assert estimate_generate_gib("7B", lock.trace_eval.generation.model_dump()) > 24


def test_requirement_lines():
    assert describe_requirement("generate", "7B") == \
        "needs 1 GPU with >= 40 GiB per 7B model endpoint (or 2 GPUs with >= 24 GiB)"
    assert describe_requirement("generate", "3B") == "needs 1 GPU with >= 24 GiB per 3B model endpoint"
    assert all(o.tp in (1, 2, 4, 8) for p in REQUIREMENTS.values() for r in p.values() for o in r.options)
