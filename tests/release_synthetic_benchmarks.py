"""Synthetic benchmark files in the formats the release's VLMEvalKit datasets read, for the benchmarks whose
files VLMEvalKit does not pin by md5 (so the pinned loaders accept any content of the right shape).

Nothing here is release data: questions, answers and images are made up, with each suite row count, since
the release's manifest preparation and generation client refuse any other count.

- TreeBench (vlmeval.dataset.image_mcq.TreeBench, an ImageMCQDataset): `TreeBench.tsv` as the dataset's URL
  serves it, images inline as base64 in `image`, options in `A`..`D`, `category` as `Task/Subtask` (read by
  utils/treebench.get_dimension_rating), `target_instances` a Python list of boxes (its IoU).
- EvoChart and CountQA (the release's VLMEvalKit extensions evochart.py and trace_eval_local_vqa.py): the
  `<alias>.tsv` their load_data writes from the Hub rows and reads back when present, images by `image_path`.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pandas as pd
from PIL import Image

ROWS = {"treebench": 405, "evochart": 1250, "countqa": 1528}
ALIASES = {"treebench": "TreeBench", "evochart": "EvoChart", "countqa": "CountQA"}
TREEBENCH_CATEGORIES = ("Perception/Attributes", "Perception/OCR", "Reasoning/Ordering", "Reasoning/Comparison")
# The release's minimum image size is 3136 pixels (56x56); a few distinct images are enough.
SIDE = 56
SHADES = 8


def _image(i: int) -> Image.Image:
    return Image.new("RGB", (SIDE, SIDE), ((37 * i) % 256, (91 * i) % 256, (53 * i) % 256))


def _jpeg_base64(i: int) -> str:
    buf = io.BytesIO()
    _image(i).save(buf, format="JPEG")
    return base64.b64encode(buf.getvalue()).decode()


def _write_tsv(frame: pd.DataFrame, path: Path) -> None:
    frame.to_csv(path, sep="\t", index=False)


def _images(lmu: Path, alias: str, seen_as: str) -> list[str]:
    """SHADES PNG files under LMUData/images/ALIAS; their paths as the container sees LMUData (SEEN_AS)."""
    folder = lmu / "images" / alias
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(SHADES):
        _image(i).save(folder / f"{i}.png")
        paths.append(f"{seen_as}/images/{alias}/{i}.png")
    return paths


def write_treebench(lmu: Path) -> Path:
    n = ROWS["treebench"]
    images = [_jpeg_base64(i) for i in range(SHADES)]
    frame = pd.DataFrame({
        "index": range(n), "image": [images[i % SHADES] for i in range(n)],
        "question": [f"Which color is object {i}?" for i in range(n)],
        "A": "red", "B": "green", "C": "blue", "D": "black",
        "answer": ["ABCD"[i % 4] for i in range(n)],
        "category": [TREEBENCH_CATEGORIES[i % len(TREEBENCH_CATEGORIES)] for i in range(n)],
        "target_instances": ["[[4, 4, 40, 40]]"] * n})
    path = lmu / "TreeBench.tsv"
    _write_tsv(frame, path)
    return path


def write_evochart(lmu: Path, seen_as: str) -> Path:
    n = ROWS["evochart"]
    images = _images(lmu, "EvoChart", seen_as)
    frame = pd.DataFrame({
        "index": [str(i) for i in range(n)], "question": [f"What is the value of bar {i}?" for i in range(n)],
        "answer": [str(i % 9) for i in range(n)], "image_path": [images[i % SHADES] for i in range(n)],
        "attribute": [("value", "count")[i % 2] for i in range(n)], "is_clear": [i % 3 != 0 for i in range(n)],
        "chart_type": [("bar", "line")[i % 2] for i in range(n)]})
    path = lmu / "EvoChart.tsv"
    _write_tsv(frame, path)
    return path


def write_countqa(lmu: Path, seen_as: str) -> Path:
    """Two questions per source image, indexed `<source>_<question>` as the loader numbers them."""
    n = ROWS["countqa"]
    images = _images(lmu, "CountQA", seen_as)
    frame = pd.DataFrame({
        "index": [f"{i // 2}_{i % 2}" for i in range(n)], "question": [f"How many cups ({i})?" for i in range(n)],
        "answer": [str(i % 7) for i in range(n)], "image_path": [images[(i // 2) % SHADES] for i in range(n)],
        "objects": "cups", "categories": "kitchen", "is_focused": [i % 2 == 0 for i in range(n)],
        "full_config": "{}"})
    path = lmu / "CountQA.tsv"
    _write_tsv(frame, path)
    return path


def write_all(lmu: Path, seen_as: str) -> dict[str, Path]:
    """The three files under LMU (the campaign's LMUData, mounted in the container at SEEN_AS)."""
    lmu.mkdir(parents=True, exist_ok=True)
    return {"treebench": write_treebench(lmu), "evochart": write_evochart(lmu, seen_as),
            "countqa": write_countqa(lmu, seen_as)}
