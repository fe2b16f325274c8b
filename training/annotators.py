"""Annotators: what credit needs beyond the rollout's records, added to each episode before credit.

The second stage of the pipeline (rollout, *annotate*, credit, loss). An annotator reads a
rollout's finished episodes and writes a JSON-ready entry under its own name into each episode's
``annotations``; a credit assigner that needs it reads it there. That is where IAPO's annotator
model would plug in: it reads a trajectory's tool calls and results, writes the influence graph
between them (``annotations["influence"] = [[i, j, weight], ...]``), and an ``iapo`` assigner
redistributes the trajectory's GRPO advantage over its actions by that graph. Annotators run
where the rollout is handed over (:mod:`training.sources`), so under ``loop.mode: async`` they
run on the rollout worker, overlapping the updates.

None ships built in: register one with :func:`register_annotator` before building the
configuration that lists it in ``rollout.annotators``.

Example:
    >>> def turns(episodes):
    ...     for episode in episodes:
    ...         episode.annotations["turns"] = len(episode.steps)
    >>> register_annotator("turns", turns)
    >>> from tsmg.episode import Episode
    >>> episode = Episode(episode_id="e", game_id="g", agents=[], policies={})
    >>> annotate(["turns"], [episode]); episode.annotations
    {'turns': 0}
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tsmg.episode import Episode

#: An annotator: adds its entry to every episode's ``annotations`` (in place).
Annotator = Callable[[list[Episode]], None]

ANNOTATORS: dict[str, Annotator] = {}


def register_annotator(name: str, annotator: Annotator) -> None:
    """Make ``annotator`` selectable as ``name`` in ``rollout.annotators`` (a later registration replaces it)."""
    ANNOTATORS[name] = annotator


def check_annotators(names: Sequence[str]) -> None:
    """Raise ValueError for a name that is not registered (the message lists the registered ones)."""
    unknown = [name for name in names if name not in ANNOTATORS]
    if unknown:
        raise ValueError(
            f"unknown annotator(s) {unknown}; registered: {sorted(ANNOTATORS)} (register one with "
            "training.annotators.register_annotator before building the configuration)"
        )


def annotate(names: Sequence[str], episodes: list[Episode]) -> None:
    """Run the annotators ``names``, in order, on ``episodes`` (failed ones included: an annotator may skip them)."""
    for name in names:
        ANNOTATORS[name](episodes)
