"""NVML for the tests: pynvml's own binding, or the fake machine TRACE_TUI_FAKE_NVML names (tests/fake_nvml.py).

This machine has no NVIDIA GPU. The appliance loads NVML with a plain `import pynvml`; under pytest tests/ is
first on sys.path, and the app processes the tests start get tests/ on PYTHONPATH, so this module stands in for
the binding itself (the narrowest edge) and the production code path is the one a GPU node runs. Without
TRACE_TUI_FAKE_NVML every name is the real binding's; with it, the named machine's (one per name, kept for the
process, as a driver is).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import types
from pathlib import Path

_HERE = Path(__file__).resolve().parent


def _load_real() -> types.ModuleType:
    elsewhere = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("pynvml", elsewhere)
    if spec is None or spec.loader is None:
        raise ImportError("the real pynvml (nvidia-ml-py) is not installed")
    module = importlib.util.module_from_spec(spec)
    # The binding sets its error classes on sys.modules["pynvml"] as it loads: that must be itself, not this module.
    stand_in = sys.modules.get("pynvml")
    sys.modules["pynvml"] = module
    try:
        spec.loader.exec_module(module)
    finally:
        if stand_in is not None:
            sys.modules["pynvml"] = stand_in
    return module


real = _load_real()
_machines: dict[str, types.ModuleType] = {}


def _current() -> types.ModuleType:
    name = os.environ.get("TRACE_TUI_FAKE_NVML")
    if not name:
        return real
    if name not in _machines:
        from fake_nvml import machine

        _machines[name] = machine(name)
    return _machines[name]


def __getattr__(name: str) -> object:
    return getattr(_current(), name)
