"""OpenSpiel's bots as policies and opponents: MCTS, the exact best response, and the ``vs=BOT`` game option.

* :class:`MCTSPolicy` (model spec ``openspiel-mcts``): OpenSpiel's UCT search, every decision
  seeded from the plan, on sequential games with terminal rewards.
* :class:`BestResponsePolicy` (model spec ``openspiel-br``): OpenSpiel's exact best response
  (``open_spiel.python.algorithms.best_response``) to a fixed strategy, by default uniform random
  play (model option ``against``: any policy whose move probabilities can be read, see
  :func:`tsmg.strategy.move_probabilities`). It plays sequential games
  small enough to enumerate (at most :data:`MAX_HISTORIES` histories); a larger game is refused
  in one sentence.
* :class:`OpenSpielVsBot`: any two-player OpenSpiel game made single-agent, its other seat
  played by a bot: ``tsmg.make("OpenSpiel/tic_tac_toe-v0", vs="mcts", simulations=50)`` or
  ``-o vs=mcts`` on the command line. ``vs`` is ``random``, ``mcts`` (``simulations`` per move) or
  ``br`` (best response to ``against``);
  the learner is the agent ``player``, seated by ``learner_seat`` (``random``: drawn from the
  episode's seed). :class:`~tsmg.adapters.openspiel.OpenSpielGame` builds this game whenever
  ``vs`` is given, so every OpenSpiel id takes the option and no id is registered per pair.

The bot's randomness (MCTS's search, random play, the random seat) is drawn from the episode's
generator, so the same seed plays the same episode and a fork continues it exactly.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, cast

import numpy as np
import pyspiel

from tsmg.adapters.openspiel import OpenSpielConfig, OpenSpielGame, quiet_openspiel
from tsmg.core import AgentID, ForkMode, GameError, Invalid, RefereedGame
from tsmg.policies import Decision, DecisionRequest, Policy, RandomPolicy

__all__ = [
    "MAX_HISTORIES",
    "BestResponsePolicy",
    "MCTSPolicy",
    "OpenSpielVsBot",
    "count_histories",
    "refuse_unsolvable",
]

#: Games with more histories (nodes of the game tree, chance included) than this are too large for
#: an exact best response (Leduc poker has 9,457; Liar's Dice with one die each 294,883; tic-tac-toe 549,946).
MAX_HISTORIES = 400_000


#: OpenSpiel's best responses to uniformly random play, by (game string, seat), for every bot of the process.
_RESPONSES_TO_RANDOM: dict[tuple[str, int], Any] = {}
_RESPONSES_LOCK = threading.Lock()


class MCTSPolicy:
    """OpenSpiel's MCTS bot (``open_spiel.python.algorithms.mcts``) as a policy on OpenSpiel games.

    UCT search with random rollouts, the model spec ``openspiel-mcts`` (options:
    ``--model-option openspiel-mcts:simulations=100``). Every decision searches with a numpy
    ``RandomState`` seeded from the policy seed and the decision's plan position
    (:meth:`tsmg.policies.DecisionRequest.rng`, tsmg's one seeding rule), so an evaluation replays
    exactly. In an imperfect-information game the bot searches a world resampled from the seat's
    own information state (OpenSpiel's ``resample_from_infostate``), never the true one: it does
    not see the other seats' cards. It plays sequential games with terminal rewards; on any other
    game it refuses with the reason.

    Args:
        seed: The policy seed.
        simulations: MCTS simulations per decision.
        uct_c: The UCT exploration constant.
        rollouts: Random rollouts per leaf evaluation.
        name: The policy's name in reports.
    """

    #: The model options the bot takes, with their defaults.
    DEFAULTS: ClassVar[dict[str, float]] = {"simulations": 100, "uct_c": 2.0, "rollouts": 1}

    def __init__(
        self,
        seed: int = 0,
        *,
        simulations: int = 100,
        uct_c: float = 2.0,
        rollouts: int = 1,
        name: str = "openspiel-mcts",
    ) -> None:
        """Configure the search; see the class docstring."""
        if simulations < 1 or rollouts < 1 or uct_c < 0:
            raise ValueError(
                f"openspiel-mcts needs simulations >= 1, rollouts >= 1 and uct_c >= 0, got simulations={simulations}, "
                f"rollouts={rollouts}, uct_c={uct_c}"
            )
        self.seed = seed
        self.simulations = int(simulations)
        self.uct_c = float(uct_c)
        self.rollouts = int(rollouts)
        self.name = name
        self._playable: set[str] = set()  # the OpenSpiel games (by game string) found playable

    @classmethod
    def from_options(cls, seed: int, options: Mapping[str, Any]) -> MCTSPolicy:
        """The bot a model spec's options ask for (``simulations``, ``uct_c``, ``rollouts``).

        Raises:
            ValueError: An unknown option or a value of the wrong type.
        """
        unknown = sorted(set(options) - set(cls.DEFAULTS))
        if unknown:
            raise ValueError(
                f"openspiel-mcts has no model option {', '.join(unknown)}; its options: {', '.join(cls.DEFAULTS)}"
            )
        values: dict[str, Any] = {}
        for key, value in options.items():
            kind = float if key == "uct_c" else int
            if isinstance(value, bool) or not isinstance(value, int | float) or kind(value) != value:
                raise ValueError(f"openspiel-mcts option {key} must be {'a number' if kind is float else 'an integer'}")
            values[key] = kind(value)
        return cls(seed, **values)

    def act(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        """Search each request's game from the deciding seat's view; the move with the most visits."""
        return [Decision(action=self.choose(request)) for request in requests]

    def choose(self, request: DecisionRequest) -> str:
        """The bot's move for one decision (its name, as :meth:`OpenSpielGame.legal_actions` lists it)."""
        return self.search(request.game, request.agent, request.rng(self.seed))

    def search(self, game: Any, agent: AgentID, rng: np.random.Generator) -> str:
        """The bot's move for ``agent`` in ``game`` now, its search seeded from ``rng``.

        Raises:
            ValueError: Not an OpenSpiel game, or one the bot cannot play (the message says why).
        """
        from open_spiel.python.algorithms import mcts

        if not isinstance(game, OpenSpielGame):
            raise ValueError(
                f"openspiel-mcts plays OpenSpiel games only (openspiel:NAME or OpenSpiel/NAME-v0), not {game.game_id}"
            )
        self.check_playable(game)
        player = game.player(agent)
        random_state = np.random.RandomState(int(rng.integers(2**32)))
        state = game.state.clone()
        if game.game_type.information != pyspiel.GameType.Information.PERFECT_INFORMATION:
            sampler = pyspiel.UniformProbabilitySampler(int(rng.integers(2**31)), 0.0, 1.0)
            state = state.resample_from_infostate(player, sampler)
        bot = mcts.MCTSBot(
            game.pyspiel_game,
            self.uct_c,
            self.simulations,
            mcts.RandomRolloutEvaluator(self.rollouts, random_state),
            solve=game.game_type.information == pyspiel.GameType.Information.PERFECT_INFORMATION,
            random_state=random_state,
        )
        return game.move_name(agent, int(bot.step(state)))

    def check_playable(self, game: OpenSpielGame) -> None:
        """Refuse, with the reason, a game the bot cannot play fairly (checked once per OpenSpiel game; needs a state).

        Raises:
            ValueError: Simultaneous moves, rewards along the way, or hidden information it cannot resample.
        """
        key = str(game.pyspiel_game)
        if key in self._playable:
            return
        game_type = game.game_type
        problem = None
        if not game.turn_based:
            problem = "its moves are simultaneous (OpenSpiel's MCTS searches sequential games)"
        elif game_type.reward_model != pyspiel.GameType.RewardModel.TERMINAL:
            problem = "it pays rewards along the way (OpenSpiel's MCTS needs terminal rewards)"
        elif game_type.information != pyspiel.GameType.Information.PERFECT_INFORMATION:
            try:
                with quiet_openspiel():
                    game.state.clone().resample_from_infostate(0, pyspiel.UniformProbabilitySampler(0, 0.0, 1.0))
            except pyspiel.SpielError:
                problem = (
                    "its information is imperfect and OpenSpiel cannot resample a world from a seat's information "
                    "state, so the search would see the other seats' hidden information"
                )
        if problem is not None:
            raise ValueError(f"openspiel-mcts cannot play {game.game_id}: {problem}")
        self._playable.add(key)


def refuse_unsolvable(game: OpenSpielGame, solver: str) -> None:
    """Refuse, in one sentence naming ``solver``, a game whose whole tree a tabular solver cannot walk here.

    Raises:
        ValueError: Simultaneous moves, no information-state strings (the tables' keys), or more
            than :data:`MAX_HISTORIES` histories.
    """
    problem = None
    if not game.turn_based:
        problem = "its moves are simultaneous (the tabular solvers here answer sequential games)"
    elif not game.game_type.provides_information_state_string:
        problem = "it gives no information-state strings, which the solver's tables are keyed by"
    elif count_histories(game.pyspiel_game, MAX_HISTORIES) is None:
        problem = f"it has more than {MAX_HISTORIES:,} histories, too many to solve exactly here"
    if problem is not None:
        raise ValueError(f"{solver} cannot play {game.game_id}: {problem}")


def count_histories(game: Any, limit: int = MAX_HISTORIES) -> int | None:
    """The number of histories of the pyspiel ``game`` (its game tree's nodes), or None past ``limit``.

    A depth-first walk that stops as soon as it has counted more than ``limit``, so a game as
    large as chess is refused after ``limit`` steps rather than never.
    """
    count, stack = 0, [game.new_initial_state()]
    while stack:
        state = stack.pop()
        count += 1
        if count > limit:
            return None
        if state.is_terminal():
            continue
        actions = [action for action, _ in state.chance_outcomes()] if state.is_chance_node() else state.legal_actions()
        stack.extend(state.child(action) for action in actions)
    return count


class BestResponsePolicy:
    """OpenSpiel's exact best response to a fixed strategy, as a policy (model spec ``openspiel-br``).

    At each decision it plays the move of highest value against the strategy ``against`` plays
    in every other seat, computed by OpenSpiel over the whole game tree once per game and seat.
    Ties go to the first legal move, so it is deterministic.

    Args:
        seed: Unused (the best response is deterministic); kept for the model-spec interface.
        against: The policy whose strategy it best-responds to (default: uniformly random play).
        name: The policy's name in reports.
    """

    #: The model options the bot takes, with their defaults.
    DEFAULTS: ClassVar[dict[str, str]] = {"against": "random"}

    def __init__(self, seed: int = 0, *, against: Policy | None = None, name: str = "openspiel-br") -> None:
        """Keep the strategy to respond to; see the class docstring."""
        self.seed = seed
        self.against: Policy = against if against is not None else RandomPolicy()
        self.name = name
        self._responses: dict[tuple[str, int], Any] = {}  # (game string, seat) -> OpenSpiel's BestResponsePolicy

    @classmethod
    def from_options(cls, seed: int, options: Mapping[str, Any], *, scripted_only: bool = False) -> BestResponsePolicy:
        """The bot a model spec's options ask for: ``against`` (a model spec, default ``random``).

        Args:
            seed: The policy seed.
            options: The model options.
            scripted_only: Refuse an ``against`` that names a language model (game options, servers).

        Raises:
            ValueError: An unknown option, or an ``against`` that names no policy.
        """
        from tsmg.policies import policy_from_spec

        unknown = sorted(set(options) - set(cls.DEFAULTS))
        if unknown:
            raise ValueError(
                f"openspiel-br has no model option {', '.join(unknown)}; its option: against (a model spec)"
            )
        against = options.get("against", "random")
        if not isinstance(against, str):
            raise ValueError(f"openspiel-br's option against must be a model spec such as random, got {against!r}")
        return cls(seed, against=policy_from_spec(against, seed=seed, scripted_only=scripted_only))

    def act(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        """The best response's move for each request."""
        return [Decision(action=self.choose(request)) for request in requests]

    def choose(self, request: DecisionRequest) -> str:
        """The best response's move for one decision (its name, as the game lists it)."""
        return self.search(request.game, request.agent, np.random.default_rng(self.seed))

    def move_probabilities(self, request: DecisionRequest) -> dict[str, float]:
        """All of the probability on the best response's move (so its own exploitability can be computed)."""
        move = self.choose(request)
        return {text: float(text == move) for text in request.legal_actions or ()}

    def search(self, game: Any, agent: AgentID, rng: np.random.Generator) -> str:
        """The best response's move for ``agent`` in the OpenSpiel ``game`` now (``rng`` unused: it is exact).

        Raises:
            ValueError: Not an OpenSpiel game, or one it cannot play (the message says why).
        """
        if not isinstance(game, OpenSpielGame):
            raise ValueError(
                f"openspiel-br plays OpenSpiel games only (openspiel:NAME or OpenSpiel/NAME-v0), not {game.game_id}"
            )
        player = game.player(agent)
        response = self._response(game, player)
        action = response.best_response_action(game.state.information_state_string(player))
        return game.move_name(agent, int(action))

    @staticmethod
    def check_playable(game: OpenSpielGame) -> None:
        """Refuse, in one sentence, a game the best response cannot be computed for.

        Raises:
            ValueError: Simultaneous moves, no information-state strings, or too many histories.
        """
        refuse_unsolvable(game, "openspiel-br")

    def _response(self, game: OpenSpielGame, player: int) -> Any:
        """OpenSpiel's best response of ``player`` in ``game`` (computed once per game and seat).

        The responses to uniformly random play are shared by every bot of the process (each game
        a rollout makes has its own bot, and would otherwise solve the game again).
        """
        from open_spiel.python.algorithms import best_response

        key = (str(game.pyspiel_game), player)
        shared = isinstance(self.against, RandomPolicy)
        responses = _RESPONSES_TO_RANDOM if shared else self._responses
        if key not in responses:
            self.check_playable(game)
            response = best_response.BestResponsePolicy(game.pyspiel_game, player, self._strategy(game))
            with _RESPONSES_LOCK:
                responses[key] = response
        return responses[key]

    def _strategy(self, game: OpenSpielGame) -> Any:
        """The tabular strategy of :attr:`against` (uniform random play without asking, as OpenSpiel's default)."""
        from open_spiel.python import policy as policy_lib

        if isinstance(self.against, RandomPolicy):
            return policy_lib.TabularPolicy(game.pyspiel_game)
        from tsmg.adapters.openspiel_tabular import tabular_policy

        table, _ = tabular_policy(self.against, make_twin(game))
        return table


def make_twin(game: OpenSpielGame) -> OpenSpielGame:
    """A fresh game of the same OpenSpiel game and options (to walk its states without touching ``game``'s)."""
    twin = OpenSpielGame(game.config.model_copy())
    twin.game_id = game.game_id
    return twin


class _Bot(Protocol):
    """What plays a seat inside :class:`OpenSpielVsBot`."""

    def search(self, game: Any, agent: AgentID, rng: np.random.Generator) -> str: ...


class _RandomBot:
    """Uniformly random legal moves, drawn from the generator it is given."""

    def search(self, game: Any, agent: AgentID, rng: np.random.Generator) -> str:
        moves = game.legal_actions(agent)
        return str(moves[int(rng.integers(len(moves)))])


def _make_bot(config: OpenSpielConfig, inner: OpenSpielGame) -> _Bot:
    """The bot ``config.vs`` names for the two-seat game ``inner``, with its options from ``config``.

    Raises:
        ValueError: The bot cannot play this game (the message says why).
    """
    if config.vs == "mcts":
        mcts = MCTSPolicy(simulations=config.simulations)
        inner.reset(seed=0)  # the bot's check resamples a state
        mcts.check_playable(inner)
        return mcts
    if config.vs == "br":
        br = BestResponsePolicy.from_options(0, {"against": config.against}, scripted_only=True)
        br.check_playable(inner)
        return br
    return _RandomBot()


class OpenSpielVsBot(RefereedGame[int]):
    """A two-player OpenSpiel game made single-agent: the learner (``player``) against a bot.

    Built by :class:`~tsmg.adapters.openspiel.OpenSpielGame` when the option ``vs`` is given
    (see the module docstring). Each episode seats the learner (``learner_seat``, or drawn from
    the seed), lets the bot play its seat whenever it is to move (in a simultaneous game, along
    with the learner), and hands the learner its own seat's observation, legal moves and
    rewards. The episode ends when the OpenSpiel game does (or at ``max_steps`` of the
    learner's moves). A win is a positive return, as for any game against a built-in opponent.

    Args:
        config: An :class:`~tsmg.adapters.openspiel.OpenSpielConfig` with ``vs`` set; or its
            fields as ``options``.

    Raises:
        tsmg.registry.GameOptionsError: The game does not have two seats, or ``vs`` names no bot.
    """

    Config = OpenSpielConfig
    config: OpenSpielConfig
    outcome = "win_draw_loss"

    def __init__(self, config: OpenSpielConfig | None = None, **options: Any) -> None:
        """Build the two-seat game and the bot; see the class docstring."""
        from tsmg.registry import GameOptionsError

        self.config = OpenSpielConfig.from_options(config, options)
        # The two-seat game the learner and the bot play: no step limit of its own (the learner's
        # moves are counted here) and every answer it receives is already a legal move.
        self.inner = OpenSpielGame(self.config.model_copy(update={"vs": None, "max_steps": None}))
        self.inner.game_id = f"openspiel:{self.config.game}"
        if len(self.inner.agents) != 2:
            raise GameOptionsError(
                f"vs={self.config.vs} makes a two-player game single-agent; OpenSpiel's {self.config.game} has "
                f"{len(self.inner.agents)} players"
            )
        self.turn_based = self.inner.turn_based
        try:  # a bot that cannot play this game is refused now, in one sentence, not at the first reset
            self.bot: _Bot = _make_bot(self.config, self.inner)
        except ValueError as error:
            raise GameOptionsError(f"vs={self.config.vs}: {error}") from None
        self.seat: AgentID = self.inner.agents[0]  # the learner's seat in the episode in progress

    @property
    def bot_seat(self) -> AgentID:
        """The seat the bot plays in the episode in progress."""
        return next(agent for agent in self.inner.agents if agent != self.seat)

    # ------------------------------------------------------------------ Game implementation
    @property
    def agents(self) -> tuple[AgentID, ...]:
        """The learner alone: ``player``."""
        return ("player",)

    @property
    def observation_lists_moves(self) -> bool:
        """As the game it wraps: its full and compact views list the learner's moves."""
        return self.inner.observation_lists_moves

    def observe(self, agent: AgentID) -> str:
        """The learner's seat's prompt, with a line naming the bot it plays against."""
        self._require_tally()
        self._check_agent(agent)
        head, _, rest = self.inner.observe(self.seat).partition("\n")
        against = f"{self.bot_seat} is played by {self._bot_description()}."
        return "\n".join(line for line in (head, against, rest) if line)

    def state_key(self, agent: AgentID) -> Hashable:
        """The learner's seat and what it observes (the two-seat game's key)."""
        self._check_agent(agent)
        return self.inner.state_key(self.seat)

    @property
    def has_random_start(self) -> bool:
        """Whether the seed changes the first observation (a drawn seat, a deal, or the bot's opening)."""
        if self.config.learner_seat == "random" or self.inner.has_random_start:
            return True
        twin = OpenSpielVsBot(self.config.model_copy())
        starts = {twin.reset(seed=seed)[0]["player"] for seed in range(4)}
        return len(starts) > 1

    @property
    def fork_mode(self) -> ForkMode:
        """``snapshot``: a fork forks the two-seat game (state and generator) and copies the tally."""
        return "snapshot"

    def _fork_parts(self, twin: OpenSpielVsBot) -> None:
        """A fork (:meth:`tsmg.core.RefereedGame.fork`) forks the two-seat game inside."""
        twin.inner = cast(OpenSpielGame, self.inner.fork())

    def __repr__(self) -> str:
        """Show the id, the OpenSpiel game and the options that differ from the defaults."""
        options = self.config.model_dump(exclude_defaults=True, exclude={"game"})
        return f"{type(self).__name__}({self.game_id!r}, game={self.config.game!r}, {options})"

    # ------------------------------------------------------------------ referee hooks
    def _start(self, seed: int | None, options: Mapping[str, Any]) -> dict[AgentID, dict[str, Any]]:
        self.inner.reset(seed=seed, options=options)
        seats = self.inner.agents
        chosen = self.config.learner_seat
        self.seat = seats[int(self.inner.np_random.integers(2))] if chosen == "random" else chosen
        self._bots_play()
        info = {"seat": self.seat, "opponent": f"{self.bot_seat}: {self.config.vs}"}
        return {"player": self._with_information_state(info)}

    def _with_information_state(self, info: dict[str, Any]) -> dict[str, Any]:
        """``info`` with the learner's ``information_state`` when it is to act in a game of hidden information."""
        if self.inner.hidden_information and self.seat in self.inner.active_agents:
            info["information_state"] = self.inner.information_state(self.seat)
        return info

    def _to_move(self) -> tuple[AgentID, ...]:
        return ("player",) if self.seat in self.inner.active_agents else ()

    def answer_spellings(self, agent: AgentID) -> Mapping[str, str]:
        """The learner's spellings of its moves in the game's notation (the inner game's)."""
        return self.inner.answer_spellings(self.seat) if agent == "player" else {}

    def _read(self, agent: AgentID, text: str) -> int | Invalid:
        move = self.inner.parse(self.seat, text)
        return move if isinstance(move, Invalid) else int(move)

    def _advance(self, moves: dict[AgentID, int], infos: dict[AgentID, dict[str, Any]]) -> Mapping[AgentID, float]:
        if not moves:  # an invalid answer under "penalize": the learner answers again
            self._with_information_state(infos["player"])
            return {}
        answers = {self.seat: self.inner.move_name(self.seat, moves["player"]), **self._bot_answers()}
        result = self.inner.step(answers)
        seat_info = result.infos.get(self.seat, {})
        if seat_info.get("valid") is False:  # OpenSpiel refused the joint move (simultaneous games)
            infos["player"].update(valid=False, reason=seat_info.get("reason"), action=None)
        reward = float(result.rewards[self.seat]) + self._bots_play()
        self._with_information_state(infos["player"])
        return {"player": reward}

    def _world_endings(self) -> tuple[bool, bool]:
        return self.inner.done, False

    def _legal_moves(self, agent: AgentID) -> Sequence[int] | None:
        return [self.inner.move_action(self.seat, text) for text in self.inner.legal_actions(self.seat) or ()]

    def _move_text(self, agent: AgentID, move: int) -> str:
        return self.inner.move_name(self.seat, move)

    def _forfeit_rewards(self, agent: AgentID) -> Mapping[AgentID, float]:
        # The learner forfeiting ends on the game's minimum utility, as in the two-seat game.
        so_far = self._require_tally().returns[agent]
        return {agent: min(0.0, float(self.inner.pyspiel_game.min_utility()) - so_far)}

    def _success(self, agent: AgentID) -> bool | None:
        return self.inner.is_success(self.seat) if self.inner.done else None

    # ------------------------------------------------------------------ the bot
    def _bot_description(self) -> str:
        """The bot in the prompt's words."""
        if self.config.vs == "mcts":
            return f"OpenSpiel's MCTS bot ({self.config.simulations} simulations per move)"
        if self.config.vs == "br":
            return f"OpenSpiel's exact best response to {self.config.against} play"
        return "a bot playing uniformly random legal moves"

    def _check_agent(self, agent: AgentID) -> None:
        if agent != "player":
            raise GameError(f"unknown agent {agent!r}; agents are ['player']")

    def _bot_answers(self) -> dict[AgentID, str]:
        """The bot's move if its seat is to move now (with the learner's, in a simultaneous round)."""
        if self.bot_seat not in self.inner.active_agents:
            return {}
        rng = np.random.default_rng(int(self.inner.np_random.integers(2**63)))
        return {self.bot_seat: self.bot.search(self.inner, self.bot_seat, rng)}

    def _bots_play(self) -> float:
        """Let the bot move until the learner is to move or the game ends; the learner's rewards meanwhile."""
        reward = 0.0
        while not self.inner.done and self.seat not in self.inner.active_agents:
            reward += float(self.inner.step(self._bot_answers()).rewards[self.seat])
        return reward
