"""Any tsmg game as a verifiers multi-turn environment: ``load_environment(game=...)``.

`verifiers <https://github.com/PrimeIntellect-ai/verifiers>`_ (Prime Intellect's environment
library: its ``vf-eval``, the Environments Hub and prime-rl read environments through a module's
``load_environment``) evaluates and trains on it like on any of its own environments::

    vf-eval tsmg.apps.integrations.verifiers -a '{"game": "FrozenLake-v0"}' -m MODEL -b http://HOST:PORT/v1 -n 8

What each part of verifiers' environment is here:

* **the dataset**: the game's seeds, one row per seed and seat the model plays (``seeds`` for
  training, ``eval_seeds`` for evaluation); a row's ``info`` holds ``seed`` and ``agent`` and its
  ``prompt`` is the LAP's first prompt of that episode (system, then the observation);
* **the rollout**: :class:`~tsmg.apps.integrations.seat.SeatEpisode` resets the game with the row's
  seed, the other seats are played by ``opponent`` (seeded with the episode's seed, so a seed
  replays the same episode), each answer is read by the LAP's strict rules (``<action>`` tags by
  default; thinking is not the answer; an answer without the format is refused with its reason
  and costs the game's invalid-answer rule), and the episode ends when the game does;
* **the rubric**: the model's seat's return (weight 1) and, as metrics (weight 0), ``success``,
  ``invalid_answers`` and every seat's return (``return_<seat>``), so a multi-agent game reports
  each seat's reward. By default the model plays each seat in turn (one row per seed and seat);
  ``agent=`` fixes one.

Games of your own come in with ``imports=["my_games.py"]`` (modules or ``.py`` files that
register them), as ``tsmg --import`` does. verifiers' other door, ``OpenEnvEnv``, runs an
OpenEnv project in Prime's hosted sandboxes; ``tsmg serve --export-project`` writes that project
(docs/openenv-export.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import verifiers as vf
from datasets import Dataset

from tsmg.apps.integrations.seat import SeatEpisode, read_answer, text_lap
from tsmg.core import Invalid
from tsmg.lap import DEFAULT_SYSTEM, LAP
from tsmg.registry import import_game_modules, make

#: The default seeds: training rows, and evaluation rows apart from them.
TRAIN_SEEDS = range(0, 100)
EVAL_SEEDS = range(10_000, 10_020)


def load_environment(
    game: str = "FrozenLake-v0",
    *,
    seeds: Iterable[int] = TRAIN_SEEDS,
    eval_seeds: Iterable[int] = EVAL_SEEDS,
    agent: str | None = None,
    opponent: str = "random",
    game_options: Mapping[str, Any] | None = None,
    action_format: str = "tag",
    system: str = DEFAULT_SYSTEM,
    imports: Sequence[str] = (),
    **kwargs: Any,
) -> GameEnv:
    """The verifiers environment of a tsmg game (what ``vf-eval tsmg.apps.integrations.verifiers`` loads).

    Args:
        game: A registered game id.
        seeds: Game seeds of the training dataset.
        eval_seeds: Game seeds of the evaluation dataset.
        agent: The seat the model plays (default: every seat, one row per seed and seat).
        opponent: Policy of the other seats: ``random``, ``oracle`` or ``fixed:TEXT``.
        game_options: Options to make the game with.
        action_format: How the move is written: ``tag`` (``<action>MOVE</action>``), ``regex`` or ``raw``.
        system: The system message of the LAP's prompt.
        imports: Modules or ``.py`` files that register games of your own, imported first.
        **kwargs: Passed to verifiers' ``MultiTurnEnv`` (``max_turns``, ``timeout_seconds``, ...).

    Raises:
        ValueError: An unknown seat or opponent, or an action format only tsmg's sampler can follow.
        UnknownGameError, GameOptionsError, GameModuleError: From the registry.
    """
    import_game_modules(imports)
    return GameEnv(
        game,
        seeds=seeds,
        eval_seeds=eval_seeds,
        agent=agent,
        opponent=opponent,
        game_options=game_options,
        lap=text_lap(action_format, system),
        **kwargs,
    )


class LAPParser(vf.Parser):
    """verifiers' parser with the LAP's rules: ``parse_answer`` is the move the game would read, or None."""

    def __init__(self, lap: LAP) -> None:
        """Read answers as ``lap`` does."""
        super().__init__()
        self.lap = lap

    def parse(self, text: str) -> str | None:
        """The move in one answer (thinking split off), or None when the answer has none."""
        move = read_answer(self.lap, text)
        return None if isinstance(move, Invalid) else move

    def parse_answer(self, completion: vf.Messages) -> str | None:
        """The move in the last assistant message of ``completion``."""
        return self.parse(last_assistant_text(self, completion))


def last_assistant_text(parser: vf.Parser, messages: vf.Messages) -> str:
    """The text of the last assistant message (empty if there is none)."""
    if isinstance(messages, str):
        return messages
    for message in reversed(list(parser.get_assistant_messages(messages))):
        return parser._content_to_text(parser._message_field(message, "content", ""))
    return ""


class GameEnv(vf.MultiTurnEnv):
    """A tsmg game as verifiers' ``MultiTurnEnv`` (see the module docstring; build it with :func:`load_environment`).

    Args:
        game: A registered game id.
        seeds: Game seeds of the training dataset.
        eval_seeds: Game seeds of the evaluation dataset.
        agent: The model's seat (None: every seat, one row each).
        opponent: Policy of the other seats.
        game_options: Options to make the game with.
        lap: Lays out prompts and reads answers.
        **kwargs: verifiers' ``MultiTurnEnv`` arguments.
    """

    def __init__(
        self,
        game: str,
        *,
        seeds: Iterable[int],
        eval_seeds: Iterable[int],
        agent: str | None,
        opponent: str,
        game_options: Mapping[str, Any] | None,
        lap: LAP,
        **kwargs: Any,
    ) -> None:
        """Check the settings and build both datasets (each row's first prompt is played out here)."""
        self.game_id = game
        self.game_options = dict(game_options or {})
        self.opponent = opponent
        self.lap = lap
        probe = make(game, **self.game_options)
        if agent is not None and agent not in probe.agents:
            raise ValueError(f"{game} has no seat {agent!r}; its seats are {probe.agents}")
        self.seats = [agent] if agent is not None else list(probe.agents)
        # No turn cap of verifiers' own by default: it stops before the capped answer is played, so the
        # game's last move would be lost. The game ends itself (its step limit, a forfeit, its rules).
        kwargs.setdefault("max_turns", -1)
        parser = LAPParser(lap)
        rubric = vf.Rubric(funcs=[self.episode_return], weights=[1.0], parser=parser)
        for metric in (self.success, self.invalid_answers):
            rubric.add_metric(metric)
        for seat in probe.agents:
            rubric.add_metric(_seat_return(seat))
        self.game_rubric = rubric  # verifiers adds its own monitor rubric (num_turns) beside it
        super().__init__(
            dataset=self.rows(seeds),
            eval_dataset=self.rows(eval_seeds),
            parser=parser,
            rubric=rubric,
            **kwargs,
        )

    def episode(self, seed: int, agent: str) -> SeatEpisode:
        """A fresh episode of the game with the model in ``agent`` (not started)."""
        return SeatEpisode(
            self.game_id, seed=seed, agent=agent, opponent=self.opponent, game_options=self.game_options, lap=self.lap
        )

    def rows(self, seeds: Iterable[int]) -> Dataset:
        """One row per seed and seat: the LAP's first prompt, ``info`` = ``{"seed", "agent"}``."""
        rows = []
        for seed in seeds:
            for agent in self.seats:
                prompt = self.episode(int(seed), agent).start()
                rows.append({"prompt": prompt, "info": {"seed": int(seed), "agent": agent}, "answer": ""})
        if not rows:
            raise ValueError("give at least one seed")
        return Dataset.from_list(rows)

    async def setup_state(self, state: vf.State) -> vf.State:
        """Start the row's episode; its first prompt is the row's (the same seed replays the same start)."""
        info = state["info"]
        seat = self.episode(int(info["seed"]), str(info["agent"]))
        state["prompt"] = seat.start()
        state["tsmg_seat"] = seat
        self._record(state, seat)
        if seat.done:  # the other seats ended it before the model's first turn
            state["final_env_response"] = [vf.UserMessage(content=self._ending(seat))]
        return state

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> vf.Messages:
        """Play the model's last answer; the reason of a refusal and the next observation, or the ending."""
        seat: SeatEpisode = state["tsmg_seat"]
        turn = seat.play(last_assistant_text(self.parser, messages))
        self._record(state, seat)
        if turn.done:
            ending = [vf.UserMessage(content=self._ending(seat))]
            state["final_env_response"] = ending
            return ending
        return [vf.UserMessage(content=message["content"]) for message in turn.messages]

    @vf.cleanup
    async def drop_game(self, state: vf.State) -> None:
        """Forget the game object (the scores read the plain values :meth:`_record` kept)."""
        state.pop("tsmg_seat", None)

    @staticmethod
    def _record(state: vf.State, seat: SeatEpisode) -> None:
        state["tsmg"] = {
            "game": seat.game.game_id,
            "seed": seat.seed,
            "agent": seat.agent,
            "returns": dict(seat.returns),
            "success": seat.success(),
            "invalid_answers": seat.invalid_answers,
            "done": seat.done,
        }

    @staticmethod
    def _ending(seat: SeatEpisode) -> str:
        outcome = {True: "you succeeded", False: "you did not succeed", None: "it was cut short"}[seat.success()]
        return f"The game is over: {outcome}; your return is {seat.episode_return:g}."

    # The rubric: the model's seat's return, and metrics (weight 0).
    @staticmethod
    async def episode_return(state: vf.State) -> float:
        """The return of the seat the model played."""
        record = state.get("tsmg") or {}
        return float((record.get("returns") or {}).get(record.get("agent"), 0.0))

    @staticmethod
    async def success(state: vf.State) -> float:
        """1 if the model's seat succeeded, else 0."""
        return float(bool((state.get("tsmg") or {}).get("success")))

    @staticmethod
    async def invalid_answers(state: vf.State) -> float:
        """How many of the model's answers the game refused."""
        return float((state.get("tsmg") or {}).get("invalid_answers", 0))


def _seat_return(seat: str) -> Any:
    """A metric: the return of ``seat`` in the episode (every seat's, whichever the model played)."""

    async def seat_return(state: vf.State) -> float:
        return float(((state.get("tsmg") or {}).get("returns") or {}).get(seat, 0.0))

    seat_return.__name__ = f"return_{seat}"
    return seat_return
