"""Reading a training checkpoint as a model: where its weights are (a full model, or a LoRA adapter over a base).

A checkpoint folder is laid out by :mod:`tsmg.run_folder` (the kernel owns the layout, the trainer
writes it): ``model/`` holds full weights; ``adapter/`` a LoRA adapter over the base model that the
run folder's ``config.yaml`` names (``model.spec``). The backends read it here, so that
``hf:RUN/checkpoints/step-N`` loads without the backends knowing the trainer (a layer above them);
:mod:`training.checkpoint` re-exports :func:`checkpoint_weights` for the trainer's own use.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tsmg.model_spec import parse_model_spec
from tsmg.run_folder import ADAPTER_DIR, BASE_MODEL_DIR, CONFIG_FILE, MODEL_DIR

__all__ = ["CheckpointWeights", "checkpoint_weights", "run_base_model"]


@dataclass(frozen=True)
class CheckpointWeights:
    """Where the weights of a checkpoint (or a plain model folder) are.

    Attributes:
        model: A model folder ``HFBackend`` loads (a LoRA checkpoint's base model).
        adapter: The LoRA adapter to load on top (None: full weights).
    """

    model: str
    adapter: Path | None = None


def checkpoint_weights(path: str | Path) -> CheckpointWeights | None:
    """The weights a training checkpoint folder holds (None when ``path`` is no checkpoint).

    ``path`` may be a checkpoint (``RUN/checkpoints/step-N``: its ``model/``, or its ``adapter/``
    over the base model named in ``RUN/config.yaml``) or anything laid out like one (an opponent
    pool's snapshot). A plain model folder (with ``config.json``) is not a checkpoint: None.

    Raises:
        FileNotFoundError: A LoRA checkpoint whose run folder no longer says what its base model is.
    """
    folder = Path(path)
    if (folder / "config.json").is_file():
        return None
    if (folder / MODEL_DIR / "config.json").is_file():
        return CheckpointWeights(str(folder / MODEL_DIR))
    if (folder / ADAPTER_DIR).is_dir():
        run_dir = folder.parent.parent
        if not (run_dir / CONFIG_FILE).is_file():
            raise FileNotFoundError(
                f"{folder} holds a LoRA adapter but {run_dir / CONFIG_FILE}, which names its base model, is missing"
            )
        return CheckpointWeights(run_base_model(run_dir), folder / ADAPTER_DIR)
    return None


def run_base_model(run_dir: str | Path) -> str:
    """The base model (a folder or hub id) of the run folder ``run_dir``, as its ``config.yaml`` names it.

    ``tiny`` is the model the trainer built in the run folder (``base_model/``); ``smollm2`` the
    embedded default's folder; ``hf:``/``vllm:`` their target.

    Raises:
        FileNotFoundError: No ``config.yaml``, or a tiny run whose built model is gone.
        ValueError: A config whose model spec names no local weights.
    """
    import yaml

    run = Path(run_dir)
    config = yaml.safe_load((run / CONFIG_FILE).read_text(encoding="utf-8")) or {}
    spec = str((config.get("model") or {}).get("spec", ""))
    parsed = parse_model_spec(spec)
    if parsed.kind == "tiny":
        folder = run / BASE_MODEL_DIR
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(f"{run} trained the tiny model, and the model it built ({folder}) is gone")
        return str(folder)
    if parsed.kind == "smollm2":
        from backends.embedded import embedded_model_dir

        return str(embedded_model_dir())
    if parsed.kind in ("hf", "vllm"):
        return parsed.target
    raise ValueError(f"{run / CONFIG_FILE} names model spec {spec!r}, which has no local weights")
