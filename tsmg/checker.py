"""``check_game``: does a game keep the TSMG contract? Failure messages say what to fix.

Checks, in order: the API shape (agents, reset, step, info), seed determinism (same seed and
actions ⇒ identical episode; different seeds ⇒ different starts where the game is random),
that every legal action's text parses back, that invalid text is rejected with a reason and
never raises, and terminated/truncated sanity (a finished episode refuses ``step``; answers out
of turn are refused).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tsmg.core import Game, GameError, Invalid
from tsmg.registry import make

_INVALID_PROBES = ("", "   ", "\x00\x1b[31m", "definitely not an action " * 50, "🙂 ünïcödé", "<action></action>")


class GameCheckError(AssertionError):
    """A game broke its contract; the message says what and how to fix it."""


@dataclass
class CheckReport:
    """What :func:`check_game` exercised."""

    game_id: str
    episodes: int = 0
    steps: int = 0
    legal_actions_checked: int = 0
    notes: list[str] = field(default_factory=list)


def check_game(game: Game | str, seeds: Sequence[int] = (0, 1, 2, 3, 4), max_rounds: int = 200) -> CheckReport:
    """Check that ``game`` (an instance or a registered id) keeps the TSMG contract.

    Args:
        game: The game, or a registered id to :func:`tsmg.make`.
        seeds: Seeds of the random-play episodes used by the checks.
        max_rounds: Rounds after which a random-play episode is cut short by the checker.

    Returns:
        A :class:`CheckReport` of what was exercised.

    Raises:
        GameCheckError: on the first broken rule, saying what to fix.
    """
    if isinstance(game, str):
        game = make(game)
    name = game.game_id
    report = CheckReport(game_id=name)
    _check_agents(game)
    first_starts = []
    for seed in seeds:
        trace = _play_random(game, seed, max_rounds, report)
        replay = _play_random(game, seed, max_rounds, report)
        if trace != replay:
            raise GameCheckError(
                f"{name}: two episodes with seed {seed} and the same actions differ at round "
                f"{_first_difference(trace, replay)}. Draw every random number from the generator passed to "
                "initial_state/transition (RulesGame) or seeded in reset(); never from the global random module."
            )
        first_starts.append(trace[0])
    if game.has_random_start and len(seeds) > 1 and all(start == first_starts[0] for start in first_starts):
        raise GameCheckError(
            f"{name}: has_random_start is True but seeds {list(seeds)} all give the same first observation; "
            "draw the start from the generator seeded in reset(), or return False from has_random_start."
        )
    _check_step_errors(game, seeds[0])
    return report


def _check_agents(game: Game) -> None:
    agents = game.agents
    if not isinstance(agents, tuple) or not agents or not all(isinstance(a, str) for a in agents):
        raise GameCheckError(f"{game.game_id}: agents must be a non-empty tuple of str, got {agents!r}")
    if len(set(agents)) != len(agents):
        raise GameCheckError(f"{game.game_id}: agent ids must be unique, got {agents!r}")


def _check_keyed(game: Game, what: str, mapping: Any, value_type: type | tuple[type, ...]) -> None:
    if not isinstance(mapping, dict) or set(mapping) != set(game.agents):
        keys = sorted(mapping) if isinstance(mapping, dict) else type(mapping).__name__
        raise GameCheckError(
            f"{game.game_id}: {what} must be a dict keyed by every agent {list(game.agents)}, got {keys}"
        )
    for agent, value in mapping.items():
        if not isinstance(value, value_type):
            raise GameCheckError(
                f"{game.game_id}: {what}[{agent!r}] must be {value_type}, got {type(value).__name__}: {value!r:.80}"
            )


def _play_random(game: Game, seed: int, max_rounds: int, report: CheckReport) -> list[Any]:
    """Play one episode with seeded random legal actions; return a trace for comparison."""
    name = game.game_id
    rng = np.random.default_rng(seed + 10_007)
    reset_result = game.reset(seed=seed)
    if not (isinstance(reset_result, tuple) and len(reset_result) == 2):
        raise GameCheckError(f"{name}: reset() must return (observations, infos)")
    observations, infos = reset_result
    _check_keyed(game, "reset observations", observations, str)
    _check_keyed(game, "reset infos", infos, dict)
    trace: list[Any] = [tuple(sorted(observations.items()))]
    report.episodes += 1
    for _ in range(max_rounds):
        active = game.active_agents
        if not active:
            raise GameCheckError(f"{name}: the episode is not over but no agent is active; list who must act")
        if not set(active) <= set(game.agents):
            raise GameCheckError(f"{name}: active agents {active} are not all in agents {game.agents}")
        if game.turn_based and len(active) != 1:
            raise GameCheckError(f"{name}: turn_based is True but {len(active)} agents are active: {active}")
        actions = {}
        for agent in active:
            observation = game.observe(agent)
            if observation != game.observe(agent):
                raise GameCheckError(
                    f"{name}: observe({agent!r}) changed between two calls; rendering must not change state"
                )
            key = game.state_key(agent)
            if not isinstance(key, Hashable):
                raise GameCheckError(f"{name}: state_key({agent!r}) must be hashable, got {type(key).__name__}")
            legal = game.legal_actions(agent)
            if legal is not None:
                _check_legal_actions(game, agent, legal, report)
            _check_invalid_texts(game, agent)
            # Without enumerable legal actions the checker can only answer with a probe text,
            # which the game may treat as invalid; that is fine and not reported.
            actions[agent] = legal[int(rng.integers(len(legal)))] if legal else _PROBE_FALLBACK
        result = game.step(actions)
        report.steps += 1
        try:
            observations, rewards, terminated, truncated, step_infos = result
        except (TypeError, ValueError):
            raise GameCheckError(f"{name}: step() must return a StepResult of five dicts") from None
        _check_keyed(game, "step observations", observations, str)
        _check_keyed(game, "step rewards", rewards, (float, int))
        _check_keyed(game, "step terminated", terminated, bool)
        _check_keyed(game, "step truncated", truncated, bool)
        _check_keyed(game, "step infos", step_infos, dict)
        for agent in active:
            info = step_infos[agent]
            missing = {"action", "valid", "reason"} - set(info)
            if missing:
                raise GameCheckError(
                    f"{name}: infos[{agent!r}] after its answer lacks {sorted(missing)}; report the parsed action, "
                    "whether it was valid, and why not"
                )
            if actions[agent] is not _PROBE_FALLBACK and not info["valid"]:
                raise GameCheckError(
                    f"{name}: legal action {actions[agent]!r} of {agent!r} was rejected at step: {info['reason']}"
                )
        if not all(np.isfinite(value) for value in rewards.values()):
            raise GameCheckError(f"{name}: rewards must be finite numbers, got {rewards}")
        trace.append(
            (
                tuple(sorted(actions.items())),
                tuple(sorted(observations.items())),
                tuple(sorted(rewards.items())),
                tuple(sorted(terminated.items())),
                tuple(sorted(truncated.items())),
            )
        )
        if all(terminated[a] or truncated[a] for a in game.agents):
            if not game.done:
                raise GameCheckError(f"{name}: every agent is terminated or truncated but done is False")
            if game.active_agents:
                raise GameCheckError(f"{name}: the episode is over but active_agents is {game.active_agents}")
            return trace
        if game.done:
            raise GameCheckError(f"{name}: done is True but step() did not report every agent terminated or truncated")
    report.notes.append(f"seed {seed}: cut short after {max_rounds} rounds")
    return trace


_PROBE_FALLBACK = "__tsmg_checker_no_legal_actions__"


def _check_legal_actions(game: Game, agent: str, legal: list[str], report: CheckReport) -> None:
    name = game.game_id
    if not isinstance(legal, list) or not all(isinstance(text, str) for text in legal):
        raise GameCheckError(f"{name}: legal_actions({agent!r}) must return a list of str or None")
    if not legal:
        raise GameCheckError(
            f"{name}: {agent!r} is active but has no legal actions; an active agent must be able to act "
            "(return None from legal_actions if they cannot be enumerated)"
        )
    if len(set(legal)) != len(legal):
        raise GameCheckError(f"{name}: legal_actions({agent!r}) lists duplicates: {legal}")
    for text in legal:
        parsed = game.parse(agent, text)
        if isinstance(parsed, Invalid):
            raise GameCheckError(
                f"{name}: legal action {text!r} of {agent!r} does not parse back ({parsed.reason}); make "
                "parse_action accept exactly what action_text produces"
            )
        report.legal_actions_checked += 1


def _check_invalid_texts(game: Game, agent: str) -> None:
    name = game.game_id
    for text in _INVALID_PROBES:
        try:
            parsed = game.parse(agent, text)
        except Exception as error:
            raise GameCheckError(
                f"{name}: parse({agent!r}, {text!r:.40}) raised {error!r}; return Invalid(reason)"
            ) from None
        if isinstance(parsed, Invalid) and not (isinstance(parsed.reason, str) and parsed.reason.strip()):
            raise GameCheckError(f"{name}: Invalid answers must carry a reason saying what was expected")
        if text in ("", "   ") and not isinstance(parsed, Invalid):
            raise GameCheckError(f"{name}: an empty answer {text!r} parsed as a valid action; it must be Invalid")


def _check_step_errors(game: Game, seed: int) -> None:
    name = game.game_id
    game.reset(seed=seed)
    active = game.active_agents
    inactive = [agent for agent in game.agents if agent not in active]
    if inactive:
        try:
            game.step({inactive[0]: "x"})
        except GameError:
            pass
        else:
            raise GameCheckError(f"{name}: step() accepted an answer from {inactive[0]!r}, whose turn it is not")
    try:
        game.step({})
    except GameError:
        pass
    else:
        raise GameCheckError(f"{name}: step({{}}) accepted no answer although {list(active)} must act")
    # Finish the episode with invalid answers under the game's own rules, then step once more.
    game.reset(seed=seed)
    for _ in range(10_000):
        if game.done:
            break
        legal = {agent: game.legal_actions(agent) for agent in game.active_agents}
        game.step({agent: (moves[0] if moves else Invalid("checker")) for agent, moves in legal.items()})
    if game.done:
        try:
            game.step({agent: "x" for agent in game.agents})
        except GameError:
            return
        raise GameCheckError(f"{name}: step() after the episode ended must raise GameError; call reset() first")


def _first_difference(left: list[Any], right: list[Any]) -> int:
    for index, (a, b) in enumerate(zip(left, right, strict=False)):
        if a != b:
            return index
    return min(len(left), len(right))
