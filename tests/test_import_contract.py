"""The layering is a rule: `lint-imports` checks pyproject.toml's contracts, and a wrong-way import fails it."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


def _lint_imports(src: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("lint-imports")
    if not exe.exists():
        pytest.fail(f"{exe} is missing: install the dev extra (`make install`), which pins import-linter")
    env = dict(os.environ, PYTHONPATH=str(src))
    return subprocess.run([str(exe), "--config", str(ROOT / "pyproject.toml"), "--no-cache"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_layers_contract_holds():
    run = _lint_imports(SRC)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "0 broken" in run.stdout


@pytest.mark.parametrize(("module", "planted"), [
    ("common/digest.py", "from trace_tui.stages import protocol"),  # the bottom layer reaching up
    ("verify/release.py", "from trace_tui.commands import report"),  # the verifier importing the command layer
    ("scoring/match.py", "from trace_tui.engine import runner"),  # scoring importing what runs things
    ("hardware/verdicts.py", "from trace_tui.stages import train_profile"),  # hardware importing a stage worker
    ("verify/campaign.py", "from trace_tui.engine import campaign"),  # the verifier importing the engine
])
def test_a_wrong_way_import_breaks_the_contract(tmp_path, module, planted):
    copy = tmp_path / "src" / "trace_tui"
    shutil.copytree(SRC / "trace_tui", copy, ignore=shutil.ignore_patterns("__pycache__"))
    path = copy / module
    path.write_text(path.read_text(encoding="utf-8") + f"\n{planted}  # planted\n", encoding="utf-8")
    run = _lint_imports(tmp_path / "src")
    assert run.returncode != 0 and "BROKEN" in run.stdout, run.stdout[-2000:]


def test_the_bottom_layer_imports_only_the_standard_library():
    """trace_tui.common runs inside every stage image before anything heavy is importable."""
    allowed_ours = {"trace_tui.common", "trace_tui.errors"}
    for path in sorted((SRC / "trace_tui" / "common").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            for name in names:
                top = name.split(".")[0]
                if top == "trace_tui":
                    assert any(name == m or name.startswith(m + ".") for m in allowed_ours), f"{path.name}: {name}"
                else:
                    assert top in sys.stdlib_module_names or top == "__future__", f"{path.name}: {name}"
