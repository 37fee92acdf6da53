"""What a backend is asked: a :class:`Request` carries everything a single sample depends on (the chat
messages, the images, the sampling settings and the seed), and the prompt every backend renders from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase, ProcessorMixin


@dataclass(frozen=True)
class Sampling:
    """Sampling settings in vLLM's vocabulary (the release's); temperature 0 means greedy."""

    temperature: float
    top_p: float = 1.0
    top_k: int = -1  # -1: no top-k filter (vLLM's convention)
    max_tokens: int = 2048
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0

    @classmethod
    def from_settings(cls, settings: dict[str, Any], **override: object) -> Sampling:
        keys = {f for f in cls.__dataclass_fields__}
        values = {k: settings[k] for k in keys if k in settings}
        values.update(override)
        return cls(**values)


@dataclass(frozen=True)
class Request:
    """One generation: chat messages (system + user with image placeholders), PIL images, sampling, seed."""

    messages: list[dict[str, Any]]
    images: list[Any] = field(default_factory=list)
    sampling: Sampling = Sampling(temperature=0.0)
    seed: int = 0
    # Extra chat-template variables, e.g. {"enable_thinking": False} for the judge.
    template_kwargs: dict[str, Any] = field(default_factory=dict)


def render_prompt(request: Request, processor: ProcessorMixin | None, tokenizer: PreTrainedTokenizerBase) -> str:
    """The prompt text through the checkpoint's own chat template, the same for every backend.

    An image prompt goes through the processor's template; a text one (the judge) through the
    tokenizer's, which takes extra variables such as enable_thinking.
    """
    if request.images:
        if processor is None:
            raise ValueError("a text-only checkpoint cannot take images")
        return processor.apply_chat_template(request.messages, tokenize=False, add_generation_prompt=True,
                                             **request.template_kwargs)
    return tokenizer.apply_chat_template(request.messages, tokenize=False, add_generation_prompt=True,
                                         **request.template_kwargs)


class GenerationBackend(Protocol):
    name: str

    def generate(self, requests: list[Request]) -> list[str]:
        """One response text per request, in order."""
        ...
