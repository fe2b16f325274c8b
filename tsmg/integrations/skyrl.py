"""Any tsmg game as a SkyRL-gym ``BaseTextEnv``: SkyRL's trainer plays it turn by turn.

Example::

    import skyrl_gym
    from tsmg.integrations.skyrl import register_env

    register_env()                                   # registers the id "tsmg" with skyrl_gym
    env = skyrl_gym.make("tsmg", env_config={"game_id": "FrozenLake-v0"}, extras={"seed": 7})
    messages, info = env.init([])                    # the game's first prompt, as chat messages
    out = env.step("<action>down</action>")          # observations, reward, done, metadata

**Why SkyRL-gym rather than verifiers.** Either would carry tsmg games to a trainer at scale;
the one users can install beside tsmg today is SkyRL-gym. verifiers 0.4 (the release with the
v1 ``Env``/``Taskset`` API) pins ``openai<3``, which would downgrade the ``openai`` SDK that
tsmg's OpenAI-compatible backend runs on (3.x here), and brings some thirty packages (an
Anthropic SDK, MCP, Prime's sandbox and tunnel clients, ...); SkyRL-gym 0.4 adds four small
ones and no pin that moves another extra. Its interface is the shape of a tsmg seat: ``init``
returns the prompt, ``step`` takes the model's text and returns the next messages, the reward
and whether it is over; SkyRL's generator handles tokens (it keeps the model's own ids across
turns) and its trainer does the rest.

Configuration (``env_config``, overridden per dataset row by ``extras`` or
``extras["extra_info"]``): ``game_id``, ``seed``, ``agent`` (the seat the model plays; default
the first), ``opponent`` (``random``, ``oracle`` or ``fixed:TEXT`` for the other seats),
``game_options``, ``action_format`` (``tag``, ``regex``, ``raw``; ``choice`` and ``tool`` need a
constrained sampler or tool parser that SkyRL's generator does not share with tsmg, and are
refused) and ``system`` (the system message). The answer is read and refused by the same rules
as tsmg's LAP: thinking is not the answer, an invalid answer costs the game's invalid-answer
rule, and the reason comes back as the next user message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from tsmg.core import Game, Invalid
from tsmg.lap import DEFAULT_SYSTEM, LAP, ActionFormat, LAPConfig, PromptTemplate, split_thinking
from tsmg.policies import DecisionRequest, Policy, policy_from_spec
from tsmg.registry import make

ENV_ID = "tsmg"
_KEYS = ("game_id", "seed", "agent", "opponent", "game_options", "action_format", "system")


def register_env(env_id: str = ENV_ID) -> None:
    """Register :class:`GameTextEnv` with ``skyrl_gym`` under ``env_id`` (once; again is a no-op)."""
    import skyrl_gym

    if env_id not in skyrl_gym.registry:
        skyrl_gym.register(id=env_id, entry_point="tsmg.integrations.skyrl:GameTextEnv")


def _settings(env_config: Any, extras: Mapping[str, Any] | None) -> dict[str, Any]:
    """The env's settings: ``env_config``, then the row's ``extras["extra_info"]``, then ``extras`` itself."""
    settings: dict[str, Any] = {}
    for layer in (env_config or {}, (extras or {}).get("extra_info") or {}, extras or {}):
        for key in _KEYS:
            if key in layer and layer[key] is not None:
                settings[key] = layer[key]
    return settings


#: SkyRL's turn cap for a game without a step limit (its episodes end by a forfeit or the game's own end).
NO_LIMIT_TURNS = 1_000


def step_limit(game: Game) -> int | None:
    """The game's step limit (``max_steps``, in rounds, from its options); None: it has none, or does not say.

    Example:
        >>> import games, tsmg
        >>> step_limit(tsmg.make("FrozenLake-v0", max_steps=7))
        7
    """
    limit = getattr(getattr(game, "config", None), "max_steps", None)
    return int(limit) if limit is not None else None


class GameTextEnv(BaseTextEnv):
    """One episode of a tsmg game, one seat played by the model (see the module docstring).

    Args:
        env_config: Settings shared by every episode (a mapping or an OmegaConf config).
        extras: The dataset row's settings (``seed`` above all), as SkyRL passes them.

    Raises:
        ValueError: No ``game_id``, an unknown game or seat, or an action format SkyRL cannot use.
    """

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None) -> None:
        """Make the game and the prompt layout; nothing is played before :meth:`init`."""
        super().__init__()
        settings = _settings(env_config, extras)
        if "game_id" not in settings:
            raise ValueError("name the game: env_config={'game_id': ...} (or a game_id in the row's extras)")
        self.game: Game = make(str(settings["game_id"]), **dict(settings.get("game_options") or {}))
        self.seed: int | None = int(settings["seed"]) if "seed" in settings else None
        self.agent: str = str(settings.get("agent", self.game.agents[0]))
        if self.agent not in self.game.agents:
            raise ValueError(f"{self.game.game_id} has no seat {self.agent!r}; its seats are {self.game.agents}")
        kind = str(settings.get("action_format", "tag"))
        if kind in ("choice", "tool"):
            raise ValueError(f"action_format {kind!r} needs tsmg's own sampler; with SkyRL use tag, regex or raw")
        template = PromptTemplate(system=str(settings.get("system", DEFAULT_SYSTEM)))
        # The LAP lays out prompts and reads answers; SkyRL's generator, not the LAP, calls the model.
        self.lap = LAP(
            _NoModel(), LAPConfig(template=template, action_format=ActionFormat.model_validate({"kind": kind}))
        )
        self.opponent: Policy = policy_from_spec(
            str(settings.get("opponent", "random")), seed=self.seed or 0, scripted_only=True
        )
        # SkyRL stops generating after max_turns: the game's own step limit (its rounds bound the model's turns).
        self.max_turns = step_limit(self.game) or NO_LIMIT_TURNS
        self.episode_return = 0.0

    def init(self, prompt: list[dict[str, str]]) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """Reset the game with the row's seed and return its first prompt (the dataset's ``prompt`` is not used)."""
        self.game.reset(seed=self.seed)
        self.turns, self.episode_return = 0, 0.0
        self.episode_return += self._opponents_until_our_turn()
        messages = self.lap.messages(self._request())
        return messages, {"game_id": self.game.game_id, "seed": self.seed, "agent": self.agent}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """Play the model's answer (and the other seats until the model's next turn); the next user message."""
        self.turns += 1
        answer = self._read(action)
        actions: dict[str, str | Invalid] = {self.agent: answer}
        for seat in self.game.active_agents:
            if seat != self.agent:  # simultaneous moves: the other seats answer in the same round
                actions[seat] = self._opponent_move(seat)
        result = self.game.step(actions)
        reward = float(result.rewards.get(self.agent, 0.0)) + self._opponents_until_our_turn()
        self.episode_return += reward
        info = dict(result.infos.get(self.agent, {}))
        metadata = {"valid": info.get("valid"), "reason": info.get("reason"), "action": info.get("action")}
        if self.game.done:
            metadata |= {"success": self.game.is_success(self.agent), "episode_return": self.episode_return}
            return BaseTextEnvStepOutput(observations=[], reward=reward, done=True, metadata=metadata)
        observations = []
        if not info.get("valid", True) and info.get("reason"):
            observations.append({"role": "user", "content": f"That answer was invalid: {info['reason']}."})
        observations.append(self.lap.messages(self._request())[-1])
        return BaseTextEnvStepOutput(observations=observations, reward=reward, done=False, metadata=metadata)

    def get_metrics(self) -> dict[str, Any]:
        """Per-episode metrics SkyRL aggregates: turns, return, success."""
        success = self.game.is_success(self.agent) if self.game.done else None
        return {"turns": self.turns, "episode_return": self.episode_return, "success": float(bool(success))}

    # ------------------------------------------------------------------ helpers
    def _read(self, text: str) -> str | Invalid:
        """The move in the model's answer, by the LAP's rules (thinking is not the answer)."""
        answer = split_thinking(text)
        if not answer.answer.strip() and answer.thinking:
            return Invalid("an empty answer after the thinking")
        return self.lap.config.action_format.extract(answer.answer)

    def _request(self, seat: str | None = None) -> DecisionRequest:
        seat = seat or self.agent
        return DecisionRequest(
            self.game,
            seat,
            self.game.observe(seat),
            self.game.legal_actions(seat),
            episode_seed=self.seed,
            round=int(getattr(self.game, "rounds", 0)),
        )

    def _opponent_move(self, seat: str) -> str | Invalid:
        return self.opponent.act([self._request(seat)])[0].action

    def _opponents_until_our_turn(self) -> float:
        """Let the other seats move until the model's seat is to move or the game ends; the reward it got meanwhile."""
        reward = 0.0
        while not self.game.done and self.agent not in self.game.active_agents:
            result = self.game.step({seat: self._opponent_move(seat) for seat in self.game.active_agents})
            reward += float(result.rewards.get(self.agent, 0.0))
        return reward


class _NoModel:
    """The LAP's model slot in an env where SkyRL calls the model: never called."""

    name = "skyrl"

    def generate(self, requests: Any, sampling: Any) -> Any:
        raise RuntimeError("GameTextEnv never calls a model: SkyRL's generator does")
