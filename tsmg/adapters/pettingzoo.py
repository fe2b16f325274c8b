"""PettingZoo interop in both directions.

* :class:`PettingZooGame` wraps a PettingZoo env as a multi-agent text game. An **AEC** env
  becomes a turn-based game (the active agent is ``env.agent_selection``; agents the env has
  finished are stepped with ``None`` internally, as the AEC API requires); a **Parallel** env
  becomes a simultaneous game (every live agent answers each round). The referee of
  :class:`~tsmg.core.RefereedGame` handles invalid answers, forfeits and step limits.
* :func:`to_pettingzoo_aec` and :func:`to_pettingzoo_parallel` export any
  :class:`~tsmg.core.Game` (or a registered id) as a PettingZoo env whose observation and action
  spaces are :class:`gymnasium.spaces.Text`.

What this module shares with :mod:`tsmg.adapters.gymnasium` lives in :mod:`tsmg.adapters.common`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, ClassVar

from gymnasium import spaces
from pettingzoo import AECEnv, ParallelEnv

from tsmg.adapters import common
from tsmg.core import AgentID, GameConfig, GameError, Invalid, RefereedGame

__all__ = ["PettingZooGame", "default_render"]


def default_render(agent: AgentID, observation: Any, legal_actions: Sequence[str] | None) -> str:
    """Readable text for a raw PettingZoo observation.

    Text observations are returned as they are. Dict observations list their entries (the
    ``action_mask`` is shown as the list of legal actions instead of zeros and ones). Arrays
    too large for a model to read (chess boards as 7,104 booleans) raise a :class:`ValueError`
    that asks for a ``render=`` function.

    Example:
        >>> import numpy as np
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
        text = common.describe_observation(value, "PettingZooGame's default render")
        lines.append(f"{label}:\n{text}" if "\n" in text else f"{label}: {text}")
    if legal_actions is not None:
        lines.append(f"Legal actions: {', '.join(legal_actions)}" if legal_actions else "Legal actions: none now.")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ wrap into tsmg
class PettingZooGame(RefereedGame[Any]):
    """A PettingZoo env played as a multi-agent text game.

    An AEC env gives a turn-based game, a Parallel env a simultaneous one (``turn_based`` says
    which). The text layer is ``render(observation, agent, env) -> str`` and
    ``parse(agent, text) -> action | Invalid`` (or the defaults: :func:`default_render`; Discrete
    actions by name, or by number without names, under the answer rule of :mod:`tsmg.answers`).
    Subclasses may override :meth:`render_observation`, :meth:`parse_text`,
    :meth:`action_to_text`, :meth:`success` and :meth:`oracle` instead.

    Rewards are the env's per-step rewards. ``reset(seed)`` calls ``env.reset(seed=seed)``. An
    action outside the env's ``action_mask`` (in the observation dict or the info) is an invalid
    answer unless ``enforce_action_mask=False``. Invalid answers follow the options of
    :class:`~tsmg.core.GameConfig` (see :class:`~tsmg.core.RefereedGame`): under ``penalize`` an
    AEC env is not stepped (the same agent answers again); ``forfeit_after`` invalid answers in
    a row forfeit the episode, the forfeiting agent scoring ``forfeit_reward`` (PettingZoo's
    convention for an illegal move: -1) and the others nothing. ``max_steps`` truncates.

    Args:
        env_or_factory: A PettingZoo AEC or Parallel env, or a function returning one. The env
            must list ``possible_agents``.
        render: ``render(observation, agent, env) -> str``.
        parse: ``parse(agent, text) -> action | Invalid``: :class:`Invalid` for bad text (an
            exception is a bug of the game, raised as :class:`~tsmg.core.GameCodeError`; an
            action outside the agent's action space is an invalid answer).
        action_names: Names of Discrete actions, one list for every agent or a list per agent.
        action_text: ``action_text(agent, action) -> str``, canonical action text.
        is_success: ``is_success(game, agent) -> bool | None`` at the end of an episode.
        oracle: ``oracle(game, agent) -> action | None``.
        enforce_action_mask: Reject actions outside the env's action mask as invalid answers.
        noop_action: For Parallel envs under ``on_invalid="penalize"``: the action that stands
            for "do nothing". Without one, a round with an invalid answer is void (the env is
            not stepped, since a Parallel env needs every live agent's action).
        forfeit_reward: What an agent that forfeits by invalid answers scores.
        has_random_start: Whether different seeds give different first observations.
        config: A :class:`~tsmg.core.GameConfig`; alternatively pass its fields as ``options``.
        **options: ``max_steps``, ``on_invalid``, ``invalid_penalty``, ``forfeit_after`` (validated).

    Example:
        >>> import pettingzoo
        >>> names = ["rock", "paper", "scissors"]
        >>> game = PettingZooGame(lambda: pettingzoo.make("parallel", "classic/rps-v2"), action_names=names)
        >>> game.turn_based
        False
        >>> observations, _ = game.reset(seed=0)
        >>> game.step({"player_0": "paper", "player_1": "rock"}).rewards
        {'player_0': 1.0, 'player_1': -1.0}
    """

    #: The text layer's and the env's names for the referee's hooks (see :class:`~tsmg.core.GameCodeError`).
    CALL_NAMES: ClassVar[Mapping[str, str]] = {
        "_start": "env.reset",
        "_read": "parse_text",
        "_advance": "env.step",
        "_legal_moves": "legal_moves",
        "_move_text": "action_to_text",
        "_forfeit_rewards": "forfeit_reward",
        "_success": "success",
        "_oracle_move": "oracle",
        "_refresh": "render_observation",
    }

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
        forfeit_reward: float = RefereedGame.FORFEIT_REWARD,
        has_random_start: bool = False,
        config: GameConfig | None = None,
        **options: Any,
    ) -> None:
        """Wrap the env; see the class docstring for the arguments."""
        self.config = self.Config.from_options(config, options)
        env: Any = env_or_factory() if callable(env_or_factory) and not _is_env(env_or_factory) else env_or_factory
        if not _is_env(env):
            raise TypeError(f"expected a PettingZoo AECEnv or ParallelEnv (or a factory), got {type(env).__name__}")
        possible = getattr(env, "possible_agents", None)
        if not possible:
            raise ValueError("the env must list its possible_agents (tsmg games have a fixed set of agents)")
        self.env: Any = env
        self.turn_based = isinstance(env, AECEnv)
        self._agents: tuple[AgentID, ...] = tuple(possible)
        self._render_fn = render
        self._parse_fn = parse
        self._action_text_fn = action_text
        self._success_fn = is_success
        self._oracle_fn = oracle
        self.enforce_action_mask = enforce_action_mask
        self.noop_action = noop_action
        self._forfeit_reward = float(forfeit_reward)
        self._has_random_start = has_random_start
        self._discrete: dict[AgentID, common.DiscreteMoves] = {}
        for agent in self._agents:
            space = env.action_space(agent)
            names = action_names.get(agent) if isinstance(action_names, Mapping) else action_names
            if isinstance(space, spaces.Discrete):
                self._discrete[agent] = common.DiscreteMoves(space, names)
            elif names is not None:
                raise ValueError(f"action_names of {agent} need a Discrete space with {len(names)} actions")
            if render is None and type(self).render_observation is PettingZooGame.render_observation:
                common.check_describable(env.observation_space(agent), "PettingZooGame's default render")
        self._observations: dict[AgentID, Any] = {}
        self._texts: dict[AgentID, str] = {}
        self._terminated: dict[AgentID, bool] = {}
        self._truncated: dict[AgentID, bool] = {}
        self._env_infos: dict[AgentID, Any] = {}  # Parallel envs: the infos of the latest step

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
        return common.parse_default(self.env.action_space(agent), text, self._discrete.get(agent))

    def action_to_text(self, agent: AgentID, action: Any) -> str:
        """Canonical text of an env action of ``agent``."""
        if self._action_text_fn is not None:
            return self._action_text_fn(agent, action)
        return common.default_action_text(self.env.action_space(agent), action, self._discrete.get(agent))

    def legal_moves(self, agent: AgentID) -> list[Any] | None:
        """``agent``'s playable env actions: Discrete actions narrowed by the action mask, if any."""
        return common.env_legal_moves(self.env.action_space(agent), self._action_mask(agent), self._env_info(agent))

    def forfeit_reward(self, agent: AgentID) -> float:
        """What ``agent`` scores for a forfeit (the ``forfeit_reward`` argument)."""
        return self._forfeit_reward

    def success(self, agent: AgentID) -> bool | None:
        """Whether ``agent`` succeeded (the ``is_success`` function; None without)."""
        return None if self._success_fn is None else self._success_fn(self, agent)

    def oracle(self, agent: AgentID) -> Any:
        """A strong env action for ``agent`` now (the ``oracle`` function; None without)."""
        return None if self._oracle_fn is None else self._oracle_fn(self, agent)

    # ------------------------------------------------------------------ state for hooks
    @property
    def observations(self) -> dict[AgentID, Any]:
        """The latest raw observation of every agent (the last one seen for finished agents)."""
        return dict(self._observations)

    # ------------------------------------------------------------------ Game implementation
    @property
    def agents(self) -> tuple[AgentID, ...]:
        """The env's ``possible_agents``."""
        return self._agents

    @property
    def has_random_start(self) -> bool:
        """As given to the constructor (PettingZoo envs do not say)."""
        return self._has_random_start

    def observe(self, agent: AgentID) -> str:
        """``agent``'s current observation text (its last one once it has finished)."""
        self._require_tally()
        if agent not in self._agents:
            raise GameError(f"unknown agent {agent!r}; agents are {list(self._agents)}")
        return self._texts[agent]

    def state_key(self, agent: AgentID) -> Hashable:
        """``agent``'s raw observation, made hashable."""
        self._require_tally()
        return common.hashable_value(self._observations.get(agent))

    def close(self) -> None:
        """Close the env."""
        self.env.close()

    def __repr__(self) -> str:
        """Show the id, the env and the options that differ from the defaults."""
        options = self.config.model_dump(exclude_defaults=True)
        return f"{type(self).__name__}({self.game_id!r}, env={self.env}, {options})"

    # ------------------------------------------------------------------ referee hooks
    def _start(self, seed: int | None, options: Mapping[str, Any]) -> dict[AgentID, dict[str, Any]]:
        self._terminated = dict.fromkeys(self._agents, False)
        self._truncated = dict.fromkeys(self._agents, False)
        self._observations = {}
        if self.turn_based:
            self.env.reset(seed=seed, options=dict(options) or None)
            self._retire_finished(dict.fromkeys(self._agents, 0.0))
        else:
            observations, infos = self.env.reset(seed=seed, options=dict(options) or None)
            self._observations.update(observations)
            self._env_infos = dict(infos)
        return {agent: {"env_info": dict(self._env_info(agent))} for agent in self._agents}

    def _to_move(self) -> tuple[AgentID, ...]:
        return (self.env.agent_selection,) if self.turn_based else tuple(self.env.agents)

    def _read(self, agent: AgentID, text: str) -> Any:
        move = self.parse_text(agent, text)
        if not isinstance(move, Invalid) and self._parse_fn is not None:  # the default parsers stay in the space
            move = common.check_in_space(
                move, self.env.action_space(agent), lambda action: self.action_to_text(agent, action)
            )
        if isinstance(move, Invalid) or not self.enforce_action_mask:
            return move
        mask, legal = self._action_mask(agent), self.legal_moves(agent)
        return common.check_mask(move, mask, legal, lambda action: self.action_to_text(agent, action))

    def _advance(self, moves: dict[AgentID, Any], infos: dict[AgentID, dict[str, Any]]) -> Mapping[AgentID, float]:
        rewards = dict.fromkeys(self._agents, 0.0)
        if self.turn_based:
            self._step_aec(moves, infos, rewards)
        else:
            self._step_parallel(moves, infos, rewards)
        return rewards

    def _world_endings(self) -> tuple[Mapping[AgentID, bool], Mapping[AgentID, bool]]:
        if not self.env.agents:  # the env has let every agent go, whatever flags it set
            return self._terminated, {agent: not self._terminated[agent] for agent in self._agents}
        return self._terminated, self._truncated

    def _legal_moves(self, agent: AgentID) -> Sequence[Any] | None:
        return self.legal_moves(agent)

    def _move_text(self, agent: AgentID, move: Any) -> str:
        return self.action_to_text(agent, move)

    def _forfeit_rewards(self, agent: AgentID) -> Mapping[AgentID, float]:
        return {agent: self.forfeit_reward(agent)}

    def _success(self, agent: AgentID) -> bool | None:
        return self.success(agent)

    def _oracle_move(self, agent: AgentID) -> Any:
        return self.oracle(agent)

    def _refresh(self) -> None:
        for agent in self._agents:
            if agent in self._observations:
                self._texts[agent] = self.render_observation(agent, self._observations[agent])
            else:
                self._texts.setdefault(agent, f"You are {agent}; there is nothing to observe yet.")

    # ------------------------------------------------------------------ the two flavours
    def _env_info(self, agent: AgentID) -> Mapping[str, Any]:
        if self.turn_based:
            return getattr(self.env, "infos", {}).get(agent, {})
        return self._env_infos.get(agent, {})

    def _action_mask(self, agent: AgentID) -> Any:
        observation = self._observations.get(agent)
        if isinstance(observation, Mapping) and "action_mask" in observation:
            return observation["action_mask"]
        return self._env_info(agent).get("action_mask")

    def _step_aec(self, moves: dict[AgentID, Any], infos: dict[AgentID, dict[str, Any]], rewards: dict) -> None:
        agent = self.env.agent_selection
        if agent not in moves:  # an invalid answer under "penalize": the env is not stepped
            return
        self.env.step(moves[agent])
        self._take_env_info(agent, self.env.infos.get(agent, {}), infos)
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

    def _step_parallel(self, moves: dict[AgentID, Any], infos: dict[AgentID, dict[str, Any]], rewards: dict) -> None:
        active = tuple(self.env.agents)
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
            self._take_env_info(agent, env_infos.get(agent, {}), infos)

    def _take_env_info(self, agent: AgentID, env_info: Mapping[str, Any], infos: dict[AgentID, dict[str, Any]]) -> None:
        info = infos[agent]
        info["env_info"] = copy.copy(env_info)
        if info["valid"] and isinstance(self.env.action_space(agent), spaces.Text):
            common.env_verdict(info["env_info"], info)

    def _mark_finished(self, agent: AgentID, terminated: bool, truncated: bool) -> None:
        self._terminated[agent] = self._terminated[agent] or bool(terminated)
        self._truncated[agent] = self._truncated[agent] or bool(truncated)


def _is_env(candidate: Any) -> bool:
    return isinstance(candidate, AECEnv | ParallelEnv)
