"""What a game provides to training, found out by probing it, and whether a configuration fits it.

:func:`game_capabilities` reads a game's declarations (``provides_state_key``, ``per_step_rewards``)
or, where it declares nothing, plays a few short random episodes to find out; :func:`incompatibilities`
lists every reason the configuration's sections cannot train on such a game (GiGPO on a game without
usable state keys, tree rollouts on one that cannot fork, ...).
:func:`training.config.validate_against_game` puts the two together for a whole configuration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from training.annotators import ANNOTATORS
from training.config_sections import CreditConfig, RolloutConfig, SamplerConfig
from training.sampling import sampler as sampler_spec
from tsmg.core import Game
from tsmg.influence import EXACT
from tsmg.tools import provides_influence


class IncompatibleGameError(ValueError):
    """The configuration needs something the game does not provide; the message says what and why."""


@dataclass(frozen=True)
class GameCapabilities:
    """What a game provides to credit assigners, as far as can be told from the game object.

    Attributes:
        agents: The game's agents.
        state_keys: Whether ``state_key`` gives a usable (non-None, hashable) key.
        state_keys_reason: Why not, when it does not.
        per_step_rewards: Whether rewards arrive before the last step (None: could not tell).
        per_step_rewards_reason: How that was decided.
        next_state_keys: Whether ``state_key`` also names the state a finished episode ended in
            (what the last step led to), besides the states where agents decide.
        next_state_keys_reason: Why not, when it does not.
        fork_mode: How the game forks an episode in progress (:attr:`tsmg.core.Game.fork_mode`).
        influence: Whether the game keeps each episode's exact influence graph
            (:attr:`tsmg.tools.ToolGame.provides_influence`).
    """

    agents: tuple[str, ...]
    state_keys: bool
    state_keys_reason: str
    per_step_rewards: bool | None
    per_step_rewards_reason: str
    next_state_keys: bool = False
    next_state_keys_reason: str = "not probed"
    fork_mode: str = "none"
    influence: bool = False


def _probe_state_keys(game: Game, seed: int) -> tuple[bool, str]:
    declared = getattr(game, "provides_state_key", None)
    if declared is not None:
        return bool(declared), f"the game declares provides_state_key = {declared}"
    game.reset(seed=seed)
    for agent in game.active_agents:
        try:
            key = game.state_key(agent)
        except Exception as error:  # any failure means "not usable", and the reason says which
            return False, f"state_key({agent!r}) raised {error!r}"
        if key is None:
            return False, f"state_key({agent!r}) returned None"
        try:
            hash(key)
        except TypeError:
            return False, f"state_key({agent!r}) returned an unhashable {type(key).__name__}"
    return True, "state_key gives a hashable key"


def _random_actions(game: Game, rng: np.random.Generator) -> dict[str, str] | None:
    """A uniformly drawn legal action for every agent to move (None: the game does not list them)."""
    actions: dict[str, str] = {}
    for agent in game.active_agents:
        legal = game.legal_actions(agent)
        if not legal:
            return None
        actions[agent] = legal[int(rng.integers(len(legal)))]
    return actions


def _probe_step_rewards(game: Game, seed: int, episodes: int, max_rounds: int) -> tuple[bool | None, str]:
    declared = getattr(game, "per_step_rewards", None)
    if declared is not None:
        return bool(declared), f"the game declares per_step_rewards = {declared}"
    rng = np.random.default_rng(seed)
    for episode in range(episodes):
        game.reset(seed=seed + episode)
        for _ in range(max_rounds):
            if game.done:
                break
            actions = _random_actions(game, rng)
            if actions is None:
                return None, "the game does not enumerate its legal actions, so random play cannot probe it"
            result = game.step(actions)
            if not result.done and any(reward != 0 for reward in result.rewards.values()):
                return True, "random play received a reward before the episode ended"
    return False, f"in {episodes} random-play episodes every reward came at the end (or none came)"


def _probe_final_state_keys(game: Game, seed: int, max_rounds: int) -> tuple[bool, str]:
    """Whether a finished episode's state has a usable key (PGPO and GRAFT follow the last step there)."""
    declared = getattr(game, "provides_state_key", None)
    if declared is not None:
        return bool(declared), f"the game declares provides_state_key = {declared}"
    rng = np.random.default_rng(seed)
    game.reset(seed=seed)
    for _ in range(max_rounds):
        if game.done:
            break
        actions = _random_actions(game, rng)
        if actions is None:
            return False, "the game does not enumerate its legal actions, so random play cannot reach an end"
        game.step(actions)
    for agent in game.agents:
        try:
            key = game.state_key(agent)
            hash(key)
        except Exception as error:  # any failure means "not usable", and the reason says which
            return False, f"state_key({agent!r}) of a finished episode raised {error!r}"
        if key is None:
            return False, f"state_key({agent!r}) of a finished episode returned None"
    return True, "state_key names the state a finished episode ended in"


def game_capabilities(
    game: Game, *, seed: int = 0, probe_episodes: int = 16, max_rounds: int = 200, next_state_keys: bool = True
) -> GameCapabilities:
    """Find out what ``game`` provides: its declarations first, else short probes (which reset the game).

    A game may declare ``provides_state_key`` and ``per_step_rewards`` (bools) to skip the probes.
    ``next_state_keys=False`` skips playing an episode to its end to probe the key of a finished
    one (reported as not probed).
    """
    state_keys, state_reason = _probe_state_keys(game, seed)
    step_rewards, reward_reason = _probe_step_rewards(game, seed, probe_episodes, max_rounds)
    next_keys, next_reason = False, "not probed"
    if next_state_keys:
        next_keys, next_reason = (
            _probe_final_state_keys(game, seed, max_rounds) if state_keys else (False, state_reason)
        )
    return GameCapabilities(
        tuple(game.agents),
        state_keys,
        state_reason,
        step_rewards,
        reward_reason,
        next_keys,
        next_reason,
        fork_mode=game.fork_mode,
        influence=provides_influence(game),
    )


def incompatibilities(
    capabilities: GameCapabilities, *, rollout: RolloutConfig, credit: CreditConfig, sampler: SamplerConfig
) -> list[str]:
    """Every reason why these sections cannot train on a game with these capabilities (empty: they can)."""
    reasons: list[str] = []
    name, needs = credit.name, credit.needs
    game_id = rollout.game_id
    if "state_keys" in needs and not capabilities.state_keys:
        reasons.append(
            f"credit assigner {name!r} groups steps by state key, but {game_id} has none usable "
            f"({capabilities.state_keys_reason})"
        )
    if "next_state_keys" in needs and capabilities.state_keys and not capabilities.next_state_keys:
        reasons.append(
            f"credit assigner {name!r} follows each step to the state it led to, but {game_id} names no "
            f"state once an episode is over ({capabilities.next_state_keys_reason})"
        )
    if "per_step_rewards" in needs and not capabilities.per_step_rewards:
        reasons.append(
            f"credit assigner {name!r} needs rewards before the last step, but for {game_id}: "
            f"{capabilities.per_step_rewards_reason} (a game may declare per_step_rewards = True)"
        )
    unknown_seats = sorted(set(rollout.train_agents or ()) - set(capabilities.agents))
    if unknown_seats:
        reasons.append(f"rollout.train_agents {unknown_seats} are not agents of {game_id} {list(capabilities.agents)}")
    if rollout.opponent is not None and len(capabilities.agents) < 2:
        reasons.append(f"rollout.opponent is set but {game_id} has a single agent")
    reasons.extend(_aaw_identical(capabilities, rollout, sampler))
    if "influence" in needs and credit.params.get("graph", EXACT) == EXACT and not capabilities.influence:
        reasons.append(
            f"credit assigner {name!r} routes advantage along each episode's influence graph, and {game_id} keeps "
            "no influence record of its own (tsmg.tools.ToolGame.provides_influence): list an influence annotator in "
            f"rollout.annotators and name it in credit.params.graph (registered annotators: {sorted(ANNOTATORS)})"
        )
    forking = {"tree": "tree rollouts (rollout.shape: tree)", "rtpo": "RTPO's branches (rollout.shape: rtpo)"}.get(
        rollout.shape
    )
    if "fork" in needs:
        forking = f"credit assigner {name!r}"
    if forking and capabilities.fork_mode == "none":
        reasons.append(
            f"{forking} fork episodes in progress, but {game_id} cannot fork (its fork_mode is 'none': it neither "
            "copies a snapshot of its state nor replays one from a seed; see tsmg.core.Game.fork)"
        )
    if len(capabilities.agents) < 2:
        single = f"{game_id} has a single agent ({capabilities.agents[0] if capabilities.agents else 'none'})"
        if rollout.self_play:
            reasons.append(f"self-play needs a game of two or more seats, but {single}")
        if rollout.opponent_pool is not None:
            reasons.append(f"an opponent pool plays the seats the model does not, but {single}")
        if "multi_agent" in needs:
            reasons.append(f"credit assigner {name!r} assigns self-play credit per seat, but {single}")
    return reasons


def _aaw_identical(capabilities: GameCapabilities, rollout: RolloutConfig, sampling: SamplerConfig) -> list[str]:
    """AAW without replacement asked for at least as many draws as there are trajectories draws them all."""
    if not sampler_spec(sampling.name).uses_alpha or sampling.replacement or sampling.unit != "episode":
        return []
    seats = len(rollout.train_agents or capabilities.agents) if rollout.opponent is None else 1
    trajectories = rollout.groups_per_update * rollout.group_size * seats
    count = sampling.samples_per_update
    if count is None or count == "all" or count < trajectories:
        return []
    return [
        f"sampler 'aaw' without replacement draws {sampling.samples_per_update} of at most {trajectories} "
        "trajectories per update, so it draws every one with A != 0 exactly once, whatever |A|: that is sampler "
        "'uniform-nonzero'; lower sampler.samples_per_update or set sampler.replacement: true"
    ]
