"""Loading TRACE rows for generation: the parquet through ``datasets``, images into the run's pixel bounds,
and the chat messages the release sent (its system prompt, then the user turn with the image first).

The same code loads the real validation parquet, the 262-row sample export and
the demo's synthetic tasks: they share the release's columns (``images``,
``prompt_answer`` starting with ``<image>``, ``answer_gt``, ``instance_id``,
``domain``, ``task``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_tui.errors import UsageError

if TYPE_CHECKING:
    from datasets.features.features import FeatureType
    from PIL import Image

IMAGE_PLACEHOLDER = "<image>"
REQUIRED_COLUMNS = ("instance_id", "domain", "task", "answer_gt")


@dataclass(frozen=True)
class TraceRow:
    index: int  # position in the parquet: the row's identity inside a slice
    instance_id: str
    domain: str
    task: str
    prompt: str  # the prompt column's text, "<image>" placeholders included
    images: list[Any]  # PIL images, as stored: opened, decoded on first use (not yet resized)
    answer_type: str
    answer_gt: Any  # the typed reference value (answer_gt.value)


def _fail(path: Path, message: str, fix: str) -> None:
    raise UsageError(f"{path}: {message}", hint=fix)


class TraceDataset:
    """A TRACE parquet file opened once through ``datasets``; rows decoded on demand (images are large)."""

    def __init__(self, path: str | Path, *, prompt_key: str = "prompt_answer", image_key: str = "images") -> None:
        import tempfile

        import datasets

        self.path = Path(path)
        if not self.path.is_file():
            _fail(self.path, "dataset file not found", "run the prepare step (or eval-setup) first")
        # A private cache: the home folder may be read-only inside a stage container,
        # and a shared cache would outlive the worker for nothing.
        self._cache = tempfile.TemporaryDirectory(prefix="trace-tui-ds-")
        self.ds = datasets.Dataset.from_parquet(str(self.path), cache_dir=self._cache.name)
        missing = [c for c in (*REQUIRED_COLUMNS, prompt_key, image_key) if c not in self.ds.column_names]
        if missing:
            _fail(self.path, f"missing column(s) {', '.join(missing)}",
                  "use a TRACE parquet export (the release's columns)")
        self.prompt_key, self.image_key = prompt_key, image_key
        # Rows come out with their images' bytes, opened lazily: the pixels are decoded where they are first
        # used (fitted to the run's pixel bounds), not by datasets' decoding of the whole row here.
        self._undecoded = self.ds.cast_column(image_key, _without_decoding(self.ds.features[image_key]))

    def __len__(self) -> int:
        return len(self.ds)

    def rows(self, indices: list[int] | None = None) -> list[TraceRow]:
        positions = list(range(len(self.ds))) if indices is None else list(indices)
        sub = self._undecoded.select(positions)
        out = []
        for pos, rec in zip(positions, sub, strict=True):
            answer_type, answer_gt = self._answer(pos, rec["answer_gt"])
            images = rec[self.image_key] or []
            out.append(TraceRow(index=pos, instance_id=rec["instance_id"], domain=rec["domain"], task=rec["task"],
                                prompt=rec[self.prompt_key], images=[_as_pil(im) for im in images],
                                answer_type=answer_type, answer_gt=answer_gt))
        return out

    def facts(self, indices: list[int]) -> dict[int, dict[str, Any]]:
        """What a generated row copies from the dataset (instance_id, domain, task, answer_type, answer_gt),
        per index, without decoding a prompt or an image: what a kept row must still say on resume."""
        sub = self.ds.select_columns(list(REQUIRED_COLUMNS)).select(list(indices))
        out = {}
        for pos, rec in zip(indices, sub, strict=True):
            answer_type, answer_gt = self._answer(pos, rec["answer_gt"])
            out[pos] = {"instance_id": rec["instance_id"], "domain": rec["domain"], "task": rec["task"],
                        "answer_type": answer_type, "answer_gt": answer_gt}
        return out

    def _answer(self, pos: int, raw: object) -> tuple[str, Any]:
        """(answer type, typed reference value) of a row's answer_gt column."""
        gt = raw
        try:
            gt = json.loads(gt) if isinstance(gt, str) else gt
        except json.JSONDecodeError:
            gt = None
        if not isinstance(gt, dict) or "type" not in gt or "value" not in gt:
            _fail(self.path, f"row {pos}: answer_gt is not {{type, value}}: {str(raw)[:80]}",
                  "answer_gt must be a JSON object with 'type' and 'value'")
        return str(gt["type"]).strip().lower(), gt["value"]


def load_rows(path: str | Path, *, prompt_key: str = "prompt_answer", image_key: str = "images",
              indices: list[int] | None = None) -> list[TraceRow]:
    """Rows of a TRACE parquet file (all, or those at ``indices``), images decoded as PIL."""
    return TraceDataset(path, prompt_key=prompt_key, image_key=image_key).rows(indices)


def count_rows(path: str | Path) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(str(path)).metadata.num_rows


def _without_decoding(feature: FeatureType) -> FeatureType:
    """The image column's feature (an Image, or a list of them) with decoding off."""
    import copy

    feature = copy.deepcopy(feature)
    image = getattr(feature, "feature", feature)
    if hasattr(image, "decode"):
        image.decode = False
    return feature


def _as_pil(image: Image.Image | dict[str, Any]) -> Image.Image:
    from PIL import Image

    if isinstance(image, Image.Image):
        return image
    if isinstance(image, dict) and image.get("bytes") is not None:  # undecoded, or no Image feature
        import io

        return Image.open(io.BytesIO(image["bytes"]))
    if isinstance(image, dict) and image.get("path"):  # an Image feature stored by path
        return Image.open(image["path"])
    raise ValueError(f"unsupported image value {type(image).__name__}")


def fit_pixels(image: Image.Image, min_pixels: int, max_pixels: int) -> Image.Image:
    """Scale an image (keeping its aspect ratio) so that width*height lies within [min_pixels, max_pixels], RGB.

    The release's rollout/serving path resized this way before the model's own
    processor snapped the size to its patch grid.
    """
    if image.width * image.height > max_pixels:
        f = math.sqrt(max_pixels / (image.width * image.height))
        image = image.resize((max(1, int(image.width * f)), max(1, int(image.height * f))))
    if image.width * image.height < min_pixels:
        f = math.sqrt(min_pixels / (image.width * image.height))
        image = image.resize((math.ceil(image.width * f), math.ceil(image.height * f)))
    if image.mode != "RGB":
        image = image.convert("RGB")
    return image


def build_messages(system_prompt: str, prompt: str, n_images: int) -> list[dict[str, Any]]:
    """System turn, then the user turn with image parts where the prompt has ``<image>`` placeholders."""
    parts: list[dict[str, Any]] = []
    pieces = prompt.split(IMAGE_PLACEHOLDER)
    if len(pieces) - 1 != n_images:
        raise ValueError(f"prompt has {len(pieces) - 1} {IMAGE_PLACEHOLDER} placeholder(s) but the row has {n_images} image(s)")
    for i, piece in enumerate(pieces):
        if i > 0:
            parts.append({"type": "image"})
        if piece:
            parts.append({"type": "text", "text": piece})
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": parts}]
