"""The tiny local Qwen2.5-VL: real transformers classes, built here with no downloads, loadable and usable."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pytest

from trace_tui.stages.tiny_model import (
    QWEN_SPECIAL_TOKENS,
    TINY_VOCAB_SIZE,
    build_tiny_qwen25vl,
    load_processor,
)


def _digests(path: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.iterdir())}


def test_checkpoint_files_and_config(tiny_qwen25vl_dir: Path) -> None:
    names = {p.name for p in tiny_qwen25vl_dir.iterdir()}
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
            "preprocessor_config.json", "chat_template.jinja"} <= names
    cfg = json.loads((tiny_qwen25vl_dir / "config.json").read_text())
    assert cfg["model_type"] == "qwen2_5_vl"
    # The real checkpoints' layout: text fields at the top level, vision_config nested. transformers 4.57.6
    # (vLLM's in the images) finds no architecture in transformers 5's nested text_config layout.
    assert "text_config" not in cfg and cfg["architectures"] == ["Qwen2_5_VLForConditionalGeneration"]
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]) == (64, 2, TINY_VOCAB_SIZE)
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    assert sum(cfg["rope_scaling"]["mrope_section"]) == head_dim // 2
    assert cfg["vision_config"]["depth"] == 2
    pre = json.loads((tiny_qwen25vl_dir / "preprocessor_config.json").read_text())
    assert pre["processor_class"] == "Qwen2_5_VLProcessor"


def test_tokenizer_specials_and_chat_template(tiny_qwen25vl_processor) -> None:
    tok = tiny_qwen25vl_processor.tokenizer
    assert len(tok) == TINY_VOCAB_SIZE
    ids = [tok.convert_tokens_to_ids(t) for t in QWEN_SPECIAL_TOKENS]
    assert len(set(ids)) == 14 and all(i is not None and i < TINY_VOCAB_SIZE for i in ids)
    # Each special token is one token, never split by the BPE.
    assert tok("<|im_start|>user<|image_pad|>", add_special_tokens=False)["input_ids"][0] == ids[1]
    assert tok.decode(tok('{"answer": 42}', add_special_tokens=False)["input_ids"]) == '{"answer": 42}'
    msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "How many?"}]}]
    text = tiny_qwen25vl_processor.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    assert text == ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                    "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>How many?<|im_end|>\n"
                    "<|im_start|>assistant\n")
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"},
            {"role": "assistant", "content": "A"}]
    assert tiny_qwen25vl_processor.apply_chat_template(msgs, tokenize=False) == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n")


@pytest.mark.slow
def test_generates_on_a_real_trace_image(tiny_qwen25vl_dir: Path, trace_sample_dir: Path) -> None:
    import pyarrow.parquet as pq
    import torch
    from PIL import Image
    from transformers import Qwen2_5_VLForConditionalGeneration

    row = pq.read_table(trace_sample_dir / "trace-sample.parquet").slice(0, 1).to_pylist()[0]
    image = Image.open(io.BytesIO(row["images"][0]["bytes"]))
    # Release pixel bounds, as the stages use them.
    processor = load_processor(tiny_qwen25vl_dir, min_pixels=262144, max_pixels=4194304)
    assert processor.image_processor.size["shortest_edge"] == 262144
    msgs = [{"role": "user", "content": [{"type": "image"},
                                         {"type": "text", "text": row["prompt_answer"].removeprefix("<image>")}]}]
    text = processor.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    inputs = processor(text=[text], images=[image], return_tensors="pt")
    grid = inputs["image_grid_thw"][0]
    assert int(grid.prod()) * 14 * 14 >= 262144  # resized up to the release's minimum
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(tiny_qwen25vl_dir).eval()
    torch.manual_seed(0)
    out = model.generate(**inputs, max_new_tokens=8, do_sample=True, temperature=1.0)
    assert out.shape[1] > inputs["input_ids"].shape[1]


@pytest.mark.slow
def test_same_seed_same_bytes_other_seed_other_weights(tiny_qwen25vl_dir: Path, tmp_path: Path) -> None:
    again = _digests(build_tiny_qwen25vl(tmp_path / "a", seed=0))
    assert again == _digests(tiny_qwen25vl_dir)
    other = _digests(build_tiny_qwen25vl(tmp_path / "b", seed=1))
    assert other["model.safetensors"] != again["model.safetensors"]
    assert other["tokenizer.json"] == again["tokenizer.json"]


@pytest.mark.parametrize("which", ["built", "warmed"])
def test_every_saved_checkpoint_keeps_the_rope_settings_transformers_4_reads(
        which: str, tiny_qwen25vl_dir: Path, tiny_qwen25vl_warm_dir: Path) -> None:
    """The images' vLLM stacks run transformers 4.57.6, which reads Qwen2.5-VL's M-RoPE sections only
    from rope_scaling; transformers 5's save_pretrained leaves it null. The demo's warmed model
    (re-saved after its supervised steps) once lost it, and the gpu train image then failed with
    "'NoneType' object is not subscriptable". The host's transformers reads the same sections back."""
    from transformers import AutoConfig

    ckpt = tiny_qwen25vl_dir if which == "built" else tiny_qwen25vl_warm_dir
    cfg = json.loads((ckpt / "config.json").read_text())
    assert "text_config" not in cfg and cfg["architectures"] == ["Qwen2_5_VLForConditionalGeneration"]
    assert cfg["rope_scaling"]["mrope_section"] == [2, 3, 3] and cfg["rope_theta"] == 1000000.0
    text = AutoConfig.from_pretrained(ckpt).text_config
    rope = getattr(text, "rope_parameters", None) or text.rope_scaling
    assert (rope["mrope_section"], text.hidden_size, text.vocab_size) == ([2, 3, 3], 64, TINY_VOCAB_SIZE)
