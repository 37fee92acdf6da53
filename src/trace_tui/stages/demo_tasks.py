"""Synthetic TRACE-style tasks for the demo: drawn with Pillow, in the release's parquet columns.

Four task groups, one per answer type the TRACE task catalog uses (integer,
number, option_letter, string), two task programs each, a few instances per
program: small enough for a CPU, shaped exactly like the real rows (``images``
as embedded PNG bytes, ``prompt_answer`` starting with ``<image>``, ``answer_gt``
as ``{"type", "value"}`` JSON, ``instance_id``, ``domain``, ``task``, ...), so the
demo runs the same loading, generation, extraction and scoring code as a real
campaign. Everything is drawn from a seeded ``random.Random``: the same seed
gives the same rows and the same PNG bytes (for a given Pillow).
"""

from __future__ import annotations

import io
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from trace_tui.common.atomic import atomic_write_bytes
from trace_tui.common.digest import sha256_bytes

if TYPE_CHECKING:
    from PIL import Image, ImageDraw, ImageFont

# (group key, display name, answer type): the demo's "benchmarks". recipes/demo.yaml lists the same.
GROUPS: tuple[tuple[str, str, str], ...] = (
    ("counting", "Counting", "integer"),
    ("arithmetic", "Arithmetic", "number"),
    ("choice", "Multiple choice", "option_letter"),
    ("naming", "Naming", "string"),
)
INSTANCES_PER_TASK = 4
TASKS_PER_GROUP = 2
ROWS_PER_GROUP = INSTANCES_PER_TASK * TASKS_PER_GROUP

# The release's system prompt (rlvr/examples/prompts/trace_vero_json_system_prompt_answer.txt). The demo
# must run with no release files in the store, so it carries the text; demo_prepare checks it against
# the sha256 the release lock pins before writing it, so it can never drift from the release.
RELEASE_SYSTEM_PROMPT = (
    "You are a helpful, conversational assistant tasked with answering a question about an image.\n\n"
    "Reason carefully from the image and the question to determine the answer.\n\n"
    "End your response with a JSON object in this format:\n"
    '{"answer": ...}\n'
)

COLORS = {"Red": (220, 40, 40), "Blue": (40, 80, 220), "Green": (30, 160, 60), "Orange": (240, 150, 20),
          "Purple": (140, 60, 180), "Teal": (20, 150, 150)}
WORDS = ("Harbor", "Comet", "Maple", "Vision", "Delta", "Summit", "Orbit", "Willow")
SIZE = (320, 224)

ANSWER_FORMAT = {
    "integer": ('set "answer" to the requested nonnegative integer.', "3"),
    "number": ('set "answer" to the requested number (a decimal, not a string).', "2.5"),
    "option_letter": ('set "answer" to the letter of the correct option, as a string.', '"B"'),
    "string": ('set "answer" to the exact visible text as a string.', '"Harbor"'),
}


@dataclass(frozen=True)
class Instance:
    group: str
    domain: str
    task: str
    question: str
    answer_type: str
    answer: Any
    image: Any  # PIL image


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow without FreeType sizes: the bitmap font
        return ImageFont.load_default()


def _canvas() -> tuple[Any, Any]:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", SIZE, (250, 250, 246))
    return img, ImageDraw.Draw(img)


def _spots(rng: random.Random, n: int, r: int) -> list[tuple[int, int]]:
    """n centres on a grid (no overlaps), shuffled."""
    cells = [(x, y) for x in range(r + 8, SIZE[0] - r - 8, 2 * r + 12) for y in range(r + 8, SIZE[1] - r - 8, 2 * r + 12)]
    rng.shuffle(cells)
    return cells[:n]


def _shape(draw: ImageDraw.ImageDraw, kind: str, c: tuple[int, int], r: int, color: tuple[int, int, int]) -> None:
    box = (c[0] - r, c[1] - r, c[0] + r, c[1] + r)
    if kind == "circle":
        draw.ellipse(box, fill=color, outline=(20, 20, 20))
    elif kind == "square":
        draw.rectangle(box, fill=color, outline=(20, 20, 20))
    else:
        draw.polygon([(c[0], c[1] - r), (c[0] + r, c[1] + r), (c[0] - r, c[1] + r)], fill=color, outline=(20, 20, 20))


def count_shapes(rng: random.Random, target: str) -> Instance:
    img, draw = _canvas()
    n_target = rng.randint(1, 7)
    n_other = rng.randint(1, 5)
    others = [k for k in ("circle", "square", "triangle") if k != target]
    spots = _spots(rng, n_target + n_other, 16)
    kinds = [target] * n_target + [rng.choice(others) for _ in range(n_other)]
    for kind, c in zip(kinds, spots, strict=True):
        _shape(draw, kind, c, 16, rng.choice(list(COLORS.values())))
    q = f"The image shows circles, squares and triangles in several colors. How many {target}s are there?"
    return Instance("counting", "shapes", f"task_demo__shapes__{target}_count", q, "integer", n_target, img)


def decimal_op(rng: random.Random, op: str) -> Instance:
    img, draw = _canvas()
    a = rng.randint(10, 99) / 4
    b = rng.randint(1, 39) / 4
    font = _font(36)
    draw.rectangle((20, 60, 150, 160), outline=(40, 40, 40), width=3)
    draw.rectangle((170, 60, 300, 160), outline=(40, 40, 40), width=3)
    draw.text((30, 90), f"{a:g}", fill=(20, 20, 20), font=font)
    draw.text((180, 90), f"{b:g}", fill=(20, 20, 20), font=font)
    if op == "sum":
        q = "Two framed numbers are shown. What is the sum of the left number and the right number?"
        value = a + b
    else:
        q = "Two framed numbers are shown. What is the left number minus the right number?"
        value = a - b
    value = int(value) if float(value).is_integer() else value
    return Instance("arithmetic", "numbers", f"task_demo__numbers__decimal_{op}", q, "number", value, img)


def odd_option(rng: random.Random, mode: str) -> Instance:
    img, draw = _canvas()
    font = _font(22)
    letters = "ABCD"
    odd = rng.randrange(4)
    names = list(COLORS)
    base, other = rng.sample(names, 2)
    radii = rng.sample(range(14, 34, 4), 4)
    for i, letter in enumerate(letters):
        cx = 40 + i * 78
        draw.text((cx - 8, 12), letter, fill=(20, 20, 20), font=font)
        if mode == "color":
            _shape(draw, "square", (cx, 130), 24, COLORS[other if i == odd else base])
        else:
            _shape(draw, "circle", (cx, 130), radii[i], COLORS[base])
    if mode == "color":
        q = "Four squares are labelled A to D. Which option has a different color from the other three?"
        answer = letters[odd]
        task = "task_demo__shapes__odd_color_option"
    else:
        q = "Four circles are labelled A to D. Which option shows the largest circle?"
        answer = letters[radii.index(max(radii))]
        task = "task_demo__shapes__largest_circle_option"
    return Instance("choice", "shapes", task, q, "option_letter", answer, img)


def naming(rng: random.Random, mode: str) -> Instance:
    img, draw = _canvas()
    if mode == "word":
        words = rng.sample(WORDS, 3)
        red = rng.randrange(3)
        font = _font(24)
        for i, w in enumerate(words):
            y = 20 + i * 66
            color = COLORS["Red"] if i == red else COLORS["Blue"]
            draw.rectangle((40, y, 280, y + 50), outline=color, width=4)
            draw.text((60, y + 12), w, fill=(20, 20, 20), font=font)
        q = "Three words are shown in boxes; one box has a red border, the others blue. Which word is in the red box?"
        return Instance("naming", "words", "task_demo__words__red_box_word_label", q, "string", words[red], img)
    name = rng.choice(list(COLORS))
    _shape(draw, "square", (160, 112), 70, COLORS[name])
    q = "The image shows one large square. What is the name of its fill color (one of " + ", ".join(COLORS) + ")?"
    return Instance("naming", "words", "task_demo__words__square_color_label", q, "string", name, img)


GENERATORS: dict[str, tuple[Callable[[random.Random], Instance], ...]] = {
    "counting": (lambda r: count_shapes(r, "circle"), lambda r: count_shapes(r, "square")),
    "arithmetic": (lambda r: decimal_op(r, "sum"), lambda r: decimal_op(r, "difference")),
    "choice": (lambda r: odd_option(r, "color"), lambda r: odd_option(r, "size")),
    "naming": (lambda r: naming(r, "word"), lambda r: naming(r, "color")),
}


def prompt_for(inst: Instance) -> str:
    fmt, example = ANSWER_FORMAT[inst.answer_type]
    return f'<image>{inst.question}\nAnswer format: {fmt}\nExample JSON:\n{{"answer":{example}}}'


def _png(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=False)
    return buf.getvalue()


def build_rows(group: str, seed: int = 0) -> list[dict[str, Any]]:
    """The rows of one task group, in the release's columns."""
    rows = []
    for t, gen in enumerate(GENERATORS[group]):
        for k in range(INSTANCES_PER_TASK):
            rng = random.Random(f"trace-tui-demo/{seed}/{group}/{t}/{k}")
            inst = gen(rng)
            png = _png(inst.image)
            ident = "sha256:" + sha256_bytes(f"{inst.task}/{seed}/{k}".encode() + png)
            prompt = prompt_for(inst)
            size = {"width": inst.image.width, "height": inst.image.height}
            answer_gt = json.dumps({"type": inst.answer_type, "value": inst.answer})
            scene = inst.task.split("__")[1]
            rows.append({
                "uid": ident, "instance_id": ident, "domain": inst.domain, "task": inst.task,
                "scene_id": scene, "query_id": "single", "scene_variant": "demo",
                "prompt": prompt, "prompt_active": prompt, "prompt_answer": prompt, "prompt_answer_only": prompt,
                "prompt_answer_and_annotation": prompt, "prompt_mode": "answer_only",
                "images": [{"bytes": png, "path": None}],
                "image_sizes_original": [size], "image_sizes_exported": [size],
                "answer_gt": answer_gt, "annotation_gt": json.dumps({"type": "none", "value": None}),
                "reward_contract": json.dumps({"answer": {"id": "answer_exact_match_v0", "type": inst.answer_type},
                                               "reward_contract_version": "v0"}),
                "trace_ref": json.dumps({"generator": "trace-tui demo", "seed": seed}),
                "difficulty_bin": 0, "bucket_id_str": f"{inst.task}::q0",
            })
    return rows


def write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    """Write rows as a parquet file with the release's ``datasets`` features, atomically."""
    import datasets

    features = datasets.Features({
        **{k: datasets.Value("string") for k in (
            "uid", "instance_id", "domain", "task", "scene_id", "query_id", "scene_variant", "prompt",
            "prompt_active", "prompt_answer", "prompt_answer_only", "prompt_answer_and_annotation", "prompt_mode")},
        "images": datasets.List(datasets.Image()),
        "image_sizes_original": datasets.List({"width": datasets.Value("int64"), "height": datasets.Value("int64")}),
        "image_sizes_exported": datasets.List({"width": datasets.Value("int64"), "height": datasets.Value("int64")}),
        **{k: datasets.Value("string") for k in ("answer_gt", "annotation_gt", "reward_contract", "trace_ref")},
        "difficulty_bin": datasets.Value("int64"),
        "bucket_id_str": datasets.Value("string"),
    })
    ds = datasets.Dataset.from_list(rows, features=features)
    buf = io.BytesIO()  # the demo's files are small: build in memory, then one atomic write
    ds.to_parquet(buf)
    atomic_write_bytes(path, buf.getvalue())


def write_tasks(out_dir: Path, seed: int = 0) -> dict[str, Path]:
    """One parquet per task group under ``out_dir`` (``<group>.parquet``)."""
    out = {}
    for key, _display, _type in GROUPS:
        path = Path(out_dir) / f"{key}.parquet"
        write_parquet(build_rows(key, seed), path)
        out[key] = path
    return out
