"""Per-model training defaults: the settings under which a model learns, beneath every layer a user gives.

The schema's defaults (``training/config.py``) are written for a pretrained model: tag answers, a
LoRA adapter, a learning rate of 1e-5, ``dtype: auto``. The tiny model (``model.spec: tiny``, built
from scratch, 0.15M parameters) learns nothing under them: it cannot write a tag, its LoRA adapter
has too few weights to move, and 1e-5 barely moves a random initialisation. :data:`MODEL_DEFAULTS`
holds what the shipped tiny configs (``configs/*_tiny.yaml``) share, and, per game family, what
they add. :func:`apply_model_defaults` lays them beneath the configuration's layers (file, flags,
``--set``): a key any layer sets keeps that value, so any explicit flag, ``--set`` or ``--config``
value wins.

Example:
    >>> data = {"rollout": {"game_id": "KuhnPoker-v0"}, "model": {"spec": "tiny"}, "optim": {"lr": 5e-4}}
    >>> applied = apply_model_defaults(data)
    >>> data["optim"]["lr"], data["model"]["finetune"], "optim.lr" in dict(applied)
    (0.0005, 'full', False)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MODEL_DEFAULTS", "ModelDefaults", "apply_model_defaults", "describe_applied"]


@dataclass(frozen=True)
class ModelDefaults:
    """The defaults of one model spec.

    Attributes:
        settings: Nested sections (``{"model": {"finetune": "full"}}``) for any game.
        per_game: (game id regular expression, nested sections) pairs added for the games whose
            id fully matches (several may match; later ones win).
    """

    settings: Mapping[str, Any]
    per_game: tuple[tuple[str, Mapping[str, Any]], ...] = field(default=())


#: The defaults of each model spec that has its own (a spec not listed keeps the schema's).
MODEL_DEFAULTS: dict[str, ModelDefaults] = {
    "tiny": ModelDefaults(
        settings={
            "rollout": {
                "lap": {
                    # No instructions: a model built from scratch reads none, and a short prompt is a
                    # cheap one; the choice format constrains the answer to the legal moves, so
                    # every answer is valid (tag answers are all invalid for a model that never saw one).
                    "template": {"system": None, "user": "{observation}"},
                    "action_format": {"kind": "choice"},
                    "temperature": 1.0,
                }
            },
            # Every weight: a LoRA adapter on a 0.15M random model has almost nothing to train.
            # float32, not auto (bfloat16 on a CPU with AMX): no faster for this size, and a full
            # fine-tune in bfloat16 rounds every weight update away.
            "model": {"finetune": "full", "dtype": "float32"},
            # A random initialisation moves at 1e-3; the schema's 1e-5 is a pretrained model's.
            "optim": {"lr": 1.0e-3, "micro_batch_size": 64, "grad_accumulation": 1},
            "run": {"threads": 1},  # a model this small gains nothing from more threads
        },
        per_game=(
            (
                r"FrozenLake-.*",
                {
                    "rollout": {"observation_lines": "[_OPG]+"},  # the grid lines only
                    "model": {"tiny": {"tokenizer_corpus": "prose"}},  # one token per grid cell
                },
            ),
            # One map, no slipping: greedy evaluations would all play the same episode.
            (r"FrozenLake-v0", {"run": {"eval_temperature": None}}),
            # The shipped self-play configs' compact views (games/views.py): the cards or the board.
            (r"KuhnPoker-v0|TicTacToe-v0|TicTacToe-vsMinimax-v0", {"rollout": {"game_options": {"view": "compact"}}}),
        ),
    ),
}


def _leaves(tree: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every (path, value) of a nested mapping whose value is not itself a mapping."""
    found: list[tuple[tuple[str, ...], Any]] = []
    for key, value in tree.items():
        if isinstance(value, Mapping):
            found.extend(_leaves(value, (*prefix, key)))
        else:
            found.append(((*prefix, key), value))
    return found


def _given(data: Mapping[str, Any], path: tuple[str, ...]) -> bool:
    """Whether ``data`` sets the key at ``path`` (or a non-mapping value above it)."""
    node: Any = data
    for key in path:
        if not isinstance(node, Mapping):
            return True  # a value above the key replaces the whole branch: it was given
        if key not in node:
            return False
        node = node[key]
    return True


def apply_model_defaults(data: dict[str, Any]) -> list[tuple[str, Any]]:
    """Fill the keys of ``data`` (sections, not yet validated) that no layer set from its model's defaults.

    The model is ``data["model"]["spec"]`` and the game ``data["rollout"]["game_id"]``; a spec
    without defaults of its own changes nothing.

    Returns:
        The (dotted key, value) pairs filled in, in order.
    """
    spec = data.get("model", {}).get("spec") if isinstance(data.get("model"), Mapping) else None
    defaults = MODEL_DEFAULTS.get(spec) if isinstance(spec, str) else None
    if defaults is None:
        return []
    rollout = data.get("rollout")
    game_id = rollout.get("game_id") if isinstance(rollout, Mapping) else None
    layers = [defaults.settings]
    if isinstance(game_id, str):
        layers += [extra for pattern, extra in defaults.per_game if re.fullmatch(pattern, game_id)]
    merged: dict[tuple[str, ...], Any] = {}
    for layer in layers:
        merged.update(_leaves(layer))
    applied = []
    for path, value in merged.items():
        if _given(data, path):
            continue
        node = data
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
        applied.append((".".join(path), value))
    return applied


def describe_applied(spec: str, applied: list[tuple[str, Any]]) -> str:
    """The one block ``tsmg train`` prints: the defaults filled in for ``spec`` and how to override one."""
    import yaml

    def shown(value: Any) -> str:  # Any: any YAML value
        return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix("...").strip()

    settings = ", ".join(f"{key}={shown(value)}" for key, value in applied)
    return (
        f"{spec} model defaults (the settings it learns under; configs/*_{spec}.yaml): {settings}; "
        "override any with --set SECTION.KEY=VALUE (or its flag, or --config)"
    )
