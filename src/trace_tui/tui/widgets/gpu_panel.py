"""GPU utilisation and memory per GPU (NVML samples, refreshed every second or two)."""

from __future__ import annotations

from collections.abc import Sequence

from textual.widgets import Static

from trace_tui.tui.backends import GpuSample
from trace_tui.tui.widgets.progress_grid import bar

GPU_CELL = 28  # characters per GPU (with a bar), so that the panel wraps into aligned columns
GPU_CELL_COMPACT = 18  # without the bar, for narrow terminals


def gpu_text(samples: Sequence[GpuSample] | None, width: int = 10_000) -> str:
    if samples is None:
        return "GPUs: sampling…"
    if not samples:
        return "GPUs: none (no NVIDIA driver or no GPU) — steps run on CPU"
    compact = width // GPU_CELL < min(len(samples), 4)
    cell = GPU_CELL_COMPACT if compact else GPU_CELL
    parts = []
    for s in samples:
        if s.utilization is None:
            util = "n/a" if compact else "       n/a"
        else:
            util = f"{s.utilization:3d}%" if compact else f"{bar(s.utilization, 100, 5)} {s.utilization:3d}%"
        parts.append(f"GPU{s.index:<2}{util} {s.memory_used_gib:3.0f}/{s.memory_total_gib:.0f}G".ljust(cell))
    per_line = max(1, width // cell)
    return "\n".join("".join(parts[i:i + per_line]).rstrip() for i in range(0, len(parts), per_line))


class GpuPanel(Static):
    samples: Sequence[GpuSample] | None = None

    def show(self, samples: Sequence[GpuSample] | None) -> None:
        self.samples = samples
        self.update(gpu_text(samples, self.content_size.width or 80))

    def on_resize(self) -> None:
        self.update(gpu_text(self.samples, self.content_size.width or 80))
