"""What an evaluation will spend: an upper bound from the plan, and a measurement from sampled episodes.

The upper bound (:func:`seat_bounds`) plays no model: every seat of a language model takes the
game's step limit in decisions, each decision needs every re-prompt and every answer uses its
whole token budget (thinking included); the prompts are the LAP's own messages, counted with the
model's tokenizer and chat template where it has one here (:mod:`tsmg.apps.evaluation.token_bound`),
growing with the history shown. It is far above what models spend, most of all with a reasoning
model's large budget, so :func:`estimate_from_samples` plays the first few planned episodes of
each game and matchup (they are not saved) and scales what each model spent, thinking counted
apart, to the plan. Sampling also works as a pre-flight check: a request the server refuses
shows up before the run.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

from tsmg.apps.evaluation.config import EvalConfig
from tsmg.apps.evaluation.metrics import price_of
from tsmg.apps.evaluation.plan import plan_evaluation, seat_spec
from tsmg.apps.evaluation.progress import duration_text
from tsmg.apps.evaluation.runner import PolicyFactory, build_policy, is_hosted, is_language_model, training_prompt
from tsmg.apps.evaluation.token_bound import (
    PromptCounter,
    PromptSizes,
    measure_prompts,
    prompt_counter,
    seat_prompt_tokens,
)
from tsmg.episode import Episode
from tsmg.lap import LAPConfig
from tsmg.registry import make
from tsmg.rollout import EpisodePlan, rollout

__all__ = [
    "SampledEstimate",
    "SeatBound",
    "calls_per_turn",
    "estimate_from_samples",
    "model_turns",
    "seat_bounds",
    "upper_bound_tokens",
]


def _token_budget(config: EvalConfig, model: str) -> int:
    """Most tokens one turn of ``model`` may write: its ``max_completion_tokens`` option, else the LAP's."""
    option = config.model_options.get(model, {}).get("max_completion_tokens")
    return int(option) if option else config.lap.max_tokens


@dataclass(frozen=True)
class SeatBound:
    """The token bound of one language model on one game, and what it is made of.

    Attributes:
        game: The game id.
        model: The model's seat name in the plan.
        seats: Its seats over the planned episodes.
        turns: Decisions a seat takes at most (the step limit; in a suite, the reference run's average).
        lap: The LAP settings the model plays with (a training run's model keeps its training prompt).
        prompts: The LAP's prompt sizes on the game, as this model counts them.
        budget: Tokens an answer may take.
        tokens_in: Prompt tokens over every seat, at most.
        tokens_out: Answer tokens over every seat, at most.
    """

    game: str
    model: str
    seats: int
    turns: int
    lap: LAPConfig
    prompts: PromptSizes
    budget: int
    tokens_in: int
    tokens_out: int


def seat_bounds(config: EvalConfig) -> list[SeatBound]:
    """Tokens in and out at most, per (game, language model) of the plan, with what each bound is made of.

    A seat takes :func:`model_turns`'s decisions; decision ``r`` sends the LAP's prompt with its
    earlier turns shown (each re-sending a whole-budget answer, invalid, with its reason), and needs
    every re-prompt, each attempt sampling ``votes`` answers of the whole budget
    (:func:`~tsmg.apps.evaluation.token_bound.seat_prompt_tokens`).
    """
    plan = plan_evaluation(config)
    counters: dict[str, PromptCounter] = {}
    bounds = []
    for (game_id, model), (seats, turns) in _seat_turns(config).items():
        spec = seat_spec(model)
        if spec not in counters:
            counters[spec] = prompt_counter(spec, config.model_options.get(spec))
        lap = _lap_of(config, spec)
        seeds = list(dict.fromkeys(planned.seed for planned in plan if planned.game_id == game_id))
        [sizes] = measure_prompts(game_id, seeds, lap, [counters[spec]], config.game_options.get(game_id))
        budget = _token_budget(config, spec)
        tokens_in = seats * seat_prompt_tokens(sizes, lap, turns, budget)
        tokens_out = seats * turns * calls_per_turn(config) * budget
        bounds.append(SeatBound(game_id, model, seats, turns, lap, sizes, budget, tokens_in, tokens_out))
    return bounds


def upper_bound_tokens(config: EvalConfig) -> dict[tuple[str, str], tuple[int, int]]:
    """Tokens in and out at most, per (game, model), over the planned seats of language models (:func:`seat_bounds`)."""
    return {(bound.game, bound.model): (bound.tokens_in, bound.tokens_out) for bound in seat_bounds(config)}


def _lap_of(config: EvalConfig, spec: str) -> LAPConfig:
    """The LAP settings ``spec`` plays with: a training run's model keeps its training prompt (as the run builds it)."""
    trained = training_prompt(spec)
    return config.lap if trained is None else trained.lap(config.lap)


def calls_per_turn(config: EvalConfig) -> int:
    """Answers a model turn writes at most: ``votes`` per attempt, 1 + ``reprompt`` attempts.

    Example:
        >>> from tsmg.lap import LAPConfig
        >>> calls_per_turn(EvalConfig(games=["FrozenLake-v0"], lap=LAPConfig(votes=3, reprompt=2)))
        9
    """
    return config.lap.votes * (1 + config.lap.reprompt)


def model_turns(config: EvalConfig) -> dict[tuple[str, str], int]:
    """Turns of language models in the plan, per (game, model): each seat takes the game's step limit.

    In a suite's game a seat takes as many turns as random play or the reference bot took on average
    there (the longer; measured with the suite's references), which is an estimate, not a bound.
    """
    return {key: seats * turns for key, (seats, turns) in _seat_turns(config).items()}


def _seat_turns(config: EvalConfig) -> dict[tuple[str, str], tuple[int, int]]:
    """``(seats, decisions a seat takes)`` of the planned language-model seats, per (game, model)."""
    found: dict[tuple[str, str], tuple[int, int]] = {}
    plan = plan_evaluation(config)
    suite_turns = _suite_turns(config)
    for game_id in config.games:
        game = make(game_id, **config.game_options.get(game_id, {}))
        rounds = suite_turns.get(game_id) or getattr(getattr(game, "config", None), "max_steps", None) or 20
        game.close()
        for planned in plan:
            if planned.game_id != game_id:
                continue
            for _, model in planned.seats:
                if is_language_model(model):
                    seats, _ = found.get((game_id, model), (0, 0))
                    found[(game_id, model)] = (seats + 1, rounds)
    return found


def _suite_turns(config: EvalConfig) -> dict[str, int]:
    """Turns a seat takes in each game of the run's suite (random play's or the bot's, the longer), rounded up.

    Empty outside a suite, or for a suite without measured references: the game's step limit is
    the bound then.
    """
    if config.suite is None:
        return {}
    from tsmg.apps.evaluation.suites import get_suite, references

    stored = references(get_suite(config.suite))
    return {game: math.ceil(turns) for game, turns in (stored or {}).get("turns", {}).items()}


@dataclass
class SampledEstimate:
    """Tokens and cost measured on sampled episodes and scaled to the plan.

    Attributes:
        rows: One per game and language model: ``game``, ``model``, ``sampled`` (seats played),
            ``planned`` (seats in the plan), the mean ``tokens_in``, ``tokens_out`` and
            ``thinking`` per seat (``thinking`` None where no thinking was reported), the
            projected ``plan_tokens_in`` / ``plan_tokens_out`` / ``plan_thinking``, and
            ``plan_cost_usd`` (None without a price); ``seconds`` a seat spent deciding per
            episode, and ``plan_seconds`` for the plan's seats.
        failures: ``(episode id, error)`` of sampled episodes that failed.
    """

    rows: list[dict[str, Any]] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)

    @property
    def cost_usd(self) -> float | None:
        """The projected cost of the plan's priced models (None when no model has a price).

        A local model's price is 0 (no bill per token); a hosted one without ``--price`` has none.
        """
        costs = [row["plan_cost_usd"] for row in self.rows if row["plan_cost_usd"] is not None]
        return sum(costs) if costs else None

    @property
    def seconds(self) -> float:
        """The models' deciding time over the plan, one decision at a time (seconds)."""
        return sum(row["plan_seconds"] for row in self.rows)

    def text(self, concurrency: int = 1) -> str:
        """The estimate as lines for the terminal; ``concurrency``: episodes live at once (``--concurrency``)."""
        lines = ["estimated from sampled episodes (thinking is part of tokens out and billed as output):"]
        for row in self.rows:
            thinking = "" if row["thinking"] is None else f" (thinking {row['thinking']:,.0f})"
            cost = ", cost n/a (no --price)" if row["plan_cost_usd"] is None else f", ${row['plan_cost_usd']:,.4f}"
            plan_thinking = "" if row["plan_thinking"] is None else f" (thinking {row['plan_thinking']:,.0f})"
            lines.append(
                f"  {row['game']} {row['model']}: {row['tokens_in']:,.0f} in, {row['tokens_out']:,.0f} out{thinking} "
                f"per episode over {row['sampled']} sampled -> {row['planned']} planned: "
                f"{row['plan_tokens_in']:,.0f} in, {row['plan_tokens_out']:,.0f} out{plan_thinking}{cost}"
            )
        unpriced = sorted({row["model"] for row in self.rows if row["plan_cost_usd"] is None})
        if self.cost_usd is not None:
            part = f" for the priced models; n/a for {', '.join(unpriced)} (no --price)" if unpriced else ""
            lines.append(f"estimated cost of the run: ${self.cost_usd:,.4f}{part}")
        elif unpriced:
            lines.append("estimated cost of the run: n/a (no --price)")
        if self.rows:
            lines.append(self._time_text(concurrency))
        for episode_id, error in self.failures[:5]:
            lines.append(f"  sampled episode failed: {episode_id}: {error}")
        return "\n".join(lines)

    def _time_text(self, concurrency: int) -> str:
        """The time line: model time one decision at a time, and with ``concurrency`` episodes live at once.

        Only a hosted model's requests overlap (its server batches them); an in-process model plays
        the live episodes' turns as one batch on one device, which is not ``concurrency`` times
        faster than one turn (SmolLM2 on a CPU: far from it), so its time is not divided.
        """
        hosted = sum(row["plan_seconds"] for row in self.rows if is_hosted(row["model"]))
        local = self.seconds - hosted
        line = f"estimated time of the run: {duration_text(self.seconds)} of model time one decision at a time"
        if concurrency > 1 and hosted:
            line += f"; about {duration_text(hosted / concurrency + local)} with {concurrency} episodes live at once"
            if local:
                line += " (the in-process models' part not divided: their batches are not that much faster)"
        elif local:
            line += " (an in-process model: batching the live episodes on one device helps by far less than "
            line += "--concurrency; the progress line of the run measures it)"
        return line


def estimate_from_samples(
    config: EvalConfig, episodes: int, policy_factory: PolicyFactory = build_policy
) -> SampledEstimate:
    """Play the first ``episodes`` planned episodes of each game and matchup with a language model, and scale.

    Args:
        config: The run to estimate.
        episodes: Episodes sampled per game and matchup (the first ones of the plan).
        policy_factory: Builds the policy of a model spec (once per spec).

    Returns:
        Per game and language model, what a seat spent on average and what the plan would.
    """
    plan = plan_evaluation(config)
    policies: dict[str, Any] = {}
    spent: dict[tuple[str, str], list[tuple[int, int, int | None, float]]] = defaultdict(list)
    estimate = SampledEstimate()
    for (game_id, seats), group in groupby(plan, key=lambda planned: (planned.game_id, planned.seats)):
        if not any(is_language_model(model) for _, model in seats):
            continue
        for _, model in seats:
            if model not in policies:
                policies[model] = policy_factory(seat_spec(model), config)
        sample = [EpisodePlan(seed=planned.seed, episode_id=planned.episode_id) for planned in list(group)[:episodes]]
        played = rollout(
            game_id,
            {agent: policies[model] for agent, model in seats},
            plans=sample,
            game_options=config.game_options.get(game_id, {}),
        )
        for episode in played:
            if episode.error is not None:
                estimate.failures.append((episode.episode_id, episode.error))
                continue
            for agent, model in seats:
                if is_language_model(model):
                    spent[(game_id, model)].append(_seat_spending(episode, agent))
    planned_seats: dict[tuple[str, str], int] = defaultdict(int)
    for planned in plan:
        for _, model in planned.seats:
            planned_seats[(planned.game_id, model)] += 1
    for (game_id, model), seats_spent in spent.items():
        count = len(seats_spent)
        tokens_in = sum(spending[0] for spending in seats_spent) / count
        tokens_out = sum(spending[1] for spending in seats_spent) / count
        reported = [spending[2] for spending in seats_spent if spending[2] is not None]
        thinking = sum(reported) / len(reported) if reported else None
        seats_planned = planned_seats[(game_id, model)]
        price = price_of(model, config.prices, 1)  # None: a hosted model without --price
        seconds = sum(spending[3] for spending in seats_spent) / count
        estimate.rows.append(
            {
                "game": game_id,
                "model": model,
                "sampled": count,
                "planned": seats_planned,
                "tokens_in": tokens_in,
                "tokens_out": tokens_out,
                "thinking": thinking,
                "plan_tokens_in": tokens_in * seats_planned,
                "plan_tokens_out": tokens_out * seats_planned,
                "plan_thinking": thinking * seats_planned if thinking is not None else None,
                "seconds": seconds,
                "plan_seconds": seconds * seats_planned,
                "plan_cost_usd": (
                    seats_planned * (tokens_in * price[0] + tokens_out * price[1]) / 1e6 if price is not None else None
                ),
            }
        )
    return estimate


def _seat_spending(episode: Episode, agent: str) -> tuple[int, int, int | None, float]:
    """Tokens in, out, thinking (None if never reported) and seconds deciding of one seat of an episode."""
    steps = episode.steps_of(agent)
    reported = [step.reasoning_tokens for step in steps if step.reasoning_tokens is not None]
    return (
        sum(step.prompt_tokens or 0 for step in steps),
        sum(step.completion_tokens or 0 for step in steps),
        sum(reported) if reported else None,
        sum(step.latency_s for step in steps),
    )
