"""The weights a run starts from: a model folder, the embedded SmolLM2, or a tiny model built for the run.

Both the run's set-up (:mod:`training.setup`) and a LoRA checkpoint, which stores only its
adapter and names its base model in the run's config (:mod:`training.checkpoint`), ask here.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from training.config import ModelConfig, TinyModelOptions
from tsmg.model_spec import parse_model_spec
from tsmg.run_folder import BASE_MODEL_DIR

__all__ = ["BASE_MODEL_DIR", "base_model_source", "tiny_corpus"]  # BASE_MODEL_DIR: the run folder's, re-exported


def base_model_source(model: ModelConfig, run_dir: Path, *, seed: int) -> str:
    """Where the initial weights of ``model`` come from (a folder or hub id); builds the tiny model if needed.

    ``seed`` (the run's, ``run.seed``) initialises a tiny model built here, into ``run_dir/base_model``.
    """
    spec = model.spec
    parsed = parse_model_spec(spec)
    kind, target = parsed.kind, parsed.target
    if kind == "tiny":
        folder = run_dir / BASE_MODEL_DIR
        if not (folder / "config.json").is_file():
            _build_tiny(model.tiny, folder, seed=seed)
        return str(folder)
    if kind == "smollm2":
        from backends.embedded import embedded_model_dir

        return str(embedded_model_dir())
    if kind == "hf" and target:
        return target
    if kind == "vllm" and target:  # trained in HF from the same folder; rollouts run on the vLLM engine
        return target
    raise ValueError(f"cannot train model spec {spec!r}: use 'tiny', 'smollm2' or 'hf:PATH_OR_ID'")


def tiny_corpus(tiny: TinyModelOptions) -> list[str] | None:
    """The texts the tokenizer of ``model.spec: tiny`` is trained on (None: the game corpus)."""
    from training.tiny_corpus import game_corpus

    if tiny.tokenizer_corpus != "prose":
        return None
    board_line = re.compile(r"[_A-Z]+")  # board rows: runs of capital letters and underscores
    return ["\n".join(line for line in text.splitlines() if not board_line.fullmatch(line)) for text in game_corpus()]


def _build_tiny(tiny: TinyModelOptions, folder: Path, *, seed: int) -> None:
    from backends.tiny import build_tiny_model

    corpus = tiny_corpus(tiny)
    temporary = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(temporary, ignore_errors=True)
    build_tiny_model(
        temporary,
        preset=tiny.preset,
        corpus=corpus,
        vocab_size=tiny.vocab_size,
        hidden_size=tiny.hidden_size,
        layers=tiny.layers,
        heads=tiny.heads,
        intermediate_size=tiny.intermediate_size,
        seed=seed,
    )
    temporary.replace(folder)
