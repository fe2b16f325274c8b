"""Any tsmg game as a Gymnasium or PettingZoo env with Text observation and action spaces.

* :func:`to_gymnasium` (:class:`TextGameEnv`): a single-agent game as a :class:`gymnasium.Env`;
* :func:`to_pettingzoo_aec` (:class:`TextAECEnv`) and :func:`to_pettingzoo_parallel`
  (:class:`TextParallelEnv`): any game as a PettingZoo env.

Each takes a game or a registered id (made with the remaining keyword options). Any text is an
action: what the game cannot read is an invalid answer, handled by the game's own rule, so
actions sampled from the action space never raise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec
from pettingzoo import AECEnv, ParallelEnv

from tsmg.adapters.common import (
    ACTION_MAX_LENGTH,
    OBSERVATION_MAX_LENGTH,
    TEXT_CHARSET,
    TextFitter,
    as_answer,
    check_render_mode,
    export_info,
    game_from,
    text_space,
)
from tsmg.core import AgentID, Game, Invalid


class TextObservation(str):
    """Observation text that also carries the NumPy dtype of :class:`gymnasium.spaces.Text`.

    PettingZoo's ``api_test`` compares ``observation.dtype`` with ``observation_space.dtype``;
    a plain ``str`` has no ``dtype``, so exported envs hand out this ``str`` subclass instead.
    It behaves as a ``str`` everywhere else.
    """

    __slots__ = ()
    dtype: ClassVar[np.dtype[Any]] = np.dtype(str)


@dataclass(frozen=True)
class TextSpaces:
    """The settings of an exported env's Text spaces (keyword options of every export).

    Attributes:
        observation_max_length: Longest observation text (longer text is cut, with a warning).
        action_max_length: Longest action text of the action space.
        charset: Characters of both spaces (others are shown as ``?``, with a warning).
    """

    observation_max_length: int = OBSERVATION_MAX_LENGTH
    action_max_length: int = ACTION_MAX_LENGTH
    charset: str = TEXT_CHARSET

    @classmethod
    def split(cls, options: Mapping[str, Any]) -> tuple[TextSpaces, dict[str, Any]]:
        """These settings from ``options``, and the rest (the game's options)."""
        own = {field.name for field in fields(cls)}
        text = cls(**{name: value for name, value in options.items() if name in own})
        return text, {name: value for name, value in options.items() if name not in own}


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
        game: A single-agent game, or a registered tsmg id.
        render_mode: None or ``"ansi"`` (``render()`` returns the observation text).
        **options: The Text spaces' settings (:class:`TextSpaces`: ``observation_max_length``,
            ``action_max_length``, ``charset``); any other option goes to :func:`tsmg.make` when
            ``game`` is an id.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, game: Game | str, render_mode: str | None = None, **options: Any) -> None:
        """Wrap ``game``; see the class docstring for the arguments."""
        check_render_mode(render_mode)
        if isinstance(game, str):
            kwargs = {"game": game, **options}
            self.spec = EnvSpec(id=game if "/" in game else f"tsmg/{game}", entry_point=_make_text_env, kwargs=kwargs)
        text, game_options = TextSpaces.split(options)
        game = game_from(game, game_options)
        if len(game.agents) != 1:
            raise ValueError(
                f"to_gymnasium needs a single-agent game; {game.game_id} has agents {list(game.agents)} "
                "(use to_pettingzoo_aec / to_pettingzoo_parallel)"
            )
        self.game = game
        self.agent = game.agents[0]
        self.render_mode = render_mode
        self.observation_space = text_space(text.observation_max_length, text.charset)
        self.action_space = text_space(text.action_max_length, text.charset, min_length=1)
        self._fit = TextFitter(self.observation_space, f"to_gymnasium({game.game_id})")

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Reset the game with ``seed``; returns the observation text and info (with ``legal_actions``)."""
        super().reset(seed=seed)
        observations, infos = self.game.reset(seed=seed, options=options)
        return self._fit(observations[self.agent]), export_info(self.game, self.agent, infos.get(self.agent, {}))

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Submit answer text; a non-text action counts as an invalid answer."""
        result = self.game.step({self.agent: as_answer(action)})
        agent = self.agent
        return (
            self._fit(result.observations[agent]),
            float(result.rewards[agent]),
            bool(result.terminated[agent]),
            bool(result.truncated[agent]),
            export_info(self.game, agent, result.infos.get(agent, {})),
        )

    def render(self) -> str | None:
        """The current observation text in ``"ansi"`` mode (None without render mode)."""
        if self.render_mode != "ansi":
            return None
        return self._fit(self.game.observe(self.agent))

    def close(self) -> None:
        """Close the game."""
        self.game.close()


def _make_text_env(**kwargs: Any) -> TextGameEnv:
    """Entry point of the Gymnasium specs of exported games (rebuilds the env from its id)."""
    return TextGameEnv(**kwargs)


def to_gymnasium(game: Game | str, **options: Any) -> TextGameEnv:
    """Export a single-agent game as a Gymnasium env with Text observation and action spaces.

    Args:
        game: The game, or its registered id (then the env gets a Gymnasium spec).
        **options: ``render_mode`` (None or ``"ansi"``), the Text spaces' settings
            (:class:`TextSpaces`), and, for an id, the game's options.

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
    return TextGameEnv(game, **options)


# ------------------------------------------------------------------------------ export to PettingZoo
class _AgentSpaces:
    """Text observation/action spaces per agent, created once (PettingZoo wants the same objects)."""

    def __init__(self, game: Game, text: TextSpaces) -> None:
        self.observation = {agent: text_space(text.observation_max_length, text.charset) for agent in game.agents}
        self.action = {agent: text_space(text.action_max_length, text.charset, min_length=1) for agent in game.agents}
        self.fit = TextFitter(next(iter(self.observation.values())), f"PettingZoo export of {game.game_id}")

    def observation_of(self, game: Game, agent: AgentID) -> TextObservation:
        return TextObservation(self.fit(game.observe(agent)))


def _render_game(game: Game, fit: Callable[[str], str]) -> str:
    return "\n\n".join(f"[{agent}]\n{fit(game.observe(agent))}" for agent in game.agents)


class _PettingZooExport:
    """What both PettingZoo exports share: the game, a Text space per agent, ``ansi`` rendering."""

    def _wrap(self, game: Game | str, render_mode: str | None, options: dict[str, Any]) -> None:
        text, game_options = TextSpaces.split(options)
        game = game_from(game, game_options)
        check_render_mode(render_mode)
        self.game = game
        self.render_mode = render_mode
        self.metadata = {"render_modes": ["ansi"], "name": f"tsmg/{game.game_id}", "is_parallelizable": True}
        self.possible_agents: list[AgentID] = list(game.agents)
        self.agents: list[AgentID] = []
        self._spaces = _AgentSpaces(game, text)

    def observation_space(self, agent: AgentID) -> spaces.Text:
        """The agent's Text observation space (always the same object)."""
        return self._spaces.observation[agent]

    def action_space(self, agent: AgentID) -> spaces.Text:
        """The agent's Text action space (always the same object)."""
        return self._spaces.action[agent]

    def render(self) -> str | None:
        """Every agent's observation text in ``"ansi"`` mode (None without render mode)."""
        return _render_game(self.game, self._spaces.fit) if self.render_mode == "ansi" else None

    def close(self) -> None:
        """Close the game."""
        self.game.close()


class TextAECEnv(_PettingZooExport, AECEnv[AgentID, str, str]):
    """Any :class:`~tsmg.core.Game` as a PettingZoo AEC env with Text spaces.

    Turn-based games select their active agent; in simultaneous games the agents answer one
    after another and the game steps once all of them have answered (rewards appear then).
    Observations are :class:`TextObservation` strings; actions are answer text, and any text
    (or ``None`` for a live agent) is handled by the game's invalid-answer rule. ``infos[agent]``
    holds the game's per-step info plus ``legal_actions``.
    """

    def __init__(self, game: Game | str, render_mode: str | None = None, **options: Any) -> None:
        """Wrap ``game`` (or make the id with the game's options); ``options`` as :class:`TextGameEnv`'s."""
        AECEnv.__init__(self)
        self._wrap(game, render_mode, options)
        self.rewards: dict[AgentID, float] = {}
        self._cumulative_rewards: dict[AgentID, float] = {}
        self.terminations: dict[AgentID, bool] = {}
        self.truncations: dict[AgentID, bool] = {}
        self.infos: dict[AgentID, dict[str, Any]] = {}
        self.agent_selection = self.possible_agents[0]
        self._answers: dict[AgentID, str | Invalid] = {}

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Reset the game with ``seed`` and select its first active agent."""
        _, infos = self.game.reset(seed=seed, options=options)
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {agent: export_info(self.game, agent, infos.get(agent, {})) for agent in self.agents}
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
        self._answers[agent] = as_answer(action)
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
            self.infos[other] = export_info(self.game, other, result.infos.get(other, {}))
        self._accumulate_rewards()
        if not over:
            self.agent_selection = self._next_agent()
        self._deads_step_first()

    def _next_agent(self) -> AgentID:
        waiting = [agent for agent in self.game.active_agents if agent not in self._answers]
        return waiting[0] if waiting else self.agent_selection


class TextParallelEnv(_PettingZooExport, ParallelEnv[AgentID, str, str]):
    """Any :class:`~tsmg.core.Game` as a PettingZoo Parallel env with Text spaces.

    Every live agent may send an action each step, but only the game's active agents are heard:
    in a turn-based game the actions of agents whose turn it is not are **ignored** (their
    ``infos`` say whose turn it is through ``legal_actions``, which is empty for them). An active
    agent without an action counts as an invalid answer (``"no action given"``).
    """

    def __init__(self, game: Game | str, render_mode: str | None = None, **options: Any) -> None:
        """Wrap ``game`` (or make the id with the game's options); ``options`` as :class:`TextGameEnv`'s."""
        self._wrap(game, render_mode, options)

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[AgentID, TextObservation], dict[AgentID, dict[str, Any]]]:
        """Reset the game with ``seed``; every agent's observation and info."""
        _, infos = self.game.reset(seed=seed, options=options)
        self.agents = list(self.possible_agents)
        observations = {agent: self._spaces.observation_of(self.game, agent) for agent in self.agents}
        return observations, {agent: export_info(self.game, agent, infos.get(agent, {})) for agent in self.agents}

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
        answers = {agent: as_answer(actions.get(agent)) for agent in game.active_agents}
        result = game.step(answers)
        live = self.agents
        over = game.done
        observations = {agent: self._spaces.observation_of(game, agent) for agent in live}
        rewards = {agent: float(result.rewards.get(agent, 0.0)) for agent in live}
        terminations = {agent: bool(result.terminated.get(agent, False)) for agent in live}
        truncations = {
            agent: bool(result.truncated.get(agent, False)) or (over and not terminations[agent]) for agent in live
        }
        infos = {agent: export_info(game, agent, result.infos.get(agent, {})) for agent in live}
        self.agents = [agent for agent in live if not (terminations[agent] or truncations[agent])]
        return observations, rewards, terminations, truncations, infos


def to_pettingzoo_aec(game: Game | str, **options: Any) -> TextAECEnv:
    """Export a game as a PettingZoo AEC env with Text spaces (see :class:`TextAECEnv`).

    ``game`` may be a registered id; ``options`` are those of :func:`to_gymnasium`.

    Example:
        >>> env = to_pettingzoo_aec("FrozenLake-v0")
        >>> env.reset(seed=0)
        >>> env.step("down")
        >>> env.infos["player"]["action"], env.infos["player"]["valid"]
        ('down', True)
    """
    return TextAECEnv(game, **options)


def to_pettingzoo_parallel(game: Game | str, **options: Any) -> TextParallelEnv:
    """Export a game as a PettingZoo Parallel env with Text spaces (see :class:`TextParallelEnv`).

    In a turn-based game, the actions of agents whose turn it is not are ignored. ``game`` may be
    a registered id; ``options`` are those of :func:`to_gymnasium`.

    Example:
        >>> env = to_pettingzoo_parallel("RockPaperScissors-v0")
        >>> observations, infos = env.reset(seed=0)
        >>> sorted(env.step({"player_0": "rock", "player_1": "paper"})[1].items())
        [('player_0', -1.0), ('player_1', 1.0)]
    """
    return TextParallelEnv(game, **options)
