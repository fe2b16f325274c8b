"""The texts a tiny model's tokenizer is trained on: Frozen Lake observations, LAP instructions, action words.

:func:`backends.tiny.build_tiny_model` trains a byte-level BPE tokenizer for a model built on the
spot; without a corpus of its own it takes this one. The corpus renders games of the catalog, and
the backends sit below the games, so they reach it through the ``tsmg.tiny_corpus`` entry point
of ``pyproject.toml`` (:data:`backends.tiny.CORPUS_GROUP`), never by name. It lived at
``backends.tiny.game_corpus`` until issue 39, the only import that held the backends above the
games; that name still works, with a ``DeprecationWarning`` (``tsmg/_moved.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

__all__ = ["game_corpus"]


def game_corpus(seeds: Iterable[int] = range(24)) -> Iterator[str]:
    """Texts a tiny tokenizer should cover: Frozen Lake observations, LAP instructions, actions.

    Args:
        seeds: Seeds of the Frozen Lake episodes whose observations are rendered.

    Yields:
        Pieces of text (observations, prompts, action words).
    """
    import games  # noqa: F401  (registers the catalog)
    from tsmg.lap import DEFAULT_SYSTEM, ActionFormat
    from tsmg.registry import make

    actions = ["left", "down", "right", "up"]
    yield DEFAULT_SYSTEM
    for kind in ("tag", "choice", "raw"):
        yield ActionFormat(kind=kind).instructions_for(actions)
    yield "That answer was invalid: expected one of left, down, right, up."
    for action in actions:
        yield f"<action>{action}</action> {action} {action.capitalize()} {action.upper()}"
    yield "<think></think><plan></plan>"
    for game_id in ("FrozenLake-v0", "FrozenLake-NoSlip-v0", "FrozenLake-BigSlippery-v0"):
        game = make(game_id)
        for seed in seeds:
            observations, _ = game.reset(seed=seed)
            yield observations["player"]
            for step in range(3):
                if game.done:
                    break
                result = game.step({"player": actions[(seed + step) % 4]})
                yield result.observations.get("player", "")
