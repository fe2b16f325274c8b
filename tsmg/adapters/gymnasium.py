"""Gymnasium interop in both directions.

* :class:`GymnasiumGame` wraps any :class:`gymnasium.Env` as a single-agent text game: a
  renderer turns each observation into text and a parser turns the player's answer into an
  env action. Defaults exist for ``Discrete`` spaces (and number lists for ``Box`` /
  ``MultiDiscrete`` / ``MultiBinary`` actions); anything else takes user functions.
* :func:`to_gymnasium` exports any single-agent :class:`~tsmg.core.Game` as a Gymnasium env
  whose observation and action spaces are :class:`gymnasium.spaces.Text`.

The helpers shared with :mod:`tsmg.adapters.pettingzoo` (text spaces, option validation,
default parsing of discrete actions, describing raw observations) live here too.
"""

from __future__ import annotations

import copy
import re
import string
import sys
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec

from tsmg.core import AgentID, Game, GameConfig, GameError, Invalid, StepResult, check_answers
from tsmg.registry import make

__all__ = [
    "ACTION_MAX_LENGTH",
    "OBSERVATION_MAX_LENGTH",
    "TEXT_CHARSET",
    "GymnasiumGame",
    "TextGameEnv",
    "describe_value",
    "text_space",
    "to_gymnasium",
]

# ------------------------------------------------------------------------------ text spaces
#: Characters of the exported Text spaces: printable ASCII (with newline and tab, which every
#: multi-line observation needs) plus the typographic and box-drawing symbols text games like to
#: draw with. Anything else is replaced by ``?`` (with a warning) so observations stay in the space.
TEXT_CHARSET: str = string.printable + "".join(
    sorted(set("…–—‘’“”«»·•×÷°±§¶→←↑↓↔─│┌┐└┘├┤┬┴┼═║╔╗╚╝█░▒▓■□▪▫●○◆◇★☆✓✗♠♥♦♣♟♜♞♝♛♚♙"))
)
#: Longest observation the exported spaces admit (catalog renders are a few hundred characters).
OBSERVATION_MAX_LENGTH = 8192
#: Longest action text the exported spaces admit (answers are names, numbers or short phrases).
ACTION_MAX_LENGTH = 256
_STRIP = " \t\r\n.!\"'`*"
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
ConfigT = TypeVar("ConfigT", bound=GameConfig)


def text_space(max_length: int, charset: str = TEXT_CHARSET, min_length: int = 0) -> spaces.Text:
    """A :class:`gymnasium.spaces.Text` space over ``charset`` (empty text allowed by default)."""
    return spaces.Text(max_length, min_length=min_length, charset=charset)


class TextFitter:
    """Makes text lie in a Text space: unknown characters become ``?``, overlong text is cut.

    Warns once per kind of problem and owner, because a render that needs fitting is a setting to
    fix (a larger ``observation_max_length`` or ``charset``), not something to repeat every step.
    """

    def __init__(self, space: spaces.Text, owner: str) -> None:
        self.space = space
        self.owner = owner
        self._warned: set[str] = set()

    def __call__(self, text: str) -> str:
        space = self.space
        if space.contains(text):
            return text
        known = space.character_set
        if any(character not in known for character in text):
            bad = sorted({character for character in text if character not in known})[:10]
            self._warn("charset", f"{self.owner}: characters {bad!r} are outside the Text charset; shown as '?'")
            text = "".join(character if character in known else "?" for character in text)
        if len(text) > space.max_length:
            self._warn(
                "length",
                f"{self.owner}: text of {len(text)} characters cut to max_length={space.max_length}",
            )
            text = text[: space.max_length]
        return text.ljust(space.min_length)

    def _warn(self, kind: str, message: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(message, stacklevel=3)


# ------------------------------------------------------------------------------ shared helpers
def build_config(config_cls: type[ConfigT], config: GameConfig | None, options: Mapping[str, Any]) -> ConfigT:
    """Validate game options the way :class:`~tsmg.core.RulesGame` does (unknown names rejected).

    Raises:
        pydantic.ValidationError: An option is unknown or has a bad value (the registry turns
            it into a :class:`~tsmg.registry.GameOptionsError` that names the valid options).
        TypeError: ``config`` is not a ``config_cls``.
    """
    if config is None:
        return config_cls(**options)
    if options:
        config = config_cls.model_validate({**config.model_dump(), **options})
    if not isinstance(config, config_cls):
        raise TypeError(f"expected a {config_cls.__name__}, got {type(config).__name__}")
    return config


def describe_value(value: Any) -> str:
    """Readable text for a raw observation: numbers, arrays, tuples and dicts, nested.

    Example:
        >>> print(describe_value({"position": np.array([1, 2]), "carrying": True}))
        position: [1, 2]
        carrying: True
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        return f"{float(value):g}"
    if isinstance(value, np.ndarray):
        return np.array2string(value, separator=", ", threshold=sys.maxsize)
    if isinstance(value, Mapping):
        return "\n".join(f"{key}: {describe_value(item)}" for key, item in value.items())
    if isinstance(value, tuple | list):
        inner = ", ".join(describe_value(item) for item in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    return str(value)


def hashable_value(value: Any) -> Hashable:
    """A hashable equivalent of a raw observation (for state keys)."""
    if isinstance(value, np.ndarray):
        return (value.shape, tuple(value.ravel().tolist()))
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return tuple((key, hashable_value(item)) for key, item in value.items())
    if isinstance(value, tuple | list):
        return tuple(hashable_value(item) for item in value)
    if isinstance(value, Hashable):
        return value
    return repr(value)


def shorten(text: str, limit: int = 40) -> str:
    """``text`` cut to ``limit`` characters for error messages."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def discrete_actions(space: spaces.Discrete) -> list[int]:
    """Every action of a Discrete space, in order."""
    start = int(space.start)
    return list(range(start, start + int(space.n)))


def discrete_action_text(space: spaces.Discrete, action: Any, names: Sequence[str] | None) -> str:
    """Canonical text of a Discrete action: its name, or its integer."""
    if names is not None:
        return names[int(action) - int(space.start)]
    return str(int(action))


def discrete_lookup(
    space: spaces.Discrete, names: Sequence[str], aliases: Mapping[str, int] | None = None
) -> dict[str, int]:
    """Lower-case action name (or alias) to Discrete action."""
    lookup = {name.lower(): action for name, action in zip(names, discrete_actions(space), strict=True)}
    if aliases:
        lookup.update({alias.lower(): action for alias, action in aliases.items()})
    return lookup


def parse_discrete(
    space: spaces.Discrete,
    text: str,
    names: Sequence[str] | None,
    aliases: Mapping[str, int] | None = None,
    lookup: Mapping[str, int] | None = None,
) -> int | Invalid:
    """Parse a Discrete action: a name or alias (any case or spacing; stray punctuation ignored), else an integer.

    Integers are accepted only when the actions have no names. ``lookup`` (from
    :func:`discrete_lookup`) saves rebuilding the name table on every call.
    """
    cleaned = " ".join(text.strip(_STRIP).lower().split())
    if names is not None:
        if lookup is None:
            lookup = discrete_lookup(space, names, aliases)
        if cleaned in lookup:
            return lookup[cleaned]
        return Invalid(f"expected one of {', '.join(names)}; got {shorten(text)!r}")
    first, last = int(space.start), int(space.start + space.n - 1)
    if re.fullmatch(r"[-+]?\d+", cleaned) and first <= int(cleaned) <= last:
        return int(cleaned)
    return Invalid(f"expected an integer from {first} to {last}; got {shorten(text)!r}")


def parse_numbers(space: spaces.Space[Any], text: str) -> Any:
    """Parse a Box / MultiDiscrete / MultiBinary action written as numbers (commas, spaces, brackets)."""
    numbers = _NUMBER.findall(text)
    leftover = _NUMBER.sub(" ", text).translate(str.maketrans("", "", "[](),;")).strip()
    shape = space.shape or ()
    size = int(np.prod(shape)) if shape else 1
    if leftover or len(numbers) != size:
        return Invalid(f"expected {size} number(s) separated by spaces or commas; got {shorten(text)!r}")
    try:
        action = np.asarray([float(number) for number in numbers], dtype=space.dtype).reshape(shape)
    except (ValueError, OverflowError) as error:
        return Invalid(f"could not read {shorten(text)!r} as numbers: {error}")
    if not space.contains(action):
        return Invalid(f"{shorten(text)!r} is outside the action space {space}")
    return action


def number_text(action: Any) -> str:
    """Canonical text of a numeric array action: its numbers separated by spaces."""
    return " ".join(describe_value(value) for value in np.asarray(action).ravel())


def env_verdict(env_info: Mapping[str, Any], info: dict[str, Any]) -> None:
    """Take over the env's own verdict on a text answer (``valid``/``reason``/``action`` in its info).

    Envs with a Text action space parse the answer themselves; the envs this package exports
    report the outcome under these keys, so wrapping one again keeps the validity information.
    """
    if env_info.get("valid") is False:
        info["valid"] = False
        info["reason"] = env_info.get("reason")
        info["action"] = env_info.get("action")
    elif isinstance(env_info.get("action"), str):
        info["action"] = env_info["action"]


def _text_legal_actions(env_info: Mapping[str, Any]) -> list[str] | None:
    legal = env_info.get("legal_actions")
    if isinstance(legal, list) and all(isinstance(action, str) for action in legal):
        return list(legal)
    return None


def mask_filter(actions: list[int], space: spaces.Discrete, mask: Any) -> list[int]:
    """The Discrete ``actions`` that ``mask`` allows (all of them if the mask has the wrong shape)."""
    mask = np.asarray(mask)
    if mask.shape != (int(space.n),):
        return actions
    start = int(space.start)
    return [action for action in actions if mask[action - start]]


# ------------------------------------------------------------------------------ wrap into tsmg
class GymnasiumGame(Game):
    """A Gymnasium env played as a single-agent text game.

    The text layer is two user functions (or the defaults): ``render(observation, env) -> str``
    and ``parse(text) -> action | Invalid``. Subclasses may override :meth:`render_observation`,
    :meth:`parse_text`, :meth:`action_to_text`, :meth:`success` and :meth:`oracle` instead.

    Episodes follow the env: ``reset(seed)`` calls ``env.reset(seed=seed)`` (so the same seed and
    the same answers give the same episode), Gymnasium's ``terminated`` / ``truncated`` pass
    through unchanged, and the ``max_steps`` option adds a truncation of its own. Invalid answers
    follow the options of :class:`~tsmg.core.GameConfig`: under ``penalize`` the env is not
    stepped (the turn is used up, the observation stays), under ``default_action`` the default
    action is played, under ``terminate`` the episode ends; each subtracts ``invalid_penalty``.

    Args:
        env_or_id: A Gymnasium env, a registered Gymnasium id (built with ``gymnasium.make``) or
            a function returning an env.
        render: ``render(observation, env) -> str``; by default ``"Observation: 3"`` plus the
            list of actions (Text observations are shown as they are).
        parse: ``parse(text) -> action | Invalid``; must not raise (an exception becomes an
            invalid answer). By default Discrete actions are read by name (``action_names``) or
            as integers, numeric arrays as numbers, Text actions as they are.
        action_names: Names of Discrete actions in order (e.g. ``["left", "down", ...]``).
        agent: The id of the single agent.
        action_aliases: More names the default parser accepts, mapped to their actions
            (e.g. ``{"stand": 0}``); canonical texts stay the ``action_names``.
        action_text: ``action_text(action) -> str``, the canonical text of an action (needed
            with a custom ``parse`` on spaces the defaults do not cover).
        is_success: ``is_success(game) -> bool | None``, evaluated at the end of an episode.
        oracle: ``oracle(game) -> action | None``, a strong action in the current state.
        default_action: Action played under ``on_invalid="default_action"`` (default: the
            first legal action).
        enforce_action_mask: Treat actions outside the ``action_mask`` of the env's info as
            invalid answers (by default the mask only narrows :meth:`legal_actions`).
        has_random_start: Whether different seeds give different first observations.
        make_kwargs: Keyword arguments for ``gymnasium.make`` when ``env_or_id`` is an id.
        config: A :class:`~tsmg.core.GameConfig`; alternatively pass its fields as ``options``.
        **options: ``max_steps``, ``on_invalid``, ``invalid_penalty`` (validated; unknown names
            are rejected).

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

    Config: ClassVar[type[GameConfig]] = GameConfig
    turn_based: ClassVar[bool] = True

    def __init__(
        self,
        env_or_id: gymnasium.Env[Any, Any] | str | Callable[[], gymnasium.Env[Any, Any]],
        render: Callable[[Any, gymnasium.Env[Any, Any]], str] | None = None,
        parse: Callable[[str], Any] | None = None,
        action_names: Sequence[str] | None = None,
        agent: AgentID = "player",
        *,
        action_aliases: Mapping[str, Any] | None = None,
        action_text: Callable[[Any], str] | None = None,
        is_success: Callable[[GymnasiumGame], bool | None] | None = None,
        oracle: Callable[[GymnasiumGame], Any] | None = None,
        default_action: Any = None,
        enforce_action_mask: bool = False,
        has_random_start: bool = False,
        make_kwargs: Mapping[str, Any] | None = None,
        config: GameConfig | None = None,
        **options: Any,
    ) -> None:
        """Wrap the env; see the class docstring for the arguments."""
        self.config = build_config(self.Config, config, options)
        self._name_lookup: dict[str, int] | None = None  # built on the first parse
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
        self._render_fn = render
        self._parse_fn = parse
        self._action_text_fn = action_text
        self._success_fn = is_success
        self._oracle_fn = oracle
        self._default_action = default_action
        self.enforce_action_mask = enforce_action_mask
        self._has_random_start = has_random_start
        space = env.action_space
        if action_names is not None:
            if not isinstance(space, spaces.Discrete) or len(action_names) != int(space.n):
                raise ValueError(
                    f"action_names needs a Discrete action space with {len(action_names)} actions, got {space}"
                )
            action_names = tuple(action_names)
        self.action_names: tuple[str, ...] | None = action_names
        self.action_aliases: dict[str, Any] = dict(action_aliases or {})
        supported = (spaces.Discrete, spaces.Text, spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)
        if parse is None and not isinstance(space, supported) and type(self).parse_text is GymnasiumGame.parse_text:
            raise ValueError(f"no default parser for the action space {space}; pass parse= and action_text=")
        self._started = False
        self._observation: Any = None
        self._env_info: dict[str, Any] = {}
        self._text = ""
        self._rounds = 0
        self._return = 0.0
        self._last_reward = 0.0
        self._env_terminated = False
        self._env_truncated = False
        self._forced_end = False
        self._limit_reached = False

    # ------------------------------------------------------------------ overridable text layer
    def render_observation(self, observation: Any) -> str:
        """The player's text for a raw observation (the ``render`` function or the default)."""
        if self._render_fn is not None:
            return self._render_fn(observation, self.env)
        if isinstance(self.env.observation_space, spaces.Text) and isinstance(observation, str):
            return observation
        text = f"Observation: {describe_value(observation)}"
        legal = self.legal_actions(self.agent) if not self.done else None
        if legal:
            text += f"\nActions: {', '.join(legal)}"
        return text

    def parse_text(self, text: str) -> Any:
        """An env action for ``text``, or :class:`Invalid` (the ``parse`` function or the default)."""
        if self._parse_fn is not None:
            return self._parse_fn(text)
        space = self.env.action_space
        if isinstance(space, spaces.Discrete):
            if self.action_names is not None and self._name_lookup is None:
                self._name_lookup = discrete_lookup(space, self.action_names, self.action_aliases)
            return parse_discrete(space, text, self.action_names, self.action_aliases, self._name_lookup)
        if isinstance(space, spaces.Text):
            if space.contains(text):
                return text
            return Invalid(f"the answer must be at most {space.max_length} characters from the env's charset")
        return parse_numbers(space, text)

    def action_to_text(self, action: Any) -> str:
        """Canonical text of an env action; :meth:`parse_text` maps it back to the action."""
        if self._action_text_fn is not None:
            return self._action_text_fn(action)
        space = self.env.action_space
        if isinstance(space, spaces.Discrete):
            return discrete_action_text(space, action, self.action_names)
        if isinstance(action, str):
            return action
        return number_text(action)

    def legal_moves(self) -> list[Any] | None:
        """The env actions playable now: Discrete actions narrowed by ``action_mask`` if the env gives one."""
        space = self.env.action_space
        if isinstance(space, spaces.Discrete):
            actions = discrete_actions(space)
            mask = self._env_info.get("action_mask")
            return actions if mask is None else mask_filter(actions, space, mask)
        if isinstance(space, spaces.Text):
            return _text_legal_actions(self._env_info)
        return None

    def default_move(self) -> Any:
        """The action played for an invalid answer under ``on_invalid="default_action"``."""
        if self._default_action is not None:
            return self._default_action
        moves = self.legal_moves()
        if not moves:
            raise GameError(f"{type(self).__name__} cannot enumerate actions; pass default_action= or use 'penalize'")
        return moves[0]

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

    @property
    def rounds(self) -> int:
        """Answers played in the current episode."""
        return self._rounds

    def episode_returns(self) -> dict[AgentID, float]:
        """Cumulative reward of the player in the current episode."""
        return {self.agent: self._return}

    # ------------------------------------------------------------------ Game implementation
    @property
    def agents(self) -> tuple[AgentID, ...]:
        """The single agent."""
        return (self.agent,)

    @property
    def done(self) -> bool:
        """Whether the current episode has ended."""
        return self._started and (
            self._env_terminated or self._env_truncated or self._forced_end or self._limit_reached
        )

    @property
    def active_agents(self) -> tuple[AgentID, ...]:
        """The player while the episode runs, else nobody."""
        self._require_started()
        return () if self.done else (self.agent,)

    @property
    def has_random_start(self) -> bool:
        """As given to the constructor (Gymnasium envs do not say)."""
        return self._has_random_start

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[dict[AgentID, str], dict[AgentID, dict[str, Any]]]:
        """Reset the env with ``seed`` (None continues its generator, as in Gymnasium)."""
        observation, env_info = self.env.reset(seed=seed, options=dict(options) if options is not None else None)
        self._started = True
        self._rounds = 0
        self._return = 0.0
        self._last_reward = 0.0
        self._env_terminated = self._env_truncated = self._forced_end = self._limit_reached = False
        self._observe(observation, env_info)
        return {self.agent: self._text}, {self.agent: {"env_info": env_info}}

    def step(self, actions: Mapping[AgentID, str | Invalid]) -> StepResult:
        """Play the player's answer; see :meth:`tsmg.core.Game.step`."""
        self._require_started()
        if self.done:
            raise GameError("the episode is over; call reset() before step()")
        check_answers(self.active_agents, actions)
        config = self.config
        answer = actions[self.agent]
        parsed = answer if isinstance(answer, Invalid) else self.parse(self.agent, answer)
        if not isinstance(parsed, Invalid) and self.enforce_action_mask:
            parsed = self._check_mask(parsed)
        reward = 0.0
        info: dict[str, Any]
        move: Any = None
        if isinstance(parsed, Invalid):
            reward -= config.invalid_penalty
            info = {"action": None, "valid": False, "reason": parsed.reason}
            if config.on_invalid == "default_action":
                move = self.default_move()
                info["action"] = self.action_to_text(move)
            elif config.on_invalid == "terminate":
                self._forced_end = True
        else:
            move = parsed
            info = {"action": self.action_to_text(move), "valid": True, "reason": None}
        self._last_reward = 0.0
        if move is not None:
            observation, env_reward, terminated, truncated, env_info = self.env.step(move)
            self._last_reward = float(env_reward)
            reward += self._last_reward
            self._env_terminated = bool(terminated)
            self._env_truncated = bool(truncated)
            info["env_info"] = env_info
            if isinstance(self.env.action_space, spaces.Text) and info["valid"]:
                env_verdict(env_info, info)
            self._observation, self._env_info = observation, env_info
        self._rounds += 1
        self._return += reward
        max_steps = config.max_steps
        self._limit_reached = max_steps is not None and self._rounds >= max_steps
        self._text = self.render_observation(self._observation)
        terminated_now = self._env_terminated or self._forced_end
        truncated_now = not terminated_now and (self._env_truncated or self._limit_reached)
        agent = self.agent
        return StepResult(
            {agent: self._text}, {agent: reward}, {agent: terminated_now}, {agent: truncated_now}, {agent: info}
        )

    def observe(self, agent: AgentID) -> str:
        """The player's current observation text."""
        self._require_agent(agent)
        self._require_started()
        return self._text

    def parse(self, agent: AgentID, text: str) -> Any:
        """Parse ``text`` into an env action or :class:`Invalid`; never raises."""
        if agent != self.agent:
            return Invalid(f"unknown agent {agent!r}")
        if not isinstance(text, str):
            return Invalid(f"expected text, got {type(text).__name__}")
        try:
            return self.parse_text(text)
        except Exception as error:  # a parser bug must not crash a rollout
            return Invalid(f"parser error: {error!r}")

    def legal_actions(self, agent: AgentID) -> list[str] | None:
        """Canonical texts of the playable actions (honouring an ``action_mask``), or None."""
        self._require_agent(agent)
        self._require_started()
        if self.done:
            return []
        moves = self.legal_moves()
        return None if moves is None else [self.action_to_text(move) for move in moves]

    def state_key(self, agent: AgentID) -> Hashable:
        """The raw observation (made hashable): identical env observations share a key."""
        self._require_agent(agent)
        self._require_started()
        return hashable_value(self._observation)

    def is_success(self, agent: AgentID) -> bool | None:
        """The ``success`` hook; False when the episode was ended by an invalid answer."""
        self._require_agent(agent)
        if not self._started:
            return None
        return False if self._forced_end else self.success()

    def oracle_action(self, agent: AgentID) -> str | None:
        """Text of the oracle's action now (None without oracle or once the episode is over)."""
        self._require_agent(agent)
        self._require_started()
        if self.done:
            return None
        move = self.oracle()
        return None if move is None else self.action_to_text(move)

    def close(self) -> None:
        """Close the env."""
        self.env.close()

    def __repr__(self) -> str:
        """Show the id, the env and the options that differ from the defaults."""
        options = self.config.model_dump(exclude_defaults=True)
        return f"{type(self).__name__}({self.game_id!r}, env={self.env}, {options})"

    # ------------------------------------------------------------------ helpers
    def _observe(self, observation: Any, env_info: dict[str, Any]) -> None:
        self._observation, self._env_info = observation, env_info
        self._text = self.render_observation(observation)

    def _check_mask(self, action: Any) -> Any:
        if self._env_info.get("action_mask") is None:
            return action  # without a mask the env itself judges the action (e.g. Text action spaces)
        legal = self.legal_moves()
        if legal is None or any(same_action(action, move) for move in legal):
            return action
        allowed = ", ".join(self.action_to_text(move) for move in legal)
        return Invalid(f"{self.action_to_text(action)} is not allowed now (allowed: {allowed})")

    def _require_started(self) -> None:
        if not self._started:
            raise GameError("no episode in progress; call reset() first")

    def _require_agent(self, agent: AgentID) -> None:
        if agent != self.agent:
            raise GameError(f"unknown agent {agent!r}; this game's agent is {self.agent!r}")


def same_action(first: Any, second: Any) -> bool:
    """Whether two env actions are equal (scalars or arrays)."""
    return bool(np.array_equal(np.asarray(first), np.asarray(second)))


# ------------------------------------------------------------------------------ export to Gymnasium
class TextGameEnv(gymnasium.Env[str, str]):
    """A single-agent :class:`~tsmg.core.Game` as a Gymnasium env with Text spaces.

    Observations are the game's text (characters outside ``charset`` become ``?`` and overlong
    text is cut, each with a one-time warning, so they always lie in the observation space);
    actions are answer text. Any text is accepted: an answer the game cannot parse is handled by
    the game's invalid-answer rule (``on_invalid``), never by an exception, so actions sampled from
    the action space are safe. ``info`` holds the game's per-step info (``action``, ``valid``,
    ``reason``) plus ``legal_actions``, the canonical texts of the actions playable next.

    ``reset(seed=s)`` resets the game with the same seed, so the env replays the game's episodes
    exactly. Built from a registered id, the env gets a Gymnasium ``spec`` (``tsmg/<id>``), so
    ``spec.make()`` rebuilds it.

    Args:
        game: A single-agent game, or a registered tsmg id (made with ``game_options``).
        render_mode: None or ``"ansi"`` (``render()`` returns the observation text).
        observation_max_length: ``max_length`` of the observation space.
        action_max_length: ``max_length`` of the action space.
        charset: Characters of both spaces.
        game_options: Options for :func:`tsmg.make` when ``game`` is an id.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        game: Game | str,
        render_mode: str | None = None,
        *,
        observation_max_length: int = OBSERVATION_MAX_LENGTH,
        action_max_length: int = ACTION_MAX_LENGTH,
        charset: str = TEXT_CHARSET,
        game_options: Mapping[str, Any] | None = None,
    ) -> None:
        """Wrap ``game``; see the class docstring for the arguments."""
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if isinstance(game, str):
            game_id = game
            game = make(game_id, **dict(game_options or {}))
            spec_id = game_id if "/" in game_id else f"tsmg/{game_id}"
            self.spec = EnvSpec(
                id=spec_id,
                entry_point=_make_text_env,
                kwargs={
                    "game": game_id,
                    "game_options": dict(game_options or {}),
                    "observation_max_length": observation_max_length,
                    "action_max_length": action_max_length,
                    "charset": charset,
                },
            )
        elif game_options:
            raise TypeError("game_options only apply when the game is given by its id")
        if len(game.agents) != 1:
            raise ValueError(
                f"to_gymnasium needs a single-agent game; {game.game_id} has agents {list(game.agents)} "
                "(use to_pettingzoo_aec / to_pettingzoo_parallel)"
            )
        self.game = game
        self.agent = game.agents[0]
        self.render_mode = render_mode
        self.observation_space = text_space(observation_max_length, charset)
        self.action_space = text_space(action_max_length, charset, min_length=1)
        self._fit = TextFitter(self.observation_space, f"to_gymnasium({game.game_id})")

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Reset the game with ``seed``; returns the observation text and info (with ``legal_actions``)."""
        super().reset(seed=seed)
        observations, infos = self.game.reset(seed=seed, options=options)
        return self._fit(observations[self.agent]), self._info(infos.get(self.agent, {}))

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Submit answer text; a non-text action counts as an invalid answer."""
        answer: str | Invalid = action
        if not isinstance(action, str | Invalid):
            answer = Invalid(f"expected text, got {type(action).__name__}")
        result = self.game.step({self.agent: answer})
        agent = self.agent
        return (
            self._fit(result.observations[agent]),
            float(result.rewards[agent]),
            bool(result.terminated[agent]),
            bool(result.truncated[agent]),
            self._info(result.infos.get(agent, {})),
        )

    def render(self) -> str | None:
        """The current observation text in ``"ansi"`` mode (None without render mode)."""
        if self.render_mode != "ansi":
            return None
        return self._fit(self.game.observe(self.agent))

    def close(self) -> None:
        """Close the game."""
        self.game.close()

    def _info(self, game_info: Mapping[str, Any]) -> dict[str, Any]:
        # Deep copies: Gymnasium promises the caller fresh objects on every call.
        info = copy.deepcopy(dict(game_info))
        legal = self.game.legal_actions(self.agent)
        info["legal_actions"] = None if legal is None else list(legal)
        return info


def _make_text_env(**kwargs: Any) -> TextGameEnv:
    """Entry point of the Gymnasium specs of exported games (rebuilds the env from its id)."""
    return TextGameEnv(**kwargs)


def to_gymnasium(
    game: Game | str,
    *,
    render_mode: str | None = None,
    observation_max_length: int = OBSERVATION_MAX_LENGTH,
    action_max_length: int = ACTION_MAX_LENGTH,
    charset: str = TEXT_CHARSET,
    **game_options: Any,
) -> TextGameEnv:
    """Export a single-agent game as a Gymnasium env with Text observation and action spaces.

    Args:
        game: The game, or its registered id (then ``game_options`` go to :func:`tsmg.make` and
            the env gets a Gymnasium spec).
        render_mode: None or ``"ansi"``.
        observation_max_length: Longest observation text (longer text is cut, with a warning).
        action_max_length: Longest action text of the action space.
        charset: Characters of both spaces (others are shown as ``?``, with a warning).
        **game_options: Options of the game when it is given by id.

    Returns:
        A :class:`TextGameEnv`.

    Example:
        >>> env = to_gymnasium("FrozenLake-v0")
        >>> observation, info = env.reset(seed=0)
        >>> info["legal_actions"]
        ['left', 'down', 'right', 'up']
        >>> observation, reward, terminated, truncated, info = env.step("teleport")
        >>> info["valid"], reward, terminated
        (False, 0.0, False)
    """
    return TextGameEnv(
        game,
        render_mode,
        observation_max_length=observation_max_length,
        action_max_length=action_max_length,
        charset=charset,
        game_options=game_options or None,
    )
