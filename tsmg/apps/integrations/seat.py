"""One seat of a tsmg game played turn by turn by an outside trainer's model, the other seats by a script.

SkyRL-gym's ``BaseTextEnv`` (:mod:`tsmg.apps.integrations.skyrl`) and verifiers' multi-turn
environment (:mod:`tsmg.apps.integrations.verifiers`) both hand an environment the model's text and
ask for the next messages; this is what they share: the LAP lays out the prompts (the model is
called by the trainer, never here), the answer is read by the LAP's rules (thinking is not the
answer; an answer without the format is :class:`~tsmg.core.Invalid` and costs the game's
invalid-answer rule, its reason going back to the model), and the other seats are played by a
scripted policy seeded with the episode's seed, so a seed replays the same episode.

Example:
    >>> import games
    >>> seat = SeatEpisode("TicTacToe-v0", seed=4, agent="player_1")
    >>> first = seat.start()  # random (seeded) has played X already
    >>> [message["role"] for message in first]
    ['system', 'user']
    >>> turn = seat.play("<action>99</action>")
    >>> turn.valid, turn.done
    (False, False)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tsmg.core import Game, Invalid
from tsmg.lap import DEFAULT_SYSTEM, LAP, ActionFormat, LAPConfig, PromptTemplate, split_thinking
from tsmg.policies import DecisionRequest, Policy, policy_from_spec
from tsmg.registry import make

#: Action formats a model served elsewhere can follow from the prompt alone; ``choice`` and ``tool``
#: need tsmg's constrained sampler or its tool parser, which the outside trainer's generator lacks.
TEXT_FORMATS = ("tag", "regex", "raw")


def step_limit(game: Game) -> int | None:
    """The game's step limit (``max_steps``, in rounds, from its options); None: it has none, or does not say.

    Example:
        >>> import games, tsmg
        >>> step_limit(tsmg.make("FrozenLake-v0", max_steps=7))
        7
    """
    limit = getattr(getattr(game, "config", None), "max_steps", None)
    return int(limit) if limit is not None else None


def text_lap(action_format: str = "tag", system: str = DEFAULT_SYSTEM) -> LAP:
    """A LAP that lays out prompts and reads answers for a model the trainer calls (its model slot is never used).

    Raises:
        ValueError: ``action_format`` is one only tsmg's own sampler can follow.
    """
    if action_format not in TEXT_FORMATS:
        raise ValueError(
            f"action_format {action_format!r} needs tsmg's own sampler; here use one of {', '.join(TEXT_FORMATS)}"
        )
    config = LAPConfig(
        template=PromptTemplate(system=system), action_format=ActionFormat.model_validate({"kind": action_format})
    )
    return LAP(_NoModel(), config)


def read_answer(lap: LAP, text: str) -> str | Invalid:
    """The move in a model's answer by ``lap``'s rules: thinking is not the answer; no move is :class:`Invalid`.

    Example:
        >>> read_answer(text_lap(), "<think>left is a hole</think><action>down</action>")
        'down'
        >>> read_answer(text_lap(), "down")
        Invalid(reason='no <action>...</action> in the answer')
    """
    answer = split_thinking(text)
    if not answer.answer.strip() and answer.thinking:
        return Invalid("an empty answer after the thinking")
    return lap.config.action_format.extract(answer.answer)


@dataclass
class Turn:
    """What one answer of the model did.

    Attributes:
        reward: The model's seat's reward from its move and the other seats' moves up to its next turn.
        done: Whether the episode is over.
        valid: Whether the game accepted the answer.
        reason: Why not, when it did not.
        action: The move the game read.
        messages: The next messages for the model (the refusal's reason first, then the new
            observation); empty when the episode is over.
    """

    reward: float
    done: bool
    valid: bool | None
    reason: str | None
    action: str | None
    messages: list[dict[str, str]] = field(default_factory=list)


class SeatEpisode:
    """One episode of ``game_id`` with the model in the seat ``agent`` (see the module docstring).

    Args:
        game_id: A registered game id.
        seed: The episode's seed (the game's reset and the other seats' policy).
        agent: The model's seat (default: the game's first).
        opponent: The other seats' policy: ``random``, ``oracle`` or ``fixed:TEXT``.
        game_options: Options to make the game with.
        lap: Lays out prompts and reads answers (default: :func:`text_lap`).

    Raises:
        ValueError: An unknown seat; UnknownGameError and GameOptionsError from the registry.
    """

    def __init__(
        self,
        game_id: str,
        *,
        seed: int | None,
        agent: str | None = None,
        opponent: str = "random",
        game_options: Mapping[str, Any] | None = None,
        lap: LAP | None = None,
    ) -> None:
        """Make the game, its LAP and the other seats' policy; nothing is played before :meth:`start`."""
        self.game: Game = make(game_id, **dict(game_options or {}))
        self.seed = seed
        self.agent: str = agent if agent is not None else self.game.agents[0]
        if self.agent not in self.game.agents:
            raise ValueError(f"{self.game.game_id} has no seat {self.agent!r}; its seats are {self.game.agents}")
        self.lap = lap or text_lap()
        self.opponent: Policy = policy_from_spec(opponent, seed=seed or 0, scripted_only=True)
        self.turns = 0
        self.returns: dict[str, float] = {}
        self.invalid_answers = 0

    @property
    def done(self) -> bool:
        """Whether the episode is over."""
        return bool(self.game.done)

    @property
    def episode_return(self) -> float:
        """The model's seat's return so far."""
        return self.returns.get(self.agent, 0.0)

    def success(self) -> bool | None:
        """Whether the model's seat succeeded (None until the episode is over)."""
        return bool(self.game.is_success(self.agent)) if self.game.done else None

    def start(self) -> list[dict[str, str]]:
        """Reset with the seed, let the other seats move until the model's turn; the first messages (system, user)."""
        self.game.reset(seed=self.seed)
        self.turns, self.invalid_answers = 0, 0
        self.returns = {seat: 0.0 for seat in self.game.agents}
        self._others_until_our_turn()
        return self.lap.messages(self.request()) if not self.game.done else []

    def read(self, text: str) -> str | Invalid:
        """The move in the model's answer, by the LAP's rules (:func:`read_answer`)."""
        return read_answer(self.lap, text)

    def play(self, text: str) -> Turn:
        """Play the model's answer, then the other seats until the model's next turn (or the end)."""
        self.turns += 1
        before = self.episode_return
        actions: dict[str, str | Invalid] = {self.agent: self.read(text)}
        for seat in self.game.active_agents:
            if seat != self.agent:  # simultaneous moves: the other seats answer in the same round
                actions[seat] = self._other_move(seat)
        result = self.game.step(actions)
        self._add(result.rewards)
        self._others_until_our_turn()
        info = dict(result.infos.get(self.agent, {}))
        valid = info.get("valid")
        self.invalid_answers += valid is False
        turn = Turn(
            reward=self.episode_return - before,
            done=self.done,
            valid=valid,
            reason=info.get("reason"),
            action=info.get("action"),
        )
        if not turn.done:
            if valid is False and turn.reason:
                turn.messages.append({"role": "user", "content": f"That answer was invalid: {turn.reason}."})
            turn.messages.append(self.lap.messages(self.request())[-1])
        return turn

    def _add(self, rewards: Mapping[str, float]) -> None:
        for seat, reward in rewards.items():
            self.returns[seat] = self.returns.get(seat, 0.0) + float(reward)

    def request(self, seat: str | None = None) -> DecisionRequest:
        """The decision request of ``seat`` (default: the model's) in the current state."""
        seat = seat or self.agent
        return DecisionRequest(
            self.game,
            seat,
            self.game.observe(seat),
            self.game.legal_actions(seat),
            episode_seed=self.seed,
            round=int(getattr(self.game, "rounds", 0)),
        )

    def _other_move(self, seat: str) -> str | Invalid:
        return self.opponent.act([self.request(seat)])[0].action

    def _others_until_our_turn(self) -> None:
        while not self.game.done and self.agent not in self.game.active_agents:
            result = self.game.step({seat: self._other_move(seat) for seat in self.game.active_agents})
            self._add(result.rewards)


class _NoModel:
    """The LAP's model slot where the outside trainer calls the model: never called."""

    name = "outside-trainer"

    def generate(self, requests: Any, sampling: Any) -> Any:
        raise RuntimeError("the outside trainer calls the model; this LAP only lays out prompts and reads answers")
