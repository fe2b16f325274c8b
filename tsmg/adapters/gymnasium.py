"""Gymnasium interop in both directions.

* :class:`GymnasiumGame` wraps any :class:`gymnasium.Env` as a single-agent text game: a
  renderer turns each observation into text and a parser turns the player's answer into an
  env action. Defaults exist for ``Discrete`` spaces (and number lists for ``Box`` /
  ``MultiDiscrete`` / ``MultiBinary`` actions); anything else takes user functions. The
  referee of :class:`~tsmg.core.RefereedGame` handles invalid answers, forfeits and step limits.
* :func:`to_gymnasium` exports any single-agent :class:`~tsmg.core.Game` as a Gymnasium env
  whose observation and action spaces are :class:`gymnasium.spaces.Text`.

What this module shares with :mod:`tsmg.adapters.pettingzoo` lives in :mod:`tsmg.adapters.common`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, ClassVar

import gymnasium
from gymnasium import spaces

from tsmg.adapters import common
from tsmg.core import AgentID, GameConfig, GameError, Invalid, RefereedGame

__all__ = ["GymnasiumGame"]


# ------------------------------------------------------------------------------ wrap into tsmg
class GymnasiumGame(RefereedGame[Any]):
    """A Gymnasium env played as a single-agent text game.

    The text layer is two user functions (or the defaults): ``render(observation, env) -> str``
    and ``parse(text) -> action | Invalid``. Subclasses may override :meth:`render_observation`,
    :meth:`parse_text`, :meth:`action_to_text`, :meth:`success` and :meth:`oracle` instead.

    Episodes follow the env: ``reset(seed)`` calls ``env.reset(seed=seed)`` (so the same seed and
    the same answers give the same episode), Gymnasium's ``terminated`` / ``truncated`` pass
    through unchanged, and the ``max_steps`` option adds a truncation of its own. Invalid answers
    follow the options of :class:`~tsmg.core.GameConfig` (see :class:`~tsmg.core.RefereedGame`):
    under ``penalize`` the env is not stepped (the turn is used up, the observation stays), under
    ``default_action`` the default action is played; ``forfeit_after`` invalid answers in a row
    forfeit the episode, scored ``forfeit_reward``; each invalid answer subtracts ``invalid_penalty``.

    Args:
        env_or_id: A Gymnasium env, a registered Gymnasium id (built with ``gymnasium.make``) or
            a function returning an env.
        render: ``render(observation, env) -> str``; by default ``"Observation: 3"`` plus the
            list of actions (Text observations are shown as they are).
        parse: ``parse(text) -> action | Invalid``: :class:`Invalid` for bad text (an exception
            is a bug of the game, raised as :class:`~tsmg.core.GameCodeError`; an action outside
            the env's action space is an invalid answer). By default Discrete actions are read
            by name (``action_names``) or as integers, numeric arrays as numbers, Text actions as
            they are.
        action_names: Names of Discrete actions in order (e.g. ``["left", "down", ...]``).
        agent: The id of the single agent.
        action_aliases: Other names the default parser accepts, each mapped to the action name it
            stands for (e.g. ``{"stand": "stick"}``); the game must announce them in its prompt
            (the default render does), and canonical texts stay the ``action_names``.
        action_text: ``action_text(action) -> str``, the canonical text of an action (needed
            with a custom ``parse`` on spaces the defaults do not cover).
        is_success: ``is_success(game) -> bool | None``, evaluated at the end of an episode.
        oracle: ``oracle(game) -> action | None``, a strong action in the current state.
        default_action: Action played under ``on_invalid="default_action"`` (default: the
            first legal action).
        enforce_action_mask: Treat actions outside the ``action_mask`` of the env's info as
            invalid answers (by default the mask only narrows :meth:`legal_actions`).
        forfeit_reward: What the player scores when it forfeits by invalid answers: the env's
            worst outcome, so that answering nonsense never beats playing (default -1).
        has_random_start: Whether different seeds give different first observations.
        make_kwargs: Keyword arguments for ``gymnasium.make`` when ``env_or_id`` is an id.
        config: A :class:`~tsmg.core.GameConfig`; alternatively pass its fields as ``options``.
        **options: ``max_steps``, ``on_invalid``, ``invalid_penalty``, ``forfeit_after``
            (validated; unknown names are rejected).

    Example:
        >>> import gymnasium
        >>> env = gymnasium.make("FrozenLake-v1", is_slippery=False)
        >>> game = GymnasiumGame(env, action_names=["left", "down", "right", "up"], max_steps=10)
        >>> observations, _ = game.reset(seed=0)
        >>> print(observations["player"])
        Observation: 0
        Actions: left, down, right, up
        >>> result = game.step({"player": "down"})
        >>> result.observations["player"].splitlines()[0], result.infos["player"]["action"]
        ('Observation: 4', 'down')
        >>> game.step({"player": "jump"}).infos["player"]["reason"]
        "expected one of left, down, right, up; got 'jump'"
    """

    turn_based = True
    #: The text layer's and the env's names for the referee's hooks (see :class:`~tsmg.core.GameCodeError`).
    CALL_NAMES: ClassVar[Mapping[str, str]] = {
        "_start": "env.reset",
        "_read": "parse_text",
        "_advance": "env.step",
        "_legal_moves": "legal_moves",
        "_move_text": "action_to_text",
        "_fallback_move": "default_move",
        "_forfeit_rewards": "forfeit_reward",
        "_success": "success",
        "_oracle_move": "oracle",
        "_refresh": "render_observation",
    }

    def __init__(
        self,
        env_or_id: gymnasium.Env[Any, Any] | str | Callable[[], gymnasium.Env[Any, Any]],
        render: Callable[[Any, gymnasium.Env[Any, Any]], str] | None = None,
        parse: Callable[[str], Any] | None = None,
        action_names: Sequence[str] | None = None,
        agent: AgentID = "player",
        *,
        action_aliases: Mapping[str, str] | None = None,
        action_text: Callable[[Any], str] | None = None,
        is_success: Callable[[GymnasiumGame], bool | None] | None = None,
        oracle: Callable[[GymnasiumGame], Any] | None = None,
        default_action: Any = None,
        enforce_action_mask: bool = False,
        forfeit_reward: float = RefereedGame.FORFEIT_REWARD,
        has_random_start: bool = False,
        make_kwargs: Mapping[str, Any] | None = None,
        config: GameConfig | None = None,
        **options: Any,
    ) -> None:
        """Wrap the env; see the class docstring for the arguments."""
        self.config = self.Config.from_options(config, options)
        if isinstance(env_or_id, str):
            env = gymnasium.make(env_or_id, **dict(make_kwargs or {}))
        elif isinstance(env_or_id, gymnasium.Env):
            env = env_or_id
        elif callable(env_or_id):
            env = env_or_id()
        else:
            raise TypeError(f"expected a gymnasium.Env, an env id or a factory, got {type(env_or_id).__name__}")
        if not isinstance(env, gymnasium.Env):
            raise TypeError(f"the env factory returned a {type(env).__name__}, not a gymnasium.Env")
        self.env: gymnasium.Env[Any, Any] = env
        self.agent = agent
        self._agents = (agent,)
        self._render_fn = render
        self._parse_fn = parse
        self._action_text_fn = action_text
        self._success_fn = is_success
        self._oracle_fn = oracle
        self._default_action = default_action
        self.enforce_action_mask = enforce_action_mask
        self._forfeit_reward = float(forfeit_reward)
        self._has_random_start = has_random_start
        space = env.action_space
        if (action_names is not None or action_aliases) and not isinstance(space, spaces.Discrete):
            raise ValueError(f"action_names needs a Discrete action space, got {space}")
        self._discrete = (
            common.DiscreteMoves(space, action_names, action_aliases) if isinstance(space, spaces.Discrete) else None
        )
        if render is None:
            common.check_describable(env.observation_space, type(self).__name__)
        self.action_names: tuple[str, ...] | None = None if self._discrete is None else self._discrete.names
        supported = (spaces.Discrete, spaces.Text, spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)
        if parse is None and not isinstance(space, supported) and type(self).parse_text is GymnasiumGame.parse_text:
            raise ValueError(f"no default parser for the action space {space}; pass parse= and action_text=")
        self._observation: Any = None
        self._env_info: dict[str, Any] = {}
        self._text = ""
        self._last_reward = 0.0
        self._env_terminated = False
        self._env_truncated = False

    # ------------------------------------------------------------------ overridable text layer
    def render_observation(self, observation: Any) -> str:
        """The player's text for a raw observation (the ``render`` function or the default).

        The default shows the observation (arrays too large to read ask for ``render=``), then
        the actions and the aliases the player may use.
        """
        if self._render_fn is not None:
            return self._render_fn(observation, self.env)
        if isinstance(self.env.observation_space, spaces.Text) and isinstance(observation, str):
            return observation
        text = f"Observation: {common.describe_observation(observation, type(self).__name__)}"
        legal = self.legal_actions(self.agent) if not self.done else None
        if legal:
            text += f"\nActions: {', '.join(legal)}"
        aliases = self.answer_aliases(self.agent)
        if legal and aliases:
            text += f" (also: {', '.join(f'{alias} = {name}' for alias, name in aliases.items())})"
        return text

    def parse_text(self, text: str) -> Any:
        """An env action for ``text``, or :class:`Invalid` (the ``parse`` function or the default)."""
        if self._parse_fn is not None:
            return self._parse_fn(text)
        return common.parse_default(self.env.action_space, text, self._discrete)

    def action_to_text(self, action: Any) -> str:
        """Canonical text of an env action; :meth:`parse_text` maps it back to the action."""
        if self._action_text_fn is not None:
            return self._action_text_fn(action)
        if self._discrete is not None:  # the common case first: this runs for every legal action, every step
            return self._discrete.text(action)
        return common.default_action_text(self.env.action_space, action, None)

    def legal_moves(self) -> list[Any] | None:
        """The env actions playable now: Discrete actions narrowed by ``action_mask`` if the env gives one."""
        return common.env_legal_moves(self.env.action_space, self._env_info.get("action_mask"), self._env_info)

    def default_move(self) -> Any:
        """The action played for an invalid answer under ``on_invalid="default_action"``."""
        if self._default_action is not None:
            return self._default_action
        return super()._fallback_move(self.agent)

    def forfeit_reward(self) -> float:
        """What the player scores for a forfeit (the ``forfeit_reward`` argument)."""
        return self._forfeit_reward

    def success(self) -> bool | None:
        """Whether the finished episode counts as a success (the ``is_success`` function; None without)."""
        return None if self._success_fn is None else self._success_fn(self)

    def oracle(self) -> Any:
        """A strong env action now (the ``oracle`` function; None without)."""
        return None if self._oracle_fn is None else self._oracle_fn(self)

    # ------------------------------------------------------------------ episode state for hooks
    @property
    def observation(self) -> Any:
        """The latest raw observation of the env."""
        return self._observation

    @property
    def env_info(self) -> dict[str, Any]:
        """The info dict the env returned last."""
        return self._env_info

    @property
    def last_reward(self) -> float:
        """The env's reward for the latest step (0 if the env was not stepped)."""
        return self._last_reward

    @property
    def env_terminated(self) -> bool:
        """Whether the env itself terminated the episode (not an invalid answer, not a step limit)."""
        return self._env_terminated

    # ------------------------------------------------------------------ Game implementation
    @property
    def agents(self) -> tuple[AgentID, ...]:
        """The single agent."""
        return self._agents

    @property
    def has_random_start(self) -> bool:
        """As given to the constructor (Gymnasium envs do not say)."""
        return self._has_random_start

    def answer_aliases(self, agent: AgentID) -> Mapping[str, str]:
        """The ``action_aliases`` given to the constructor."""
        return {} if self._discrete is None else self._discrete.aliases

    def observe(self, agent: AgentID) -> str:
        """The player's current observation text."""
        self._require_agent(agent)
        self._require_tally()
        return self._text

    def state_key(self, agent: AgentID) -> Hashable:
        """The raw observation (made hashable): identical env observations share a key."""
        self._require_agent(agent)
        self._require_tally()
        return common.hashable_value(self._observation)

    def close(self) -> None:
        """Close the env."""
        self.env.close()

    def __repr__(self) -> str:
        """Show the id, the env and the options that differ from the defaults."""
        options = self.config.model_dump(exclude_defaults=True)
        return f"{type(self).__name__}({self.game_id!r}, env={self.env}, {options})"

    # ------------------------------------------------------------------ referee hooks
    def _start(self, seed: int | None, options: Mapping[str, Any]) -> dict[AgentID, dict[str, Any]]:
        self._observation, self._env_info = self.env.reset(seed=seed, options=dict(options) or None)
        self._last_reward = 0.0
        self._env_terminated = self._env_truncated = False
        return {self.agent: {"env_info": self._env_info}}

    def _to_move(self) -> tuple[AgentID, ...]:
        return self._agents

    def _read(self, agent: AgentID, text: str) -> Any:
        move = self.parse_text(text)
        if not isinstance(move, Invalid) and self._parse_fn is not None:  # the default parsers stay in the space
            move = common.check_in_space(move, self.env.action_space, self.action_to_text)
        if isinstance(move, Invalid) or not self.enforce_action_mask:
            return move
        return common.check_mask(move, self._env_info.get("action_mask"), self.legal_moves(), self.action_to_text)

    def _advance(self, moves: dict[AgentID, Any], infos: dict[AgentID, dict[str, Any]]) -> Mapping[AgentID, float]:
        self._last_reward = 0.0
        if self.agent not in moves:  # an invalid answer under "penalize": the env is not stepped
            return {}
        observation, reward, terminated, truncated, env_info = self.env.step(moves[self.agent])
        self._observation, self._env_info = observation, env_info
        self._last_reward = float(reward)
        self._env_terminated, self._env_truncated = bool(terminated), bool(truncated)
        info = infos[self.agent]
        info["env_info"] = env_info
        if isinstance(self.env.action_space, spaces.Text) and info["valid"]:
            common.env_verdict(env_info, info)
        return {self.agent: self._last_reward}

    def _world_endings(self) -> tuple[bool, bool]:
        return self._env_terminated, self._env_truncated

    def _legal_moves(self, agent: AgentID) -> Sequence[Any] | None:
        return self.legal_moves()

    def _move_text(self, agent: AgentID, move: Any) -> str:
        return self.action_to_text(move)

    def _fallback_move(self, agent: AgentID) -> Any:
        return self.default_move()

    def _forfeit_rewards(self, agent: AgentID) -> Mapping[AgentID, float]:
        return {agent: self.forfeit_reward()}

    def _success(self, agent: AgentID) -> bool | None:
        return self.success()

    def _oracle_move(self, agent: AgentID) -> Any:
        return self.oracle()

    def _refresh(self) -> None:
        self._text = self.render_observation(self._observation)

    def _require_agent(self, agent: AgentID) -> None:
        if agent != self.agent:
            raise GameError(f"unknown agent {agent!r}; this game's agent is {self.agent!r}")
