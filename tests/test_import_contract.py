"""The import graph tells the truth, and the contract that checks it cannot be fooled.

Each wrong-way import a review of the tree found is planted into a copy of the package, and the real
`lint-imports` run on that copy with the project's own contract must report every one of them; the tree as it
is must pass. Loading a module by name (``importlib``) is invisible to import-linter, so the same plant is
checked by this file's scan for dynamic imports of the project's own modules, which the tree must not have.
The share of the project's own imports made inside functions is measured over the whole package and held
under 5 %: lazy imports are kept for heavy third-party packages (and the own modules that load them).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "trace_tui"

# (file under trace_tui/, the import planted at its end, the module it imports): each must break the contract
PLANTS = [
    ("stages/score.py", "from trace_tui import images", "trace_tui.images"),  # a container worker and the image builder
    ("stages/generate.py", "from trace_tui.engine import runner", "trace_tui.engine.runner"),
    ("stages/extract.py", "from trace_tui.runtime import docker", "trace_tui.runtime.docker"),
    ("stages/score.py", "from trace_tui.bundle import export", "trace_tui.bundle.export"),
    ("verify/campaign.py", "from trace_tui.stages import score", "trace_tui.stages.score"),  # verify loading a stage
    ("commands/status.py", "from trace_tui import cli", "trace_tui.cli"),  # cli and commands: one way
    ("tui/screens/hardware.py", "from trace_tui.tui.screens import run", "trace_tui.tui.screens.run"),
    ("engine/runner.py", "from trace_tui.service import run", "trace_tui.service.run"),  # the engine above the service
    ("common/atomic.py", "from trace_tui import paths", "trace_tui.paths"),  # the bottom layer imports nothing of ours
    ("common/digest.py", "from trace_tui.stages import protocol", "trace_tui.stages.protocol"),
    ("verify/release.py", "from trace_tui.commands import report", "trace_tui.commands.report"),
    ("scoring/match.py", "from trace_tui.engine import runner", "trace_tui.engine.runner"),  # scoring and what runs
    ("hardware/verdicts.py", "from trace_tui.stages import train_profile", "trace_tui.stages.train_profile"),
    ("verify/campaign.py", "from trace_tui.engine import campaign", "trace_tui.engine.campaign"),
    ("engine/runner.py", "import argparse", "argparse"),  # a parsed command line below the faces
    ("tui/widgets/table.py", "from trace_tui.tui.screens import hardware", "trace_tui.tui.screens.hardware"),
]


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(exe), "--no-cache", "--no-logo", "--config", str(root / "pyproject.toml")],
                          cwd=root, capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root / "src")})


def _copy_tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(PACKAGE, root / "src" / "trace_tui", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def own_dynamic_imports(package: Path) -> list[str]:
    """Calls that load a module of the project by name (importlib.import_module, __import__), as file:line."""
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if name not in ("import_module", "__import__") or not node.args:
                continue
            arg = node.args[0]
            text = ast.unparse(arg)
            if "trace_tui" in text or (isinstance(arg, ast.Constant) and str(arg.value).startswith(".")) \
                    or not isinstance(arg, ast.Constant):  # a computed name may be ours: said, not guessed
                found.append(f"{path.relative_to(package)}:{node.lineno}: {ast.unparse(node)}")
    return found


def import_counts(package: Path) -> tuple[int, int]:
    """(all import statements, those of the project's own modules made inside a function body)."""
    total = inside_own = 0
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nested = {id(sub) for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                  for sub in ast.walk(node) if isinstance(sub, (ast.Import, ast.ImportFrom))}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            total += 1
            if id(node) in nested:
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                own = (isinstance(node, ast.ImportFrom) and node.level > 0) or \
                    any(n == "trace_tui" or n.startswith("trace_tui.") for n in names)
                inside_own += own
    return total, inside_own


def test_the_tree_keeps_the_contract() -> None:
    done = lint_imports(REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "broken" in done.stdout and " 0 broken" in done.stdout


def test_every_planted_wrong_way_import_breaks_the_contract(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    for rel, line, _ in PLANTS:
        path = root / "src" / "trace_tui" / rel
        path.write_text(path.read_text(encoding="utf-8") + f"\n{line}  # planted\n", encoding="utf-8")
    done = lint_imports(root)
    assert done.returncode != 0, done.stdout[-3000:]
    report = done.stdout
    for rel, _, imported in PLANTS:
        importer = "trace_tui." + rel[:-3].replace("/", ".")
        assert f"{importer} -> {imported}" in report, f"not reported: {importer} -> {imported}\n{report[-4000:]}"


def test_no_module_of_the_project_is_loaded_by_name(tmp_path: Path) -> None:
    assert own_dynamic_imports(PACKAGE) == []
    root = _copy_tree(tmp_path)
    planted = root / "src" / "trace_tui" / "verify" / "campaign.py"
    planted.write_text(planted.read_text(encoding="utf-8")
                       + '\nimport importlib\nSCORE = importlib.import_module("trace_tui.stages.score")\n',
                       encoding="utf-8")
    assert [f for f in own_dynamic_imports(root / "src" / "trace_tui") if f.startswith("verify/campaign.py:")]


@pytest.mark.parametrize("limit", [0.05])
def test_own_modules_are_imported_at_the_top(limit: float) -> None:
    total, inside_own = import_counts(PACKAGE)
    share = inside_own / total
    print(f"imports {total}, of the project's own modules inside functions {inside_own} ({share:.1%})")
    assert share < limit, f"{inside_own} of {total} imports ({share:.1%}) are own modules imported in a function"


def test_the_bottom_layer_imports_only_the_standard_library() -> None:
    """trace_tui.common runs inside every stage image before anything heavy is importable."""
    allowed_ours = {"trace_tui.common", "trace_tui.errors"}
    for path in sorted((PACKAGE / "common").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            for name in names:
                top = name.split(".")[0]
                if top == "trace_tui":
                    assert any(name == m or name.startswith(m + ".") for m in allowed_ours), f"{path.name}: {name}"
                else:
                    assert top in sys.stdlib_module_names or top == "__future__", f"{path.name}: {name}"

