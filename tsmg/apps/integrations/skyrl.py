"""Any tsmg game as a SkyRL-gym ``BaseTextEnv``: SkyRL's trainer plays it turn by turn.

Example::

    import skyrl_gym
    from tsmg.apps.integrations.skyrl import register_env

    register_env()                                   # registers the id "tsmg" with skyrl_gym
    env = skyrl_gym.make("tsmg", env_config={"game_id": "FrozenLake-v0"}, extras={"seed": 7})
    messages, info = env.init([])                    # the game's first prompt, as chat messages
    out = env.step("<action>down</action>")          # observations, reward, done, metadata

SkyRL-gym's interface is the shape of a tsmg seat: ``init`` returns the prompt, ``step`` takes
the model's text and returns the next messages, the reward and whether it is over; SkyRL's
generator handles tokens (it keeps the model's own ids across turns) and its trainer does the
rest. The seat itself (prompts, reading answers, the other seats) is
:class:`tsmg.apps.integrations.seat.SeatEpisode`, which verifiers' environment
(:mod:`tsmg.apps.integrations.verifiers`) shares.

Configuration (``env_config``, overridden per dataset row by ``extras`` or
``extras["extra_info"]``): ``game_id``, ``seed``, ``agent`` (the seat the model plays; default
the first), ``opponent`` (``random``, ``oracle`` or ``fixed:TEXT`` for the other seats),
``game_options``, ``action_format`` (``tag``, ``regex``, ``raw``; ``choice`` and ``tool`` need a
constrained sampler or tool parser that SkyRL's generator does not share with tsmg, and are
refused) and ``system`` (the system message). The answer is read and refused by the same rules
as tsmg's LAP: thinking is not the answer, an invalid answer costs the game's invalid-answer
rule, and the reason comes back as the next user message. A tool-using game (the service games)
is played in the text form of its calls (``<action>lookup_order(order_id="A71")</action>``); the
last step's ``metadata`` then carries the game's influence graph under ``influence``
(:class:`tsmg.influence.InfluenceGraph` as JSON).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from tsmg.apps.integrations.seat import SeatEpisode, step_limit, text_lap
from tsmg.lap import DEFAULT_SYSTEM
from tsmg.tools import exact_influence

ENV_ID = "tsmg"
_KEYS = ("game_id", "seed", "agent", "opponent", "game_options", "action_format", "system")

__all__ = ["ENV_ID", "NO_LIMIT_TURNS", "GameTextEnv", "register_env", "step_limit"]


def register_env(env_id: str = ENV_ID) -> None:
    """Register :class:`GameTextEnv` with ``skyrl_gym`` under ``env_id`` (once; again is a no-op)."""
    import skyrl_gym

    if env_id not in skyrl_gym.registry:
        skyrl_gym.register(id=env_id, entry_point="tsmg.apps.integrations.skyrl:GameTextEnv")


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
        self.seat = SeatEpisode(
            str(settings["game_id"]),
            seed=int(settings["seed"]) if "seed" in settings else None,
            agent=str(settings["agent"]) if "agent" in settings else None,
            opponent=str(settings.get("opponent", "random")),
            game_options=settings.get("game_options"),
            lap=text_lap(str(settings.get("action_format", "tag")), str(settings.get("system", DEFAULT_SYSTEM))),
        )
        self.game = self.seat.game
        self.seed = self.seat.seed
        self.agent = self.seat.agent
        # SkyRL stops generating after max_turns: the game's own step limit (its rounds bound the model's turns).
        self.max_turns = step_limit(self.game) or NO_LIMIT_TURNS

    def init(self, prompt: list[dict[str, str]]) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """Reset the game with the row's seed and return its first prompt (the dataset's ``prompt`` is not used)."""
        messages = self.seat.start()
        return messages, {"game_id": self.game.game_id, "seed": self.seed, "agent": self.agent}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """Play the model's answer (and the other seats until the model's next turn); the next user message."""
        turn = self.seat.play(action)
        metadata: dict[str, Any] = {"valid": turn.valid, "reason": turn.reason, "action": turn.action}
        if turn.done:
            metadata |= {"success": self.seat.success(), "episode_return": self.seat.episode_return}
            graph = exact_influence(self.game)
            if graph is not None:  # a tool-using game's own data flow, for influence-aware credit on SkyRL's side
                metadata["influence"] = graph.model_dump(mode="json")
        return BaseTextEnvStepOutput(observations=turn.messages, reward=turn.reward, done=turn.done, metadata=metadata)

    def get_metrics(self) -> dict[str, Any]:
        """Per-episode metrics SkyRL aggregates: turns, return, success."""
        return {
            "turns": self.seat.turns,
            "episode_return": self.seat.episode_return,
            "success": float(bool(self.seat.success())),
        }
