"""PettingZoo interop in both directions.

* :class:`PettingZooGame` wraps a PettingZoo env as a multi-agent text game. An **AEC** env
  becomes a turn-based game (the active agent is ``env.agent_selection``; agents the env has
  finished are stepped with ``None`` internally, as the AEC API requires); a **Parallel** env
  becomes a simultaneous game (every live agent answers each round).
* :func:`to_pettingzoo_aec` and :func:`to_pettingzoo_parallel` export any
  :class:`~tsmg.core.Game` as a PettingZoo env whose observation and action spaces are
  :class:`gymnasium.spaces.Text`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv, ParallelEnv

from tsmg.adapters.gymnasium import (
    ACTION_MAX_LENGTH,
    OBSERVATION_MAX_LENGTH,
    TEXT_CHARSET,
    TextFitter,
    build_config,
    describe_value,
    discrete_action_text,
    discrete_actions,
    env_verdict,
    hashable_value,
    mask_filter,
    number_text,
    parse_discrete,
    parse_numbers,
    same_action,
    text_space,
)
from tsmg.core import AgentID, Game, GameConfig, GameError, Invalid, StepResult, check_answers

__all__ = [
    "PettingZooAECGame",
    "PettingZooGame",
    "PettingZooParallelGame",
    "TextAECEnv",
    "TextObservation",
    "TextParallelEnv",
    "default_render",
    "to_pettingzoo_aec",
    "to_pettingzoo_parallel",
]


class TextObservation(str):
    """Observation text that also carries the NumPy dtype of :class:`gymnasium.spaces.Text`.

    PettingZoo's ``api_test`` compares ``observation.dtype`` with ``observation_space.dtype``;
    a plain ``str`` has no ``dtype``, so exported envs hand out this ``str`` subclass instead.
    It behaves as a ``str`` everywhere else.
    """

    __slots__ = ()
    dtype: ClassVar[np.dtype[Any]] = np.dtype(str)


def default_render(agent: AgentID, observation: Any, legal_actions: Sequence[str] | None) -> str:
    """Readable text for a raw PettingZoo observation.

    Text observations are returned as they are. Dict observations list their entries (the
    ``action_mask`` is shown as the list of legal actions instead of zeros and ones).

    Example:
        >>> print(default_render("player_1", {"observation": np.array([0, 1]), "action_mask": np.ones(2)}, ["0", "1"]))
        You are player_1.
        Observation: [0, 1]
        Legal actions: 0, 1
    """
    if isinstance(observation, str):
        return observation
    lines = [f"You are {agent}."]
    entries = observation.items() if isinstance(observation, Mapping) else [("observation", observation)]
    for key, value in entries:
        if key == "action_mask":
            continue
        label = "Observation" if key == "observation" else str(key)
        text = describe_value(value)
        lines.append(f"{label}:\n{text}" if "\n" in text else f"{label}: {text}")
    if legal_actions is not None:
        lines.append(f"Legal actions: {', '.join(legal_actions)}" if legal_actions else "Legal actions: none now.")
    return "\n".join(lines)


def _resolve_env(source: Any) -> AECEnv | ParallelEnv:
    env = source() if callable(source) and not isinstance(source, AECEnv | ParallelEnv) else source
    if not isinstance(env, AECEnv | ParallelEnv):
        raise TypeError(f"expected a PettingZoo AECEnv or ParallelEnv (or a factory), got {type(env).__name__}")
    return env


# ------------------------------------------------------------------------------ wrap into tsmg
class PettingZooGame(Game):
    """A PettingZoo env played as a multi-agent text game.

    ``PettingZooGame(env)`` returns a :class:`PettingZooAECGame` (turn-based) for an AEC env
    and a :class:`PettingZooParallelGame` (simultaneous) for a Parallel env. The text layer is
    ``render(observation, agent, env) -> str`` and ``parse(agent, text) -> action | Invalid``
    (or the defaults: :func:`default_render`; Discrete actions by name or integer). Subclasses
    may override :meth:`render_observation`, :meth:`parse_text`, :meth:`action_to_text`,
    :meth:`success` and :meth:`oracle` instead.

    Rewards are the env's per-step rewards. ``reset(seed)`` calls ``env.reset(seed=seed)``. An
    action outside the env's ``action_mask`` (in the observation dict or the info) is an invalid
    answer unless ``enforce_action_mask=False``; invalid answers follow ``on_invalid`` as in
    :class:`~tsmg.core.RulesGame`, and ``max_steps`` truncates after that many rounds.

    Args:
        env_or_factory: A PettingZoo AEC or Parallel env, or a function returning one. The env
            must list ``possible_agents``.
        render: ``render(observation, agent, env) -> str``.
        parse: ``parse(agent, text) -> action | Invalid``; must not raise (an exception becomes
            an invalid answer).
        action_names: Names of Discrete actions, one list for every agent or a list per agent.
        action_text: ``action_text(agent, action) -> str``, canonical action text.
        is_success: ``is_success(game, agent) -> bool | None`` at the end of an episode.
        oracle: ``oracle(game, agent) -> action | None``.
        enforce_action_mask: Reject actions outside the env's action mask as invalid answers.
        noop_action: For Parallel envs under ``on_invalid="penalize"``: the action that stands
            for "do nothing". Without one, a round with an invalid answer is void (the env is
            not stepped, since a Parallel env needs every live agent's action).
        has_random_start: Whether different seeds give different first observations.
        config: A :class:`~tsmg.core.GameConfig`; alternatively pass its fields as ``options``.
        **options: ``max_steps``, ``on_invalid``, ``invalid_penalty`` (validated).

    Example:
        >>> import pettingzoo
        >>> names = ["rock", "paper", "scissors"]
        >>> game = PettingZooGame(lambda: pettingzoo.make("parallel", "classic/rps-v2"), action_names=names)
        >>> type(game).__name__, game.turn_based
        ('PettingZooParallelGame', False)
        >>> observations, _ = game.reset(seed=0)
        >>> game.step({"player_0": "paper", "player_1": "rock"}).rewards
        {'player_0': 1.0, 'player_1': -1.0}
    """

    Config: ClassVar[type[GameConfig]] = GameConfig

    def __new__(cls, *args: Any, **kwargs: Any) -> PettingZooGame:
        """Pick the AEC or the Parallel flavour from the env when called as ``PettingZooGame``."""
        if cls is not PettingZooGame:
            return super().__new__(cls)
        env = _resolve_env(args[0] if args else kwargs.get("env_or_factory"))
        flavour = PettingZooParallelGame if isinstance(env, ParallelEnv) else PettingZooAECGame
        game = super().__new__(flavour)
        # Hand the env to __init__ so that a factory is called once, not twice.
        game.__dict__["_resolved_env"] = env
        return game

    def __init__(
        self,
        env_or_factory: AECEnv | ParallelEnv | Callable[[], AECEnv | ParallelEnv],
        render: Callable[[Any, AgentID, Any], str] | None = None,
        parse: Callable[[AgentID, str], Any] | None = None,
        *,
        action_names: Sequence[str] | Mapping[AgentID, Sequence[str]] | None = None,
        action_text: Callable[[AgentID, Any], str] | None = None,
        is_success: Callable[[PettingZooGame, AgentID], bool | None] | None = None,
        oracle: Callable[[PettingZooGame, AgentID], Any] | None = None,
        enforce_action_mask: bool = True,
        noop_action: Any = None,
        has_random_start: bool = False,
        config: GameConfig | None = None,
        **options: Any,
    ) -> None:
        """Wrap the env; see the class docstring for the arguments."""
        self.config = build_config(self.Config, config, options)
        env = self.__dict__.pop("_resolved_env", None)
        if env is None:
            env = _resolve_env(env_or_factory)
        expected = ParallelEnv if isinstance(self, PettingZooParallelGame) else AECEnv
        if not isinstance(env, expected):
            raise TypeError(f"{type(self).__name__} needs a {expected.__name__}, got {type(env).__name__}")
        possible = getattr(env, "possible_agents", None)
        if not possible:
            raise ValueError("the env must list its possible_agents (tsmg games have a fixed set of agents)")
        self.env: Any = env
        self._agents: tuple[AgentID, ...] = tuple(possible)
        self._render_fn = render
        self._parse_fn = parse
        self._action_text_fn = action_text
        self._success_fn = is_success
        self._oracle_fn = oracle
        self.enforce_action_mask = enforce_action_mask
        self.noop_action = noop_action
        self._has_random_start = has_random_start
        self.action_names: dict[AgentID, tuple[str, ...]] = {}
        if action_names is not None:
            for agent in self._agents:
                names = action_names[agent] if isinstance(action_names, Mapping) else action_names
                space = env.action_space(agent)
                if not isinstance(space, spaces.Discrete) or len(names) != int(space.n):
                    raise ValueError(f"action_names of {agent} need a Discrete space with {len(names)} actions")
                self.action_names[agent] = tuple(names)
        self._started = False
        self._observations: dict[AgentID, Any] = {}
        self._texts: dict[AgentID, str] = {}
        self._returns: dict[AgentID, float] = {}
        self._terminated: dict[AgentID, bool] = {}
        self._truncated: dict[AgentID, bool] = {}
        self._env_infos: dict[AgentID, Any] = {}  # Parallel envs: the infos of the latest step
        self._rounds = 0
        self._forced_end = False
        self._limit_reached = False

    # ------------------------------------------------------------------ overridable text layer
    def render_observation(self, agent: AgentID, observation: Any) -> str:
        """``agent``'s text for a raw observation (the ``render`` function or :func:`default_render`)."""
        if self._render_fn is not None:
            return self._render_fn(observation, agent, self.env)
        return default_render(agent, observation, self.legal_actions(agent))

    def parse_text(self, agent: AgentID, text: str) -> Any:
        """An env action for ``text``, or :class:`Invalid` (the ``parse`` function or the default)."""
        if self._parse_fn is not None:
            return self._parse_fn(agent, text)
        space = self.env.action_space(agent)
        if isinstance(space, spaces.Discrete):
            return parse_discrete(space, text, self.action_names.get(agent))
        if isinstance(space, spaces.Text):
            return text if space.contains(text) else Invalid("the answer does not fit the env's Text action space")
        if isinstance(space, spaces.Box | spaces.MultiDiscrete | spaces.MultiBinary):
            return parse_numbers(space, text)
        return Invalid(f"no default parser for the action space {space}; pass parse=")

    def action_to_text(self, agent: AgentID, action: Any) -> str:
        """Canonical text of an env action of ``agent``."""
        if self._action_text_fn is not None:
            return self._action_text_fn(agent, action)
        space = self.env.action_space(agent)
        if isinstance(space, spaces.Discrete):
            return discrete_action_text(space, action, self.action_names.get(agent))
        return action if isinstance(action, str) else number_text(action)

    def legal_moves(self, agent: AgentID) -> list[Any] | None:
        """``agent``'s playable env actions: Discrete actions narrowed by the action mask, if any."""
        space = self.env.action_space(agent)
        if isinstance(space, spaces.Discrete):
            actions = discrete_actions(space)
            mask = self._action_mask(agent)
            return actions if mask is None else mask_filter(actions, space, mask)
        if isinstance(space, spaces.Text):
            legal = self._env_info(agent).get("legal_actions")
            return list(legal) if isinstance(legal, list) else None
        return None

    def default_move(self, agent: AgentID) -> Any:
        """The action played for an invalid answer under ``on_invalid="default_action"``: the first legal one."""
        moves = self.legal_moves(agent)
        if not moves:
            raise GameError(f"{type(self).__name__} cannot enumerate the actions of {agent}; use 'penalize'")
        return moves[0]

    def success(self, agent: AgentID) -> bool | None:
        """Whether ``agent`` succeeded (the ``is_success`` function; None without)."""
        return None if self._success_fn is None else self._success_fn(self, agent)

    def oracle(self, agent: AgentID) -> Any:
        """A strong env action for ``agent`` now (the ``oracle`` function; None without)."""
        return None if self._oracle_fn is None else self._oracle_fn(self, agent)

    # ------------------------------------------------------------------ flavour-specific parts
    def _action_mask(self, agent: AgentID) -> Any:
        observation = self._observations.get(agent)
        if isinstance(observation, Mapping) and "action_mask" in observation:
            return observation["action_mask"]
        return self._env_info(agent).get("action_mask")

    def _env_info(self, agent: AgentID) -> Mapping[str, Any]:
        raise NotImplementedError

    def _start(self, seed: int | None, options: dict[str, Any] | None) -> None:
        raise NotImplementedError

    def _advance(
        self, moves: dict[AgentID, Any], rewards: dict[AgentID, float], infos: dict[AgentID, dict[str, Any]]
    ) -> None:
        raise NotImplementedError

    def _env_live_agents(self) -> list[AgentID]:
        return list(self.env.agents)

    # ------------------------------------------------------------------ state for hooks
    @property
    def observations(self) -> dict[AgentID, Any]:
        """The latest raw observation of every agent (the last one seen for finished agents)."""
        return dict(self._observations)

    @property
    def rounds(self) -> int:
        """Rounds played in the current episode."""
        return self._rounds

    def episode_returns(self) -> dict[AgentID, float]:
        """Cumulative reward of each agent in the current episode."""
        return dict(self._returns)

    # ------------------------------------------------------------------ Game implementation
    @property
    def agents(self) -> tuple[AgentID, ...]:
        """The env's ``possible_agents``."""
        return self._agents

    @property
    def done(self) -> bool:
        """Whether the current episode has ended."""
        if not self._started:
            return False
        if self._forced_end or self._limit_reached or not self._env_live_agents():
            return True
        return all(self._terminated[agent] or self._truncated[agent] for agent in self._agents)

    @property
    def has_random_start(self) -> bool:
        """As given to the constructor (PettingZoo envs do not say)."""
        return self._has_random_start

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[dict[AgentID, str], dict[AgentID, dict[str, Any]]]:
        """Reset the env with ``seed`` and render every agent's observation."""
        self._started = True
        self._rounds = 0
        self._forced_end = self._limit_reached = False
        self._returns = dict.fromkeys(self._agents, 0.0)
        self._terminated = dict.fromkeys(self._agents, False)
        self._truncated = dict.fromkeys(self._agents, False)
        self._observations = {}
        self._start(seed, dict(options) if options is not None else None)
        self._render_all()
        return dict(self._texts), {agent: {"env_info": dict(self._env_info(agent))} for agent in self._agents}

    def step(self, actions: Mapping[AgentID, str | Invalid]) -> StepResult:
        """Apply the active agents' answers; see :meth:`tsmg.core.Game.step`."""
        self._require_started()
        if self.done:
            raise GameError("the episode is over; call reset() before step()")
        active = self.active_agents
        check_answers(active, actions)
        config = self.config
        rewards = dict.fromkeys(self._agents, 0.0)
        infos: dict[AgentID, dict[str, Any]] = {agent: {} for agent in self._agents}
        moves: dict[AgentID, Any] = {}
        for agent in active:
            answer = actions[agent]
            parsed = answer if isinstance(answer, Invalid) else self.parse(agent, answer)
            if not isinstance(parsed, Invalid) and self.enforce_action_mask:
                parsed = self._check_mask(agent, parsed)
            if isinstance(parsed, Invalid):
                rewards[agent] -= config.invalid_penalty
                infos[agent] = {"action": None, "valid": False, "reason": parsed.reason}
                if config.on_invalid == "default_action":
                    moves[agent] = self.default_move(agent)
                    infos[agent]["action"] = self.action_to_text(agent, moves[agent])
                elif config.on_invalid == "terminate":
                    self._forced_end = True
            else:
                moves[agent] = parsed
                infos[agent] = {"action": self.action_to_text(agent, parsed), "valid": True, "reason": None}
        if not self._forced_end:
            self._advance(moves, rewards, infos)
        self._rounds += 1
        for agent, reward in rewards.items():
            self._returns[agent] += reward
        max_steps = config.max_steps
        self._limit_reached = max_steps is not None and self._rounds >= max_steps
        self._render_all()
        terminated = {agent: self._forced_end or self._terminated[agent] for agent in self._agents}
        truncated = {agent: not terminated[agent] and (self._truncated[agent] or self.done) for agent in self._agents}
        return StepResult(dict(self._texts), rewards, terminated, truncated, infos)

    def observe(self, agent: AgentID) -> str:
        """``agent``'s current observation text (its last one once it has finished)."""
        self._require_started()
        if agent not in self._agents:
            raise GameError(f"unknown agent {agent!r}; agents are {list(self._agents)}")
        return self._texts[agent]

    def parse(self, agent: AgentID, text: str) -> Any:
        """Parse ``text`` into an env action or :class:`Invalid`; never raises."""
        if agent not in self._agents:
            return Invalid(f"unknown agent {agent!r}")
        if not isinstance(text, str):
            return Invalid(f"expected text, got {type(text).__name__}")
        try:
            return self.parse_text(agent, text)
        except Exception as error:  # a parser bug must not crash a rollout
            return Invalid(f"parser error: {error!r}")

    def legal_actions(self, agent: AgentID) -> list[str] | None:
        """Canonical texts of ``agent``'s playable actions (empty when it is not its turn)."""
        self._require_started()
        if agent not in self.active_agents:
            return []
        moves = self.legal_moves(agent)
        return None if moves is None else [self.action_to_text(agent, move) for move in moves]

    def state_key(self, agent: AgentID) -> Hashable:
        """``agent``'s raw observation, made hashable."""
        self._require_started()
        return hashable_value(self._observations.get(agent))

    def is_success(self, agent: AgentID) -> bool | None:
        """The ``success`` hook; False when the episode was ended by an invalid answer."""
        if not self._started:
            return None
        return False if self._forced_end else self.success(agent)

    def oracle_action(self, agent: AgentID) -> str | None:
        """Text of the oracle's action for ``agent`` now (None when it is not its turn or without oracle)."""
        self._require_started()
        if agent not in self.active_agents:
            return None
        move = self.oracle(agent)
        return None if move is None else self.action_to_text(agent, move)

    def close(self) -> None:
        """Close the env."""
        self.env.close()

    def __repr__(self) -> str:
        """Show the id, the env and the options that differ from the defaults."""
        options = self.config.model_dump(exclude_defaults=True)
        return f"{type(self).__name__}({self.game_id!r}, env={self.env}, {options})"

    # ------------------------------------------------------------------ helpers
    def _render_all(self) -> None:
        for agent in self._agents:
            if agent in self._observations:
                self._texts[agent] = self.render_observation(agent, self._observations[agent])
            else:
                self._texts.setdefault(agent, f"You are {agent}; there is nothing to observe yet.")

    def _check_mask(self, agent: AgentID, action: Any) -> Any:
        if self._action_mask(agent) is None:
            return action  # without a mask the env itself judges the action (e.g. Text action spaces)
        legal = self.legal_moves(agent)
        if legal is None or any(same_action(action, move) for move in legal):
            return action
        allowed = ", ".join(self.action_to_text(agent, move) for move in legal)
        return Invalid(f"{self.action_to_text(agent, action)} is not a legal move now (legal: {allowed})")

    def _mark_finished(self, agent: AgentID, terminated: bool, truncated: bool) -> None:
        self._terminated[agent] = self._terminated[agent] or bool(terminated)
        self._truncated[agent] = self._truncated[agent] or bool(truncated)

    def _require_started(self) -> None:
        if not self._started:
            raise GameError("no episode in progress; call reset() first")


class PettingZooAECGame(PettingZooGame):
    """A PettingZoo AEC env as a turn-based game: the active agent is ``env.agent_selection``.

    Agents the env has terminated or truncated are stepped with ``None`` right after the move
    that finished them (their last observation is kept), so the next active agent is always a
    live one. Rewards of a round are ``env.rewards`` summed over the env steps it took.
    """

    turn_based: ClassVar[bool] = True

    @property
    def active_agents(self) -> tuple[AgentID, ...]:
        """The agent the env selected, while the episode runs."""
        self._require_started()
        return () if self.done else (self.env.agent_selection,)

    def _env_info(self, agent: AgentID) -> Mapping[str, Any]:
        return self.env.infos.get(agent, {}) if self._started else {}

    def _start(self, seed: int | None, options: dict[str, Any] | None) -> None:
        self.env.reset(seed=seed, options=options)
        self._retire_finished(dict.fromkeys(self._agents, 0.0))

    def _advance(
        self, moves: dict[AgentID, Any], rewards: dict[AgentID, float], infos: dict[AgentID, dict[str, Any]]
    ) -> None:
        (agent,) = self.active_agents
        if agent not in moves:  # invalid answer under "penalize": the turn passes without effect
            return
        self.env.step(moves[agent])
        env_info = copy.copy(self.env.infos.get(agent, {}))
        infos[agent]["env_info"] = env_info
        if infos[agent]["valid"] and isinstance(self.env.action_space(agent), spaces.Text):
            env_verdict(env_info, infos[agent])
        self._retire_finished(rewards)

    def _retire_finished(self, rewards: dict[AgentID, float]) -> None:
        """Collect rewards and observations, then step out the agents the env has finished."""
        env = self.env
        self._collect(rewards)
        while env.agents:
            selected = env.agent_selection
            if not (env.terminations[selected] or env.truncations[selected]):
                break
            env.step(None)
            self._collect(rewards)

    def _collect(self, rewards: dict[AgentID, float]) -> None:
        env = self.env
        for agent, reward in env.rewards.items():
            if agent in rewards:
                rewards[agent] += float(reward)
        for agent in env.agents:
            if agent in self._terminated:
                self._mark_finished(agent, env.terminations[agent], env.truncations[agent])
                self._observations[agent] = env.observe(agent)


class PettingZooParallelGame(PettingZooGame):
    """A PettingZoo Parallel env as a simultaneous game: every live agent answers each round."""

    turn_based: ClassVar[bool] = False

    @property
    def active_agents(self) -> tuple[AgentID, ...]:
        """Every agent the env still lists, while the episode runs."""
        self._require_started()
        return () if self.done else tuple(self.env.agents)

    def _env_info(self, agent: AgentID) -> Mapping[str, Any]:
        return self._env_infos.get(agent, {})

    def _start(self, seed: int | None, options: dict[str, Any] | None) -> None:
        observations, infos = self.env.reset(seed=seed, options=options)
        self._observations.update(observations)
        self._env_infos = dict(infos)

    def _advance(
        self, moves: dict[AgentID, Any], rewards: dict[AgentID, float], infos: dict[AgentID, dict[str, Any]]
    ) -> None:
        active = self.active_agents
        for agent in active:
            if agent not in moves and self.noop_action is not None:
                moves[agent] = self.noop_action
        if any(agent not in moves for agent in active):
            # A Parallel env needs an action from every live agent; without a no-op action the
            # invalid answer voids the round for everyone (the env is not stepped).
            for agent in active:
                infos[agent]["round_void"] = True
            return
        observations, env_rewards, terminations, truncations, env_infos = self.env.step(moves)
        self._observations.update(observations)
        self._env_infos.update(env_infos)
        for agent, reward in env_rewards.items():
            if agent in rewards:
                rewards[agent] += float(reward)
        for agent in set(terminations) | set(truncations):
            if agent in self._terminated:
                self._mark_finished(agent, terminations.get(agent, False), truncations.get(agent, False))
        for agent in active:
            env_info = copy.copy(env_infos.get(agent, {}))
            infos[agent]["env_info"] = env_info
            if infos[agent]["valid"] and isinstance(self.env.action_space(agent), spaces.Text):
                env_verdict(env_info, infos[agent])


# ------------------------------------------------------------------------------ export to PettingZoo
class _TextSpaces:
    """Text observation/action spaces per agent, created once (PettingZoo wants the same objects)."""

    def __init__(self, game: Game, observation_max_length: int, action_max_length: int, charset: str) -> None:
        self.observation = {agent: text_space(observation_max_length, charset) for agent in game.agents}
        self.action = {agent: text_space(action_max_length, charset, min_length=1) for agent in game.agents}
        self.fit = TextFitter(next(iter(self.observation.values())), f"PettingZoo export of {game.game_id}")

    def observation_of(self, game: Game, agent: AgentID) -> TextObservation:
        return TextObservation(self.fit(game.observe(agent)))


def _as_answer(action: Any) -> str | Invalid:
    if isinstance(action, str | Invalid):
        return action
    return Invalid("no action given" if action is None else f"expected text, got {type(action).__name__}")


def _agent_info(game: Game, agent: AgentID, game_info: Mapping[str, Any]) -> dict[str, Any]:
    # Deep copies: the caller keeps what it is given, and the next step must not change it.
    info = copy.deepcopy(dict(game_info))
    legal = game.legal_actions(agent)
    info["legal_actions"] = None if legal is None else list(legal)
    return info


def _render_game(game: Game, fit: Callable[[str], str]) -> str:
    return "\n\n".join(f"[{agent}]\n{fit(game.observe(agent))}" for agent in game.agents)


def _check_render_mode(render_mode: str | None) -> None:
    if render_mode not in (None, "ansi"):
        raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")


class TextAECEnv(AECEnv[AgentID, str, str]):
    """Any :class:`~tsmg.core.Game` as a PettingZoo AEC env with Text spaces.

    Turn-based games select their active agent; in simultaneous games the agents answer one
    after another and the game steps once all of them have answered (rewards appear then).
    Observations are :class:`TextObservation` strings; actions are answer text, and any text
    (or ``None`` for a live agent) is handled by the game's invalid-answer rule. ``infos[agent]``
    holds the game's per-step info plus ``legal_actions``.
    """

    def __init__(
        self,
        game: Game,
        render_mode: str | None = None,
        *,
        observation_max_length: int = OBSERVATION_MAX_LENGTH,
        action_max_length: int = ACTION_MAX_LENGTH,
        charset: str = TEXT_CHARSET,
    ) -> None:
        """Wrap ``game``; spaces as in :func:`tsmg.adapters.to_gymnasium`."""
        super().__init__()
        _check_render_mode(render_mode)
        self.game = game
        self.render_mode = render_mode
        self.metadata = {"render_modes": ["ansi"], "name": f"tsmg/{game.game_id}", "is_parallelizable": True}
        self.possible_agents: list[AgentID] = list(game.agents)
        self.agents: list[AgentID] = []
        self._spaces = _TextSpaces(game, observation_max_length, action_max_length, charset)
        self.rewards: dict[AgentID, float] = {}
        self._cumulative_rewards: dict[AgentID, float] = {}
        self.terminations: dict[AgentID, bool] = {}
        self.truncations: dict[AgentID, bool] = {}
        self.infos: dict[AgentID, dict[str, Any]] = {}
        self.agent_selection = self.possible_agents[0]
        self._answers: dict[AgentID, str | Invalid] = {}

    def observation_space(self, agent: AgentID) -> spaces.Text:
        """The agent's Text observation space (always the same object)."""
        return self._spaces.observation[agent]

    def action_space(self, agent: AgentID) -> spaces.Text:
        """The agent's Text action space (always the same object)."""
        return self._spaces.action[agent]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Reset the game with ``seed`` and select its first active agent."""
        _, infos = self.game.reset(seed=seed, options=options)
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {agent: _agent_info(self.game, agent, infos.get(agent, {})) for agent in self.agents}
        self._answers = {}
        self.agent_selection = self._next_agent()

    def observe(self, agent: AgentID) -> TextObservation:
        """``agent``'s observation text."""
        return self._spaces.observation_of(self.game, agent)

    def step(self, action: str | None) -> None:
        """Record the selected agent's answer; step the game once every active agent has answered."""
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        self._clear_rewards()
        self._answers[agent] = _as_answer(action)
        waiting = [other for other in self.game.active_agents if other not in self._answers]
        if waiting:
            self.agent_selection = waiting[0]
            return
        result = self.game.step(self._answers)
        self._answers = {}
        over = self.game.done
        for other in self.agents:
            self.rewards[other] = float(result.rewards.get(other, 0.0))
            terminated = bool(result.terminated.get(other, False))
            truncated = bool(result.truncated.get(other, False))
            if over and not (terminated or truncated):
                truncated = True  # the game ended for everyone, whatever it reported for this agent
            self.terminations[other] = terminated
            self.truncations[other] = truncated
            self.infos[other] = _agent_info(self.game, other, result.infos.get(other, {}))
        self._accumulate_rewards()
        if not over:
            self.agent_selection = self._next_agent()
        self._deads_step_first()

    def render(self) -> str | None:
        """Every agent's observation text in ``"ansi"`` mode (None without render mode)."""
        return _render_game(self.game, self._spaces.fit) if self.render_mode == "ansi" else None

    def close(self) -> None:
        """Close the game."""
        self.game.close()

    def _next_agent(self) -> AgentID:
        waiting = [agent for agent in self.game.active_agents if agent not in self._answers]
        return waiting[0] if waiting else self.agent_selection


class TextParallelEnv(ParallelEnv[AgentID, str, str]):
    """Any :class:`~tsmg.core.Game` as a PettingZoo Parallel env with Text spaces.

    Every live agent may send an action each step, but only the game's active agents are heard:
    in a turn-based game the actions of agents whose turn it is not are **ignored** (their
    ``infos`` say whose turn it is through ``legal_actions``, which is empty for them). An active
    agent without an action counts as an invalid answer (``"no action given"``).
    """

    def __init__(
        self,
        game: Game,
        render_mode: str | None = None,
        *,
        observation_max_length: int = OBSERVATION_MAX_LENGTH,
        action_max_length: int = ACTION_MAX_LENGTH,
        charset: str = TEXT_CHARSET,
    ) -> None:
        """Wrap ``game``; spaces as in :func:`tsmg.adapters.to_gymnasium`."""
        _check_render_mode(render_mode)
        self.game = game
        self.render_mode = render_mode
        self.metadata = {"render_modes": ["ansi"], "name": f"tsmg/{game.game_id}", "is_parallelizable": True}
        self.possible_agents: list[AgentID] = list(game.agents)
        self.agents: list[AgentID] = []
        self._spaces = _TextSpaces(game, observation_max_length, action_max_length, charset)

    def observation_space(self, agent: AgentID) -> spaces.Text:
        """The agent's Text observation space (always the same object)."""
        return self._spaces.observation[agent]

    def action_space(self, agent: AgentID) -> spaces.Text:
        """The agent's Text action space (always the same object)."""
        return self._spaces.action[agent]

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[AgentID, TextObservation], dict[AgentID, dict[str, Any]]]:
        """Reset the game with ``seed``; every agent's observation and info."""
        _, infos = self.game.reset(seed=seed, options=options)
        self.agents = list(self.possible_agents)
        observations = {agent: self._spaces.observation_of(self.game, agent) for agent in self.agents}
        return observations, {agent: _agent_info(self.game, agent, infos.get(agent, {})) for agent in self.agents}

    def step(
        self, actions: Mapping[AgentID, Any]
    ) -> tuple[
        dict[AgentID, TextObservation],
        dict[AgentID, float],
        dict[AgentID, bool],
        dict[AgentID, bool],
        dict[AgentID, dict[str, Any]],
    ]:
        """Step the game with the active agents' actions (others are ignored); results for every live agent."""
        game = self.game
        answers = {agent: _as_answer(actions.get(agent)) for agent in game.active_agents}
        result = game.step(answers)
        live = self.agents
        over = game.done
        observations = {agent: self._spaces.observation_of(game, agent) for agent in live}
        rewards = {agent: float(result.rewards.get(agent, 0.0)) for agent in live}
        terminations = {agent: bool(result.terminated.get(agent, False)) for agent in live}
        truncations = {
            agent: bool(result.truncated.get(agent, False)) or (over and not terminations[agent]) for agent in live
        }
        infos = {agent: _agent_info(game, agent, result.infos.get(agent, {})) for agent in live}
        self.agents = [agent for agent in live if not (terminations[agent] or truncations[agent])]
        return observations, rewards, terminations, truncations, infos

    def render(self) -> str | None:
        """Every agent's observation text in ``"ansi"`` mode (None without render mode)."""
        return _render_game(self.game, self._spaces.fit) if self.render_mode == "ansi" else None

    def close(self) -> None:
        """Close the game."""
        self.game.close()


def to_pettingzoo_aec(
    game: Game,
    *,
    render_mode: str | None = None,
    observation_max_length: int = OBSERVATION_MAX_LENGTH,
    action_max_length: int = ACTION_MAX_LENGTH,
    charset: str = TEXT_CHARSET,
) -> TextAECEnv:
    """Export a game as a PettingZoo AEC env with Text spaces (see :class:`TextAECEnv`).

    Example:
        >>> import tsmg
        >>> env = to_pettingzoo_aec(tsmg.make("FrozenLake-v0"))
        >>> env.reset(seed=0)
        >>> env.step("down")
        >>> env.infos["player"]["action"], env.infos["player"]["valid"]
        ('down', True)
    """
    return TextAECEnv(
        game,
        render_mode,
        observation_max_length=observation_max_length,
        action_max_length=action_max_length,
        charset=charset,
    )


def to_pettingzoo_parallel(
    game: Game,
    *,
    render_mode: str | None = None,
    observation_max_length: int = OBSERVATION_MAX_LENGTH,
    action_max_length: int = ACTION_MAX_LENGTH,
    charset: str = TEXT_CHARSET,
) -> TextParallelEnv:
    """Export a game as a PettingZoo Parallel env with Text spaces (see :class:`TextParallelEnv`).

    In a turn-based game, the actions of agents whose turn it is not are ignored.
    """
    return TextParallelEnv(
        game,
        render_mode,
        observation_max_length=observation_max_length,
        action_max_length=action_max_length,
        charset=charset,
    )
