"""A tiny random Qwen2.5-VL checkpoint built locally, and a processor loader for any Qwen2.5-VL checkpoint.

The demo recipe and the tests need a real Qwen2.5-VL (same classes, same
processor, same chat-template behaviour as the release models) that runs on a
CPU in seconds and needs no download. ``build_tiny_qwen25vl`` writes one:

* a 512-token byte-level BPE trained here with ``tokenizers`` on a small
  built-in corpus, carrying the 14 Qwen special tokens, wrapped as
  ``Qwen2Tokenizer``;
* our own Jinja chat template that behaves like the Qwen2-VL one
  (``<|im_start|>role\\n...<|im_end|>\\n`` turns, a default system turn,
  images as ``<|vision_start|><|image_pad|><|vision_end|>``);
* the PIL Qwen2-VL image processor (no torchvision needed);
* a small ``Qwen2_5_VLConfig`` (text hidden 64, 2 layers; vision depth 2)
  with random weights drawn from ``seed``, saved as safetensors.

``load_processor`` builds the processor from its parts (tokenizer, PIL image
processor, chat template) for the tiny model and for real checkpoints alike:
``AutoProcessor`` would also build the video processor, which needs
torchvision, and the stages never process video.

Heavy imports (torch, transformers, tokenizers) happen inside the functions so
that importing this module stays cheap.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_tui.errors import UsageError
from trace_tui.stages.entry import parse_options

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

# The Qwen2/Qwen2.5-VL special tokens, in the order the real vocabulary lists them.
QWEN_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)

TINY_VOCAB_SIZE = 512

# Our own template with the behaviour of the Qwen2-VL chat template: a default
# system turn when the conversation has none, content given as a string or as a
# list of typed parts, one vision block per image/video part, and the assistant
# header when a generation prompt is asked for.
QWEN_VL_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}"
    "{{ message['content'] }}"
    "{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' or 'image' in part or 'image_url' in part %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'video' or 'video' in part %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in part %}"
    "{{ part['text'] }}"
    "{% endif %}"
    "{% endfor %}"
    "{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}"
    "<|im_start|>assistant\n"
    "{% endif %}"
)

# Pixel bounds of the tiny model's own preprocessor config: small, so that a
# CPU run stays fast. Callers that follow the release (262,144-4,194,304)
# pass their bounds to load_processor.
TINY_MIN_PIXELS = 56 * 56
TINY_MAX_PIXELS = 28 * 28 * 64


def _corpus() -> list[str]:
    """A deterministic training text: what TRACE prompts and JSON answers are made of."""
    import random

    words = ["the", "chart", "shows", "one", "image", "with", "labels", "values", "categories", "series", "answer", "format", "set", "requested", "integer", "number", "string", "option", "letter", "example", "json", "final", "what", "how", "many", "which", "total", "gap", "between", "count", "points", "lines", "circles", "area", "value", "of", "in", "on", "and", "is", "are", "a", "an", "to", "for", "from", "with", "by", "each", "figure", "graph", "node", "edge", "path", "shortest", "longest", "color", "red", "blue", "green", "yellow", "black", "white", "left", "right", "top", "bottom", "above", "below", "first", "second", "third", "last", "board", "game", "piece", "move", "player", "score", "grid", "cell", "row", "column", "table", "page", "map", "city", "road", "distance", "angle", "triangle", "square", "rectangle", "polygon", "radius", "length", "width", "height", "volume", "mass", "speed", "force", "time", "energy", "cube", "sphere", "object", "view", "camera", "front", "back", "side", "label", "legend", "axis", "bar", "line", "pie", "scatter", "dice", "card", "icon", "shape", "symbol", "word", "puzzle", "maze", "you", "are", "helpful", "assistant", "system", "user", "think", "step", "reason", "because", "therefore", "so", "than", "more", "less", "equal"]
    rng = random.Random(20260601)
    lines = ["You are a helpful assistant.", "system user assistant"]
    for i in range(3000):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(4, 14)))
        lines.append(f"{text.capitalize()}? Answer format: set \"answer\" to the {rng.choice(words)}.")
        lines.append(f'Example JSON:\n{{"answer":{rng.randint(-20, 600)}}} {{"answer": "{chr(65 + i % 8)}"}}')
        lines.append(f'{{"answer": {rng.uniform(-100, 100):.2f}}} <answer>{rng.choice(words)}</answer>')
    return lines


def _train_bpe() -> tuple[dict[str, int], list[tuple[str, str]]]:
    from tokenizers import Regex, Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE
    from tokenizers.trainers import BpeTrainer
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    tok = Tokenizer(BPE())
    # The same pre-tokenization as Qwen2Tokenizer, so the merges fit the wrapper.
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = BpeTrainer(
        vocab_size=TINY_VOCAB_SIZE,
        special_tokens=list(QWEN_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    model = json.loads(tok.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return dict(model["vocab"]), merges


def build_tiny_tokenizer():
    """The tiny Qwen2Tokenizer (byte-level BPE, 512 tokens, 14 specials, Qwen-VL chat template)."""
    import inspect

    from transformers.models.qwen2.tokenization_qwen2 import Qwen2Tokenizer

    vocab, merges = _train_bpe()
    common = {"unk_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
              "additional_special_tokens": list(QWEN_SPECIAL_TOKENS[1:]), "model_max_length": 32768}
    if "vocab_file" not in inspect.signature(Qwen2Tokenizer.__init__).parameters:
        tokenizer = Qwen2Tokenizer(vocab=vocab, merges=merges, **common)  # transformers 5.x
    else:
        tokenizer = _qwen2_fast_tokenizer_v4(vocab, merges, common)
    tokenizer.add_special_tokens({"additional_special_tokens": list(QWEN_SPECIAL_TOKENS[1:])})
    tokenizer.chat_template = QWEN_VL_CHAT_TEMPLATE
    missing = [t for t in QWEN_SPECIAL_TOKENS if tokenizer.convert_tokens_to_ids(t) is None]
    if missing:  # pragma: no cover - guards a tokenizers/transformers behaviour change
        raise RuntimeError(f"tiny tokenizer lacks special tokens {missing}")
    return tokenizer


def _qwen2_fast_tokenizer_v4(vocab: dict[str, int], merges: list[tuple[str, str]], common: dict[str, Any]):
    """transformers 4.x: the same byte-level BPE, built as Qwen2TokenizerFast builds its own."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        normalizers,
        pre_tokenizers,
    )
    from tokenizers.models import BPE
    from transformers import Qwen2TokenizerFast
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX
    tok = Tokenizer(BPE(vocab=vocab, merges=merges, dropout=None, unk_token=None, continuing_subword_prefix="",
                        end_of_word_suffix="", fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in QWEN_SPECIAL_TOKENS])
    return Qwen2TokenizerFast(tokenizer_object=tok, **common)


def tiny_config(tokenizer: PreTrainedTokenizerBase):
    from transformers import Qwen2_5_VLConfig

    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in QWEN_SPECIAL_TOKENS}
    head_dim = 64 // 4
    text = {
        "vocab_size": len(tokenizer),
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-6,
        "use_sliding_window": False,
        "max_window_layers": 2,
        # Multimodal RoPE: temporal/height/width sections sum to head_dim / 2.
        "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0,
                            "mrope_section": [2, 3, 3]},
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
    }
    assert sum(text["rope_parameters"]["mrope_section"]) == head_dim // 2
    vision = {
        "depth": 2,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 2,
        "out_hidden_size": 64,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "window_size": 112,
        "fullatt_block_indexes": [1],
        "tokens_per_second": 2,
    }
    return Qwen2_5_VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )


def _image_processor_cls():
    """The PIL/numpy Qwen2-VL image processor (no torchvision): its name differs between transformers 5 and 4."""
    try:
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
            Qwen2VLImageProcessorPil,
        )
    except ImportError:  # transformers 4.x (the GPU train image pins the release's 4.57)
        from transformers.models.qwen2_vl.image_processing_qwen2_vl import (
            Qwen2VLImageProcessor,
        )

        return Qwen2VLImageProcessor
    return Qwen2VLImageProcessorPil


_PROCESSOR_CLS: Any = None


def _processor_cls():
    """Qwen2_5_VLProcessor without a video processor (which would need torchvision).

    The subclass keeps the stock class name on purpose: a processor saves its
    class name into processor_config.json / tokenizer_config.json, and other
    tools (AutoProcessor with torchvision, vLLM) must find the stock class
    there when they load a checkpoint this code saved.
    """
    global _PROCESSOR_CLS
    if _PROCESSOR_CLS is None:
        from transformers import Qwen2_5_VLProcessor

        def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
            Qwen2_5_VLProcessor.__init__(self, image_processor=image_processor, tokenizer=tokenizer,
                                         video_processor=None, chat_template=chat_template, **kwargs)

        # The __init__ signature decides the sub-processors: no video_processor.
        _PROCESSOR_CLS = type("Qwen2_5_VLProcessor", (Qwen2_5_VLProcessor,),
                              {"__init__": __init__, "__module__": __name__,
                               # transformers 4.x lists sub-processors here instead of reading the signature.
                               "attributes": ["image_processor", "tokenizer"],
                               "__doc__": "Qwen2.5-VL processor for images and text only."})
    return _PROCESSOR_CLS


def _load_image_processor(path: Path, kwargs: dict[str, int]):
    cls = _image_processor_cls()
    if (path / "preprocessor_config.json").is_file():
        return cls.from_pretrained(str(path), local_files_only=True, **kwargs)
    # A checkpoint saved by a processor holds its image processor inside processor_config.json.
    merged = path / "processor_config.json"
    if merged.is_file():
        cfg = json.loads(merged.read_text(encoding="utf-8")).get("image_processor")
        if isinstance(cfg, dict):
            cfg = {k: v for k, v in cfg.items() if k not in ("image_processor_type", "processor_class")}
            if "size" in cfg and ("min_pixels" in kwargs or "max_pixels" in kwargs):
                cfg["size"] = dict(cfg["size"])
            cfg.update(kwargs)
            return cls(**cfg)

    raise UsageError(f"{path}: no preprocessor_config.json or processor_config.json",
                     hint="point at a Qwen2.5-VL checkpoint directory")


def _read_chat_template(path: Path, tokenizer: PreTrainedTokenizerBase) -> str | None:
    jinja = path / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    legacy = path / "chat_template.json"
    if legacy.is_file():
        return json.loads(legacy.read_text(encoding="utf-8"))["chat_template"]
    return getattr(tokenizer, "chat_template", None)


def load_processor(path: str | Path, *, min_pixels: int | None = None, max_pixels: int | None = None):
    """The processor of a Qwen2.5-VL checkpoint directory (tiny or real), image-only.

    Tokenizer via AutoTokenizer, the PIL Qwen2-VL image processor from the
    checkpoint's preprocessor_config.json (pixel bounds overridable), and the
    checkpoint's own chat template (chat_template.jinja, chat_template.json or
    the tokenizer's).
    """
    from transformers import AutoTokenizer

    path = Path(path)
    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    kwargs: dict[str, int] = {}
    if min_pixels is not None:
        kwargs["min_pixels"] = int(min_pixels)
    if max_pixels is not None:
        kwargs["max_pixels"] = int(max_pixels)
    image_processor = _load_image_processor(path, kwargs)
    template = _read_chat_template(path, tokenizer)
    if template is not None and not getattr(tokenizer, "chat_template", None):
        tokenizer.chat_template = template
    return _processor_cls()(image_processor=image_processor, tokenizer=tokenizer, chat_template=template)


load_tiny_processor = load_processor


def build_tiny_processor(tokenizer: Any | None = None):
    tokenizer = tokenizer if tokenizer is not None else build_tiny_tokenizer()
    image_processor = _image_processor_cls()(min_pixels=TINY_MIN_PIXELS, max_pixels=TINY_MAX_PIXELS)
    return _processor_cls()(image_processor=image_processor, tokenizer=tokenizer,
                            chat_template=QWEN_VL_CHAT_TEMPLATE)


def build_tiny_qwen25vl(out_dir: Path, seed: int = 0) -> Path:
    """Write a tiny random Qwen2.5-VL checkpoint to ``out_dir`` and return it.

    Files: config.json, generation_config.json, model.safetensors,
    tokenizer.json, tokenizer_config.json, chat_template.jinja,
    preprocessor_config.json (PIL Qwen2-VL image processor). Loadable with
    ``Qwen2_5_VLForConditionalGeneration.from_pretrained`` and
    ``load_processor``. The same seed gives the same weights.
    """
    import torch
    from transformers import GenerationConfig, Qwen2_5_VLForConditionalGeneration

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tiny_tokenizer()
    config = tiny_config(tokenizer)
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config).to(torch.float32)
    model.generation_config = GenerationConfig(
        bos_token_id=config.text_config.bos_token_id,
        eos_token_id=[config.text_config.eos_token_id, config.text_config.bos_token_id],
        pad_token_id=config.text_config.pad_token_id,
        do_sample=False,
    )
    model.save_pretrained(str(out_dir), safe_serialization=True)
    write_portable_rope(out_dir / "config.json")
    tokenizer.save_pretrained(str(out_dir))
    image_processor = _image_processor_cls()(min_pixels=TINY_MIN_PIXELS, max_pixels=TINY_MAX_PIXELS)
    image_processor.save_pretrained(str(out_dir))
    (out_dir / "chat_template.jinja").write_text(QWEN_VL_CHAT_TEMPLATE, encoding="utf-8")
    # Name the stock processor class (as the real checkpoints do) so that other
    # tools (AutoProcessor with torchvision, vLLM) can load the checkpoint too.
    for name in ("tokenizer_config.json", "preprocessor_config.json"):
        cfg_path = out_dir / name
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        cfg["processor_class"] = "Qwen2_5_VLProcessor"
        if isinstance(cfg.get("extra_special_tokens"), list):
            # transformers 4.x reads a list only under this (older) name, as the
            # real Qwen2.5-VL checkpoints write it; 5.x reads it too.
            cfg["additional_special_tokens"] = cfg.pop("extra_special_tokens")
        if name == "preprocessor_config.json":
            cfg["min_pixels"], cfg["max_pixels"] = TINY_MIN_PIXELS, TINY_MAX_PIXELS
        cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    for f in out_dir.iterdir():
        f.chmod(0o644)  # a stage container may read the store under another uid
    return out_dir


def write_portable_rope(cfg_path: Path) -> None:
    """Rewrite config.json, after every save, in the layout of the real Qwen2.5-VL checkpoints: the text
    model's fields at the top level, ``vision_config`` nested, M-RoPE as ``rope_scaling`` + ``rope_theta``.

    transformers 5's save_pretrained nests the text fields under ``text_config`` and writes the RoPE
    settings only as ``rope_parameters``; transformers 4.57.6 (the images' vLLM stacks) then reads no
    M-RoPE sections and, under vLLM, no ``architectures`` at all. Both major versions read this layout,
    as they read the release's checkpoints."""
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    text = cfg.pop("text_config", None)
    if text is not None:
        for key, value in text.items():
            if key not in ("model_type", "rope_parameters", "rope_scaling", "rope_theta"):
                cfg.setdefault(key, value)
        rope = text.get("rope_parameters") or {}
        if "mrope_section" in rope:
            cfg["rope_scaling"] = {"type": "mrope", "rope_type": "default", "mrope_section": list(rope["mrope_section"])}
            cfg["rope_theta"] = rope["rope_theta"]
        elif text.get("rope_scaling"):
            cfg["rope_scaling"], cfg["rope_theta"] = text["rope_scaling"], text.get("rope_theta")
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def supervised_warm_up(model_dir: Path, out_dir: Path, examples: list[dict[str, Any]], *, steps: int = 40,
                       lr: float = 3e-3, seed: int = 0, min_pixels: int | None = None,
                       max_pixels: int | None = None) -> Path:
    """A few supervised steps on (prompt, target) pairs, saved as a new checkpoint in ``out_dir``.

    A random tiny model never ends a reply in a JSON answer object, so a strict
    reward is always 0 and a GRPO step on it learns nothing. Teaching it first,
    with plain next-token cross-entropy on the assistant turn only, to answer
    ``{"answer": ...}`` makes its sampled replies vary in reward honestly.

    ``examples``: dicts with ``messages`` (chat messages without the assistant
    turn; an image part as ``{"type": "image"}``), ``images`` (PIL images) and
    ``target`` (the assistant text).
    """
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration

    processor = load_processor(model_dir, min_pixels=min_pixels, max_pixels=max_pixels)
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(str(model_dir), dtype=torch.float32)
    model.train()
    batches = []
    for ex in examples:
        prompt = processor.apply_chat_template(ex["messages"], add_generation_prompt=True, tokenize=False)
        full = prompt + ex["target"] + "<|im_end|>\n"
        images = ex.get("images") or None
        enc = processor(text=[full], images=images, return_tensors="pt")
        n_prompt = processor(text=[prompt], images=images, return_tensors="pt")["input_ids"].shape[1]
        labels = enc["input_ids"].clone()
        labels[:, :n_prompt] = -100  # learn the reply only
        enc["labels"] = labels
        batches.append(enc)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    for step in range(steps):
        batch = batches[step % len(batches)]
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir), safe_serialization=True)
    write_portable_rope(out_dir / "config.json")
    for f in Path(model_dir).iterdir():
        if f.is_file() and f.suffix in (".json", ".jinja") and f.name not in ("config.json", "generation_config.json"):
            (out_dir / f.name).write_bytes(f.read_bytes())
    for f in out_dir.iterdir():
        f.chmod(0o644)
    return out_dir


@dataclass(frozen=True)
class TinyModelOptions:
    """The developer command line: OUT_DIR [--seed N]."""

    out_dir: Path = field(metadata={"positional": True})
    seed: int = 0


def _main(argv: list[str] | None = None) -> int:
    args = parse_options(TinyModelOptions, argv,
                         description="Write a tiny random Qwen2.5-VL checkpoint (no downloads).")
    print(build_tiny_qwen25vl(args.out_dir, seed=args.seed))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(_main())
