"""An installed trace-tui (a wheel, no checkout) finds its recipes and the release lock as package data."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_carries_recipes_and_lock_and_an_install_uses_them(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp_path / "dist"), str(ROOT)], check=True, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("trace_tui-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "trace_tui/recipe_files/release.lock.json" in names
    assert {f"trace_tui/recipe_files/{n}.yaml" for n in ("full", "demo", "validation")} <= names
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    code = ("import trace_tui, trace_tui.recipe.catalog as r, trace_tui.release as rel;"
            "print(trace_tui.__file__); print(len(rel.release_lock().models)); print(','.join(r.known_recipes()))")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(target)})
    assert done.returncode == 0, done.stderr
    where, models, recipes = done.stdout.split()
    assert where.startswith(str(target)) and models == "8"
    assert {"full", "demo", "validation", "smoke-3b"} <= set(recipes.split(","))
