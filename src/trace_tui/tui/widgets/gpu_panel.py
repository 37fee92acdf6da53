"""GPU utilisation and memory per GPU (NVML samples, refreshed every second or two)."""

from __future__ import annotations

from collections.abc import Sequence

from textual.widgets import Static

from trace_tui.tui.backends import GpuSample
from trace_tui.tui.widgets.progress_grid import bar


def gpu_text(samples: Sequence[GpuSample] | None) -> str:
    if samples is None:
        return "GPUs: sampling…"
    if not samples:
        return "GPUs: none (no NVIDIA driver or no GPU) — steps run on CPU"
    parts = []
    for s in samples:
        util = "       n/a" if s.utilization is None else f"{bar(s.utilization, 100, 5)} {s.utilization:3d}%"
        # Fixed width per GPU so that the panel wraps into aligned columns on narrow terminals.
        parts.append(f"GPU{s.index:<2}{util} {s.memory_used_gib:3.0f}/{s.memory_total_gib:.0f}G".ljust(28))
    return "".join(parts).rstrip()


class GpuPanel(Static):
    def show(self, samples: Sequence[GpuSample] | None) -> None:
        self.update(gpu_text(samples))
