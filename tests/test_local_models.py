"""`--local-model ID=PATH[@REVISION]`: a user's own checkpoint in `full`, through the real store."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from trace_tui.errors import UsageError
from trace_tui.local_models import import_local_models, parse_local_model
from trace_tui.recipe.catalog import resolve_recipe


@pytest.fixture()
def ckpt(tmp_path):
    path = tmp_path / "my-ckpt"
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"model_type": "qwen2_5_vl", "hidden_size": 2048}))
    (path / "model.safetensors").write_bytes(b"\0" * 64)
    return path


def test_own_checkpoint_joins_full_with_its_revision(tmp_path, ckpt):
    (own,) = import_local_models([f"my-ckpt={ckpt}@v1"], tmp_path / "store")
    assert (own.id, own.scale, own.revision, own.store_entry) == ("my-ckpt", "3B", "v1", "local:model/my-ckpt")
    resolved = resolve_recipe("full", seeds=[42], local_models=[own])
    assert [m.id for m in resolved.models] == ["my-ckpt"]  # only yours unless --models names release models
    assert len(resolved.slices) == 24 and "local:model/my-ckpt" in resolved.all_store_entries()
    with_base = resolve_recipe("full", seeds=[42], models=["qwen2.5-vl-3b-base"], local_models=[own])
    assert [m.id for m in with_base.models] == ["qwen2.5-vl-3b-base", "my-ckpt"]
    assert with_base.run_tag != resolve_recipe("full", seeds=[42], models=["qwen2.5-vl-3b-base"]).run_tag


def test_without_a_revision_the_content_hash_is_the_revision(tmp_path, ckpt):
    (own,) = import_local_models([f"mine={ckpt}"], tmp_path / "store")
    assert own.revision.startswith("sha256set:")


@pytest.mark.parametrize("spec,message", [
    ("no-equals", "expected ID=PATH[@REVISION]"),
    ("Bad_ID=/tmp", "expected ID=PATH[@REVISION]"),
    ("ok=/nonexistent/dir", "has no config.json"),
])
def test_bad_specs_are_one_line_usage_errors(spec, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        parse_local_model(spec)


def test_only_the_external_evaluation_takes_own_checkpoints(tmp_path, ckpt):
    (own,) = import_local_models([f"mine={ckpt}"], tmp_path / "store")
    with pytest.raises(UsageError, match="is for the external evaluation"):
        resolve_recipe("validation", local_models=[own])
    taken = own.model_copy(update={"id": "qwen2.5-vl-3b-base"})
    with pytest.raises(UsageError, match="taken by a release model"):
        resolve_recipe("full", local_models=[taken])


def test_cli_refuses_a_bad_local_model_with_exit_2(tmp_path):
    done = subprocess.run([sys.executable, "-m", "trace_tui", "--home", str(tmp_path), "--recipe", "full", "--yes",
                           "--local-model", "x=/nope"], capture_output=True, text=True)
    assert done.returncode == 2 and "has no config.json" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "campaigns").exists()
