"""The plan of an evaluation: which episodes, on which seeds, with whom in which seat.

Every model meets the same starts: a game's seed list depends only on the base seed, the game
id and its options. Multi-agent games are played by every ordered pair of distinct models
(seats swapped), or by one model against itself when only one is listed; with an opponent
(``EvalConfig.opponent``, a suite's), each model takes every seat in turn and the opponent holds
the others, named :func:`opponent_label` in the episodes so that its seats never count for a
model of the same spec.
"""

from __future__ import annotations

import itertools
import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tsmg.apps.evaluation.config import EvalConfig
from tsmg.registry import make


@dataclass(frozen=True)
class PlannedEpisode:
    """One episode of the plan.

    Attributes:
        episode_id: ``game|matchup|index``, stable across reruns.
        game_id: The game.
        seed: Seed passed to ``reset``.
        seats: The model spec playing each agent.
        index: Position in the game's seed list.
    """

    episode_id: str
    game_id: str
    seed: int
    seats: tuple[tuple[str, str], ...]
    index: int

    @property
    def matchup(self) -> str:
        """The models in seat order, e.g. ``random vs oracle``."""
        return " vs ".join(model for _, model in self.seats)


def episode_seeds(game_id: str, options: Mapping[str, Any], seed: int, count: int) -> list[int]:
    """The fixed seed list of a game variant: the same for every model and every rerun.

    ``view: raw`` is left out of the variant: it is the text adapted OpenSpiel games showed before
    the option existed, so runs that pin it (``openspiel-small-v1``) keep their seeds.
    """
    kept = {key: value for key, value in options.items() if (key, value) != ("view", "raw")}
    variant = zlib.crc32(f"{game_id}|{json.dumps(kept, sort_keys=True, default=str)}".encode())
    return [int(s) for s in np.random.SeedSequence([seed, variant]).generate_state(count) % (2**31 - 1)]


#: How the opponent's seats are named in a plan and its episodes: ``random (opponent)``.
OPPONENT_SUFFIX = " (opponent)"


def opponent_label(spec: str) -> str:
    """The seat name of the opponent ``spec`` (distinct from a model with the same spec)."""
    return spec + OPPONENT_SUFFIX


def seat_spec(seat_name: str) -> str:
    """The model spec behind a seat name of the plan (the opponent's label or a model spec)."""
    return seat_name.removesuffix(OPPONENT_SUFFIX)


def matchups(
    agents: Sequence[str], models: Sequence[str], opponent: str | None = None
) -> list[tuple[tuple[str, str], ...]]:
    """Seat assignments: one per model for single-agent games; rotations for multi-agent games.

    With an ``opponent``, each model takes each seat in turn and :func:`opponent_label` the others.
    """
    if len(agents) == 1:
        return [((agents[0], model),) for model in models]
    if opponent is not None:
        label = opponent_label(opponent)
        return [
            tuple((agent, model if agent == seat else label) for agent in agents) for model in models for seat in agents
        ]
    if len(models) == 1:
        return [tuple((agent, models[0]) for agent in agents)]
    if len(agents) == 2:
        return [((agents[0], a), (agents[1], b)) for a, b in itertools.permutations(models, 2)]
    # More seats than a pair: each model takes the first seat in turn, the others cycle behind it.
    assignments = []
    for start in range(len(models)):
        order = [models[(start + k) % len(models)] for k in range(len(agents))]
        assignments.append(tuple(zip(agents, order, strict=True)))
    return assignments


def plan_evaluation(config: EvalConfig) -> list[PlannedEpisode]:
    """Every planned episode, grouped by game then matchup, in a fixed order."""
    planned = []
    for game_id in config.games:
        options = config.game_options.get(game_id, {})
        agents = make(game_id, **options).agents
        seeds = episode_seeds(game_id, options, config.seed, config.episodes)
        for seats in matchups(agents, config.models, config.opponent):
            label = " vs ".join(model for _, model in seats)
            for index, seed in enumerate(seeds):
                planned.append(PlannedEpisode(f"{game_id}|{label}|{index}", game_id, seed, seats, index))
    return planned
