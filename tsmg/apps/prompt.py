"""``tsmg prompt``: the exact messages a language model gets at one decision of a game.

What a model is sent is the product: the game's text for the seat, laid out by the LAP (system
prompt, history, the observation, the format line) plus, under the ``tool`` action format, the
function schemas, and under ``choice`` the answers decoding is held to. :func:`prompt_at` plays
to a decision and returns that request as the LAP builds it for a model: the game is reset with
the seed, every earlier decision is a random legal move (the moves ``tsmg rollout --model random
--seed N --episodes 1`` plays), and at the decision the LAP's own code builds the request for a
stand-in model that records it instead of answering. So the text is the one ``tsmg eval`` sends
with the same LAP flags (:mod:`tsmg.apps.lap_options`) at the same decision, and the one the
episode record keeps (``steps[i].prompt``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tsmg.apps.cli_parser import examples
from tsmg.apps.lap_options import add_lap_arguments, lap_config_from_args, legal_moves_options
from tsmg.assignments import parse_assignments
from tsmg.core import AgentID
from tsmg.decisions import Decision, DecisionRequest
from tsmg.lap import LAP, LAPConfig
from tsmg.lm import Completion, GenerationRequest, SamplingParams
from tsmg.policies import RandomPolicy
from tsmg.registry import make
from tsmg.rollout import EpisodePlan, rollout


class PromptError(ValueError):
    """No decision matches what was asked (no such seat, a step past the end, a seat that never acts)."""


@dataclass(frozen=True)
class DecisionPrompt:
    """What a language model is sent at one decision.

    Attributes:
        game: The game id.
        seed: The seed the game was reset with (and the random moves before the decision drawn from).
        agent: The deciding seat.
        step: The game step (round) of the decision: how many steps were played before it.
        messages: The chat messages (``role``, ``content``), as the model receives them.
        tools: The function schemas offered (the ``tool`` action format), or None.
        choices: The answers constrained decoding allows (the ``choice`` action format), or None.
    """

    game: str
    seed: int
    agent: AgentID
    step: int
    messages: list[dict[str, str]]
    tools: list[dict[str, Any]] | None = None
    choices: list[str] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The prompt as ``tsmg prompt --json`` prints it."""
        return asdict(self)

    def text(self) -> str:
        """The prompt for a person to read: a title line, then each message under its role."""
        lines = [f"{self.game}, seed {self.seed}: what {self.agent} is sent at step {self.step}"]
        for message in self.messages:
            lines += ["", f"=== {message['role']} ===", message["content"]]
        if self.tools is not None:
            lines += ["", "=== tools ===", json.dumps(self.tools, indent=2)]
        if self.choices is not None:
            lines += ["", "=== choices (the answer is decoded as one of these) ===", *self.choices]
        return "\n".join(lines)


def prompt_at(
    game_id: str,
    seed: int = 0,
    agent: AgentID | None = None,
    step: int | None = None,
    options: Mapping[str, Any] | None = None,
    lap: LAPConfig | None = None,
) -> DecisionPrompt:
    """The messages a language model gets at one decision of ``game_id`` (what ``tsmg prompt`` prints).

    The game is reset with ``seed``; every decision before the one asked for is a random legal
    move (:class:`~tsmg.policies.RandomPolicy` seeded with ``seed``, as ``tsmg rollout --model
    random`` plays it); at that decision the LAP builds its request exactly as for a model.

    Args:
        game_id: A registered game id (own games, ``openspiel:``/``OpenSpiel/`` and TextArena ids).
        seed: The episode seed.
        agent: The deciding seat (default: the first seat to act at ``step``).
        step: The game step of the decision, 0 for the first (default: ``agent``'s first decision,
            or step 0 without ``agent``).
        options: Game options (as ``-o KEY=VALUE`` gives them).
        lap: How the prompt is laid out (default: :class:`~tsmg.lap.LAPConfig`, ``tsmg eval``'s defaults).

    Returns:
        The decision's :class:`DecisionPrompt`.

    Raises:
        UnknownGameError: No game is registered under ``game_id``.
        PromptError: ``agent`` is no seat of the game, ``step`` is past the end of the episode,
            ``agent`` does not act at ``step`` or never acts, or the random moves cannot reach the
            decision (a game that does not list its moves).

    Example:
        >>> import games
        >>> prompt = prompt_at("TicTacToe-v0", seed=0, step=2)
        >>> prompt.agent, [message["role"] for message in prompt.messages]
        ('player_0', ['system', 'user'])
    """
    options = dict(options or {})
    probe = make(game_id, **options)  # an unknown id or a bad option fails here, in one sentence
    try:
        seats = list(probe.agents)
    finally:
        probe.close()
    if agent is not None and agent not in seats:
        raise PromptError(f"{game_id} has no seat {agent!r}; its seats are {', '.join(seats)}")
    if step is not None and step < 0:
        raise PromptError(f"the step must be 0 or more (the number of game steps before the decision), got {step}")
    seeker = _Seeker(agent, step, RandomPolicy(seed=seed), LAP(_Recorder(), lap or LAPConfig()))
    [episode] = rollout(
        game_id, seeker, plans=[EpisodePlan(seed=seed, episode_id=f"{game_id}/prompt")], game_options=options
    )
    if seeker.found is not None:
        request, generation = seeker.found
        return DecisionPrompt(
            game=game_id,
            seed=seed,
            agent=request.agent,
            step=request.round,
            messages=[dict(message) for message in generation.messages or []],
            tools=generation.tools,
            choices=generation.choices,
        )
    raise PromptError(seeker.problem or _why_not_reached(game_id, seed, agent, step, episode.num_rounds, episode.error))


def _why_not_reached(
    game_id: str, seed: int, agent: AgentID | None, step: int | None, rounds: int, error: str | None
) -> str:
    """Why the episode ended before the decision asked for (one sentence)."""
    steps = f"{rounds} step{'' if rounds == 1 else 's'}"
    if error is not None:
        return f"{game_id} (seed {seed}) failed before the decision: {error}"
    if step is not None:
        return (
            f"step {step} is past the end of the episode: {game_id} with seed {seed} ends after {steps} "
            f"(steps 0 to {rounds - 1}); give a smaller --step or another --seed"
        )
    return (
        f"{agent} never acts in {game_id} with seed {seed} (the episode ends after {steps} of random moves); "
        "try another --seed"
    )


class _Recorder:
    """A stand-in language model: it keeps each request it is sent and answers none (a failed call)."""

    name = "prompt"

    def __init__(self) -> None:
        self.requests: list[GenerationRequest] = []

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        self.requests.extend(requests)
        # A failed call is neither re-prompted nor played: the LAP returns at once with an error.
        return [Completion(text="", finish_reason="error", error="shown, not sent") for _ in requests]


#: The error that ends the episode once the decision is found (never shown: the rollout just stops).
_STOP = "the decision asked for is reached"


class _Seeker:
    """Every seat's policy: random moves until the decision asked for, whose request the LAP then builds."""

    name = "random"

    def __init__(self, agent: AgentID | None, step: int | None, moves: RandomPolicy, lap: LAP) -> None:
        self.agent, self.step, self.moves, self.lap = agent, step, moves, lap
        self.found: tuple[DecisionRequest, GenerationRequest] | None = None
        self.problem: str | None = None  # why the decision cannot be reached, when the game says so on the way

    def act(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        """The LAP's request at the decision asked for; random legal moves before it."""
        target = next((request for request in requests if self._is_target(request)), None)
        if target is not None:
            recorder = self.lap.model
            assert isinstance(recorder, _Recorder)
            self.lap.act([target])
            self.found = (target, recorder.requests[0])
        elif requests and self.step is not None and requests[0].round == self.step:
            acting = ", ".join(requests[0].game.active_agents)
            self.problem = (
                f"{self.agent} does not act at step {self.step} ({acting} does); "
                "leave out --step for its first decision"
            )
        else:
            unlisted = next((request for request in requests if not request.legal_actions), None)
            if unlisted is not None:
                self.problem = (
                    f"{unlisted.game.game_id} does not list {unlisted.agent}'s moves at step {unlisted.round}, so no "
                    "random move can play on to the decision asked for; ask for an earlier step"
                )
        if self.found is not None or self.problem is not None:
            return [Decision(action="", error=_STOP) for _ in requests]  # an error decision ends the episode here
        return self.moves.act(requests)

    def _is_target(self, request: DecisionRequest) -> bool:
        """Whether ``request`` is the decision asked for (see :func:`prompt_at`'s defaults)."""
        if self.step is not None and request.round != self.step:
            return False
        # Without --step the first decision that matches: the seat's first, or step 0's first seat to act.
        return request.agent == (self.agent if self.agent is not None else request.game.active_agents[0])


def add_command(commands: Any) -> None:
    """Register the ``prompt`` sub-command on an argparse sub-parser set."""
    command = commands.add_parser(
        "prompt",
        help="print the messages a language model gets at a decision",
        description=(
            "Print the exact messages (system, user with its format line, and the tools or choices of the action "
            "format) a language model is sent at one decision, laid out by the same LAP flags as tsmg eval. The game "
            "is reset with --seed; the decisions before the one shown are random legal moves drawn from a generator "
            "seeded by --seed (as tsmg rollout --model random plays them). Without --step: --agent's first decision "
            "(or step 0); without --agent: the first seat to act. The sampling flags (--temperature, --top-p, "
            "--max-tokens, --reprompt) change nothing shown: they are taken so that eval's LAP flags work as written."
        ),
        epilog=examples(
            "tsmg prompt --game TicTacToe-v0",
            "tsmg prompt --game FrozenLake-v0 --seed 3 --step 2 --action-format choice",
            "tsmg prompt --game KuhnPoker-v0 --agent player_1 --history full --json",
            "tsmg prompt --game openspiel:kuhn_poker --agent player_1 --action-format tool",
        ),
    )
    command.add_argument("--game", required=True, metavar="ID", help="registered game id (required)")
    command.add_argument("--seed", type=int, default=0, help="seed of the episode and of the random moves before")
    command.add_argument("--agent", help="the deciding seat (default: the first seat to act)")
    command.add_argument(
        "--step",
        type=int,
        metavar="K",
        help="the game step of the decision, 0 for the first (default: --agent's first decision, else step 0)",
    )
    command.add_argument(
        "-o",
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="game option, e.g. -o view=compact (repeatable)",
    )
    command.add_argument(
        "--json", action="store_true", help="print a JSON object: game, seed, agent, step, messages, tools, choices"
    )
    add_lap_arguments(command)
    command.set_defaults(handler=cmd_prompt)


def cmd_prompt(args: argparse.Namespace) -> int:
    """Print the prompt of the decision the arguments name."""
    lap = lap_config_from_args(args)
    options = parse_assignments(args.option, "-o/--option")
    per_game = {args.game: options}
    legal_moves_options([args.game], lap, per_game)
    options = per_game[args.game]
    prompt = prompt_at(args.game, seed=args.seed, agent=args.agent, step=args.step, options=options, lap=lap)
    print(json.dumps(prompt.as_dict(), indent=2) if args.json else prompt.text())
    return 0
