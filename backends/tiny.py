"""Tiny language models built on the spot, for tests and fast demos (no download, a few seconds).

:func:`build_tiny_model` trains a byte-level BPE tokenizer on game text (Frozen Lake observations,
the LAP's instructions, the action words and the chat markers: :func:`default_corpus`, which the
training package renders for the backends through an entry point), builds a randomly initialised
``LlamaForCausalLM`` of the requested size, and saves both with ``save_pretrained`` so that they
load back through ``from_pretrained`` exactly like a user's model (``HFBackend(folder)``).

A Llama config is used on purpose: with some other configs (e.g. ``qwen2``) ``AutoTokenizer``
swaps its own pre-tokenizer in over the trained one. The weights are random, so the model writes
nonsense; it exercises every code path at the real shapes, which is what tests and speed
benchmarks need.

Example:
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as parent:
    ...     folder = build_tiny_model(parent)
    ...     print(*sorted(path.name for path in folder.iterdir()))
    chat_template.jinja config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
PAD = "<|pad|>"
SPECIAL_TOKENS = (PAD, IM_START, IM_END)

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


@dataclass(frozen=True, slots=True)
class TinySize:
    """Shape of a tiny Llama model.

    Attributes:
        vocab_size: Target vocabulary of the trained tokenizer (the model uses the size it reaches).
        hidden_size: Width of the residual stream.
        layers: Transformer blocks.
        heads: Attention heads (``hidden_size`` must divide by it).
        intermediate_size: Width of the MLP.
    """

    vocab_size: int
    hidden_size: int
    layers: int
    heads: int
    intermediate_size: int


PRESETS: dict[str, TinySize] = {
    # About 0.15M parameters: the default for tests.
    "0.15m": TinySize(vocab_size=512, hidden_size=64, layers=2, heads=4, intermediate_size=128),
    # About 4M parameters: closer to a real model's ratio of compute to Python overhead.
    "4m": TinySize(vocab_size=1024, hidden_size=256, layers=4, heads=8, intermediate_size=768),
}

PresetName = Literal["0.15m", "4m"]

#: The entry-point group whose entry ``game`` names the default corpus of a tiny tokenizer (a
#: function returning texts; pyproject.toml fills it with the training package's game corpus).
CORPUS_GROUP = "tsmg.tiny_corpus"


def default_corpus() -> list[str]:
    """The texts a tiny tokenizer is trained on when :func:`build_tiny_model` is given none.

    The corpus the :data:`CORPUS_GROUP` entry point names: this project's training package renders
    games of the catalog for it (Frozen Lake observations, the LAP's instructions, the action
    words). The backends sit below the games, so they reach it through the entry point, never by name.

    Raises:
        LookupError: No package names a corpus (pass ``corpus=`` to :func:`build_tiny_model`).
    """
    from tsmg import loading

    references = [entry.reference for entry in loading.plugin_entries(CORPUS_GROUP) if entry.name == "game"]
    if not references:
        raise LookupError(
            f"no package names a default corpus for a tiny tokenizer (entry point 'game' of {CORPUS_GROUP}): "
            "pass corpus=[texts] to build_tiny_model"
        )
    return list(loading.load(references[-1])())  # the source tree's, when tsmg runs from a checkout


def __getattr__(name: str) -> Any:
    """The names that moved away keep working, with a warning (``game_corpus``: see ``tsmg/_moved.py``)."""
    from tsmg import _moved

    return _moved.moved_attribute(__name__, name)


def build_tiny_model(
    out_dir: str | Path,
    *,
    preset: PresetName = "0.15m",
    corpus: Iterable[str] | None = None,
    vocab_size: int | None = None,
    hidden_size: int | None = None,
    layers: int | None = None,
    heads: int | None = None,
    intermediate_size: int | None = None,
    max_position_embeddings: int = 2048,
    chat_template: bool = True,
    seed: int = 0,
) -> Path:
    """Train a tokenizer, build a random Llama model, and save both into ``out_dir``.

    Explicit sizes override the preset's. Weights come from ``seed`` alone: the global torch RNG
    is forked, so building a model changes no other random stream.

    Args:
        out_dir: Folder to write (created if missing).
        preset: ``"0.15m"`` (tests) or ``"4m"`` (benchmarks).
        corpus: Texts to train the tokenizer on (default: :func:`default_corpus`, the game corpus).
        vocab_size: Target vocabulary size of the tokenizer.
        hidden_size: Model width.
        layers: Number of transformer blocks.
        heads: Attention heads.
        intermediate_size: MLP width.
        max_position_embeddings: The model's context window.
        chat_template: Give the tokenizer a ChatML template (False: a model that cannot chat).
        seed: Seed of the weights.

    Returns:
        The folder, ready for ``from_pretrained`` / ``HFBackend``.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    base = PRESETS[preset]
    size = TinySize(
        vocab_size=vocab_size or base.vocab_size,
        hidden_size=hidden_size or base.hidden_size,
        layers=layers or base.layers,
        heads=heads or base.heads,
        intermediate_size=intermediate_size or base.intermediate_size,
    )
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(list(corpus) if corpus is not None else default_corpus(), size.vocab_size)
    if chat_template:
        tokenizer.chat_template = CHATML_TEMPLATE
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=size.hidden_size,
        intermediate_size=size.intermediate_size,
        num_hidden_layers=size.layers,
        num_attention_heads=size.heads,
        num_key_value_heads=size.heads,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids(IM_END),
        pad_token_id=tokenizer.convert_tokens_to_ids(PAD),
        tie_word_embeddings=False,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = config.pad_token_id
    model.generation_config.eos_token_id = config.eos_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def train_tokenizer(texts: list[str], vocab_size: int):  # type: ignore[no-untyped-def]
    """A byte-level BPE tokenizer with ChatML special tokens, wrapped for transformers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Chat markers and role names appear in every prompt: train on them too.
    chat_lines = [f"{IM_START}{role}\n" for role in ("system", "user", "assistant")]
    tokenizer.train_from_iterator(texts + chat_lines, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=IM_END,
        pad_token=PAD,
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )
