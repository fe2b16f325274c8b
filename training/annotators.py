"""Annotators: what credit needs beyond the rollout's records, added to each episode before credit.

The second stage of the pipeline (rollout, *annotate*, credit, loss). An annotator is a function
``annotator(episodes) -> None`` that reads a rollout's finished episodes (failed ones included: it
may skip them) and adds, in place, what it found:

- a general annotator writes a JSON-ready entry under its own name into ``episode.annotations``;
- an **influence annotator** writes a typed influence graph (:class:`tsmg.influence.InfluenceGraph`:
  the agent's actions and the user and tool messages, with ``support`` and ``failure`` edges from
  earlier nodes to the actions that used them, each naming the fields it carried; node ``step``
  values index ``episode.steps``) into ``episode.influence[name]``, under its own registered name.
  IAPO's credit (``iapo``, :mod:`training.iapo`) routes each trajectory's advantage along the graph
  named by ``credit.params.graph``.

Built in:

- ``exact`` (:func:`exact_influence`), which reads the game's own influence record: a game that
  knows its data flow (:attr:`tsmg.tools.ToolGame.provides_influence`, the service games) has the
  rollout write ``episode.influence["exact"]`` at each episode's end, and this annotator checks
  that every finished episode carries it. ``iapo`` with ``graph: exact`` lists it by default.
- ``model`` (:class:`training.model_annotator.ModelAnnotator`): a language model asked, in one
  batched call per rollout, which earlier messages each action used (support or failure);
  ``smollm2`` unless ``TSMG_ANNOTATOR_MODEL`` names another spec. ``iapo`` with ``graph: model``.

Annotators run **once per rollout, where it is played**, before it is handed over
(:meth:`training.rollout.sources.RolloutSource` hands over every rollout through ``_handed_over``): in the
trainer's process under ``loop.mode: sync``, in the rollout worker's under ``loop.mode: async``
(:mod:`training.rollout.async_loop`, which sends the worker the registered annotators the run lists),
so that a slow annotator (a model) overlaps the updates. Register others with
:func:`register_annotator` before building the configuration that lists them in
``rollout.annotators``; under ``async`` an annotator must pickle (a module-level function or an
instance of a module-level class), since the worker is a process of its own.

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

from training.model_annotator import MODEL, ModelAnnotator
from tsmg.episode import Episode
from tsmg.influence import EXACT

#: An annotator: adds its entry to every episode's ``annotations`` or its graph to ``influence`` (in place).
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


def exact_influence(episodes: list[Episode]) -> None:
    """The ``exact`` annotator: every finished episode carries the game's own influence graph, fitting its steps.

    The rollout already wrote ``influence["exact"]`` from the game (:meth:`tsmg.tools.ToolGame.influence_graph`);
    this checks it is there and names the steps the record has, so that credit never routes along a
    graph of another episode. Episodes that failed (``error`` set) are skipped.

    Raises:
        ValueError: A finished episode has no exact graph (its game keeps none) or a graph beyond its steps.
    """
    for episode in episodes:
        if episode.error is not None:
            continue
        graph = episode.influence.get(EXACT)
        if graph is None:
            raise ValueError(
                f"annotator {EXACT!r} reads the game's own influence record, and episode {episode.episode_id!r} of "
                f"{episode.game_id} has none (its game keeps no influence graph: "
                "tsmg.tools.ToolGame.provides_influence); use a model-based influence annotator for this game"
            )
        graph.check_steps(len(episode.steps))


register_annotator(EXACT, exact_influence)
register_annotator(MODEL, ModelAnnotator())
