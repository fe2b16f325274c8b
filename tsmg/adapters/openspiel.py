"""OpenSpiel's games as tsmg games: ``tsmg.make("openspiel:leduc_poker")``.

:class:`OpenSpielGame` plays any game OpenSpiel (``pyspiel``, the ``tsmg[openspiel]`` extra)
registers, under the shared referee of :class:`~tsmg.core.RefereedGame`. The rules stay
OpenSpiel's; this module is only the text layer and the bookkeeping:

* **Seats** are OpenSpiel's players, ``player_0`` ... ``player_{n-1}``. Each seat sees its own
  observation string (the information-state string where the game gives no observation string),
  never another seat's: the prompt adds only the seat's name, its own legal moves and, at the
  end, its own return. In a game of hidden information each seat to act finds its OpenSpiel
  information-state string in ``infos[agent]["information_state"]`` of ``reset`` and ``step``
  (and :meth:`~OpenSpielGame.information_state` gives it any time).
* **Moves** are the texts ``action_to_string`` writes for the seat's legal actions, read under
  the answer rule of :mod:`tsmg.answers` (any case, surrounding punctuation aside) and as the
  field spells them where that names one legal move (:mod:`.openspiel_answers`: chess's ``Bxf7``
  for ``Bxf7+``, ``0-0``, ``e2e4``, ``1. e4``; go's ``d4`` for ``B d4``), nothing else. Where
  OpenSpiel gives two legal actions the same text, each gets its action number
  (``"Pass (action 0)"``) so every move of a decision has a name of its own. Up to
  :data:`MAX_LISTED_MOVES` moves are listed in the prompt; above that (go, hex, chess, ...) the
  prompt gives their number and one example, the answer is still read strictly against the
  whole set, and :meth:`~OpenSpielGame.legal_actions` still returns every move (the random policy
  and constrained choice over the whole set use it).
* **Chance** is drawn from the episode's numpy generator (``reset(seed=...)``) with OpenSpiel's
  outcome probabilities, so the same seed deals the same cards in any process. Games that
  sample chance inside OpenSpiel (``SAMPLED_STOCHASTIC``) cannot be seeded that way and are refused.
* **Simultaneous-move** games are simultaneous rounds: every seat with a legal move answers. A
  round in which a seat answered invalidly under ``on_invalid="penalize"`` is void (OpenSpiel
  needs every seat's move), and ``forfeit_after`` still ends an episode that cannot go on.
* **Rewards** are the change in each seat's OpenSpiel return per round; a seat that forfeits by
  invalid answers ends on the game's minimum utility (its worst outcome). The episode terminates
  when OpenSpiel's state is terminal and is truncated at ``max_steps``.
* **Forking** clones the OpenSpiel state with the random generator (``fork_mode == "snapshot"``).

Games that cannot be played this way are refused by name with the reason
(:data:`REFUSED`, :func:`refusal_reason`): no string observation, no discrete actions, mean-field
dynamics, chance sampled inside OpenSpiel, an implementation that reads uninitialised memory.

With the option ``vs`` (``random``, ``mcts``, ``br``) the game is made single-agent against one of
OpenSpiel's bots: :class:`OpenSpielGame` then builds
:class:`~tsmg.adapters.openspiel_bots.OpenSpielVsBot`, which plays this game inside.

(Past 600 lines: the game, its spec parsing with close-match errors, the refusals and the id
registration all read the same pyspiel game type, so they stay together; OpenSpiel's bots (MCTS,
the best response) and ``vs`` live in :mod:`tsmg.adapters.openspiel_bots`.)

Example:
    >>> import tsmg
    >>> game = tsmg.make("openspiel:kuhn_poker")
    >>> observations, _ = game.reset(seed=0)
    >>> game.active_agents, game.legal_actions("player_0")
    (('player_0',), ['Pass', 'Bet'])
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import os
import re
import sys
import threading
from collections.abc import Hashable, Iterator, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pyspiel
from pydantic import Field, model_validator

from tsmg import loading
from tsmg.adapters import openspiel_views
from tsmg.adapters.openspiel_answers import notation_for
from tsmg.answers import MoveNames
from tsmg.core import AgentID, ForkMode, GameConfig, GameError, Invalid, RefereedGame, StepResult
from tsmg.lap import MAX_LISTED_ACTIONS
from tsmg.registry import OPENSPIEL_PREFIX, GameOptionsError, GameSpec, UnknownGameError

if TYPE_CHECKING:
    from tsmg.exploitability import ExploitabilityReport
    from tsmg.policies import Policy

__all__ = [
    "MAX_LISTED_MOVES",
    "PREFIX",
    "REFUSED",
    "OpenSpielConfig",
    "OpenSpielGame",
    "UnplayableGameError",
    "family",
    "load",
    "openspiel_spec",
    "quiet_openspiel",
    "refusal_reason",
    "refused_games",
]

#: The id prefix of an OpenSpiel game given by its OpenSpiel name: ``openspiel:NAME(PARAMS)``.
PREFIX = OPENSPIEL_PREFIX
#: The single-agent game against a bot that ``vs=BOT`` builds (:mod:`tsmg.adapters.openspiel_bots`).
VS_BOT_GAME = "tsmg.adapters.openspiel_bots:OpenSpielVsBot"
#: What measures a policy's exploitability in an OpenSpiel game (:meth:`OpenSpielGame.exploitability`).
EXPLOITABILITY = "tsmg.adapters.openspiel_tabular:exploitability"
#: Decisions with more legal moves than this do not list them in the prompt (the LAP's rule too).
MAX_LISTED_MOVES = MAX_LISTED_ACTIONS
#: The games OpenSpiel registers that load with default parameters and are still refused, with the
#: reason (kept from growing by a test; :func:`refusal_reason` finds the same reasons from the game type).
_NO_ACTIONS = "it has no discrete actions to name (its moves are action structs: num_distinct_actions is 0)"
_MEAN_FIELD = "it is a mean-field game (one player against a population distribution, not seats taking turns)"
_SAMPLED_CHANCE = (
    "its chance is sampled inside OpenSpiel (SAMPLED_STOCHASTIC), where the episode's seed cannot reach it and a "
    "fork cannot copy it"
)
_NO_TEXT = "it gives no observation string and no information-state string: a seat would see nothing"
_UNSAFE = (
    "OpenSpiel 2.0.2's implementation reads uninitialised memory after the first move: its move names change "
    "from run to run and stepping it can crash the process"
)
REFUSED: dict[str, str] = {
    "crossword": _NO_ACTIONS,
    "mfg_crowd_modelling": _MEAN_FIELD,
    "mfg_crowd_modelling_2d": _MEAN_FIELD,
    "mfg_dynamic_routing": _MEAN_FIELD,
    "mfg_garnet": _MEAN_FIELD,
    "bridge_uncontested_bidding": _SAMPLED_CHANCE,
    "negotiation": _SAMPLED_CHANCE,
    "stones_and_gems": _SAMPLED_CHANCE,
    "tarok": _SAMPLED_CHANCE,
    "morpion_solitaire": _UNSAFE,
}


def refused_games() -> dict[str, str]:
    """The refused games as listings name them (``openspiel:NAME``), with the reason (for tsmg.registry.refusals)."""
    return {f"{PREFIX}{name}": reason for name, reason in REFUSED.items()}


#: Refused for a fault of their implementation, not for what their game type says.
_BROKEN = frozenset({"morpion_solitaire"})
_PLAYER = re.compile(r"^player_(\d+)$")


_QUIET_LOCK = threading.Lock()


@contextlib.contextmanager
def quiet_openspiel() -> Iterator[None]:
    """Silence what OpenSpiel's C++ writes to stderr while the block runs.

    OpenSpiel prints every error it raises (``OpenSpiel exception: ...``) and some warnings on
    file descriptor 2 before Python sees the exception; tsmg reports the exception itself, once,
    in one line. Blocks of several threads take turns (file descriptor 2 is the process's), and
    anything written to stderr meanwhile is lost: keep them short (loading a game, one check).
    """
    with _QUIET_LOCK:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            with open(os.devnull, "w") as sink:
                os.dup2(sink.fileno(), 2)
                try:
                    yield
                finally:
                    os.dup2(saved, 2)
        finally:
            os.close(saved)


class UnplayableGameError(ValueError):
    """An OpenSpiel game that cannot be played as a tsmg game; the message says why."""


def refusal_reason(game: Any) -> str | None:
    """Why the loaded pyspiel ``game`` cannot be played as a tsmg game, or None if it can."""
    game_type = game.get_type()
    if game_type.short_name in _BROKEN:
        return REFUSED[game_type.short_name]
    if game_type.dynamics == pyspiel.GameType.Dynamics.MEAN_FIELD:
        return _MEAN_FIELD
    if not (game_type.provides_observation_string or game_type.provides_information_state_string):
        return _NO_TEXT
    if game.num_distinct_actions() <= 0:
        return _NO_ACTIONS
    if game_type.chance_mode == pyspiel.GameType.ChanceMode.SAMPLED_STOCHASTIC:
        return _SAMPLED_CHANCE
    return None


def family(game: Any) -> str:
    """The family of a pyspiel game, from its type's dynamics, utility, information and chance fields.

    ``simultaneous`` (simultaneous moves), ``cooperative`` (identical payoffs), ``single-player``,
    then by information and chance: ``board`` (perfect information, no chance), ``dice`` (perfect
    information with chance), ``card`` (imperfect information with chance: poker, bridge, also
    Liar's Dice), ``hidden`` (imperfect information without chance: phantom and dark variants,
    Kriegspiel, Battleship).
    """
    game_type = game.get_type()
    perfect = game_type.information == pyspiel.GameType.Information.PERFECT_INFORMATION
    chance = game_type.chance_mode != pyspiel.GameType.ChanceMode.DETERMINISTIC
    if game_type.dynamics == pyspiel.GameType.Dynamics.SIMULTANEOUS:
        return "simultaneous"
    if game_type.utility == pyspiel.GameType.Utility.IDENTICAL:
        return "cooperative"
    if game.num_players() == 1:
        return "single-player"
    if perfect:
        return "dice" if chance else "board"
    return "card" if chance else "hidden"


def load(game_string: str) -> Any:
    """The pyspiel game ``game_string`` names (``"goofspiel(num_cards=4)"``), refused games excepted.

    Raises:
        UnknownGameError: No OpenSpiel game has that name (the message gives close matches).
        GameOptionsError: OpenSpiel rejects the parameters (its own message, on one line).
        UnplayableGameError: The game cannot be played as a tsmg game (the message says why).
    """
    name = game_string.split("(", 1)[0].strip()
    names = pyspiel.registered_names()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=5, cutoff=0.6)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise UnknownGameError(
            f"OpenSpiel has no game {name!r}.{hint} pyspiel.registered_names() lists them; "
            "`tsmg games` lists the registered OpenSpiel/NAME-v0 ids"
        )
    if name in REFUSED:
        raise UnplayableGameError(f"OpenSpiel's {name} cannot be played as a tsmg game: {REFUSED[name]}")
    try:
        with quiet_openspiel():
            game = pyspiel.load_game(game_string)
    except (pyspiel.SpielError, IndexError, ValueError) as error:  # nfg_game without a file: IndexError
        message = " ".join(str(error).split())
        raise GameOptionsError(f"OpenSpiel cannot load {game_string!r}: {message}") from None
    reason = refusal_reason(game)
    if reason is not None:
        raise UnplayableGameError(f"OpenSpiel's {game_string} cannot be played as a tsmg game: {reason}")
    return game


def openspiel_spec(game_id: str) -> GameSpec:
    """The spec of ``openspiel:NAME(PARAMS)`` (what :func:`tsmg.make` builds for such an id).

    The game is loaded here, so a bad name or bad parameters fail before anything is made.
    """
    game_string = game_id.removeprefix(PREFIX).strip()
    if not game_string:
        raise UnknownGameError(f"{game_id!r} names no OpenSpiel game: write openspiel:NAME, e.g. openspiel:kuhn_poker")
    game = load(game_string)
    players = game.num_players()
    return GameSpec(
        id=game_id,
        entry_point=OpenSpielGame,
        kwargs={"game": game_string},
        description=f"OpenSpiel's {game_string} [{family(game)}, {players} player{'s' if players > 1 else ''}].",
    )


class OpenSpielConfig(GameConfig):
    """Options of an OpenSpiel game: which game, plus the options every game takes."""

    game: str = Field(description="OpenSpiel game string: a name with optional parameters, goofspiel(num_cards=4).")
    vs: Literal["random", "mcts", "br"] | None = Field(
        default=None,
        description=(
            "Make a two-player game single-agent against OpenSpiel's bot in the other seat: random, mcts "
            "(openspiel-mcts) or br (the exact best response; small games)."
        ),
    )
    learner_seat: Literal["random", "player_0", "player_1"] = Field(
        default="random", description="With vs: the learner's seat; 'random' draws it from the seed."
    )
    simulations: int = Field(default=100, ge=1, description="With vs=mcts: the bot's MCTS simulations per move.")
    against: str = Field(
        default="random", description="With vs=br: the scripted policy the bot best-responds to (random or fixed:TEXT)."
    )
    view: openspiel_views.TextView = Field(
        default="full",
        description=(
            "'full': role, rules card, private information and history in words, the moves one per line; "
            "'compact': the same without the rules card; 'raw': OpenSpiel's observation string (the first text)."
        ),
    )
    list_moves: bool = Field(
        default=True,
        description=(
            "Whether the full and compact views list the legal moves (false: the seat is told to name one in "
            "OpenSpiel's notation, as `--legal-moves none` asks; the raw view always lists them)."
        ),
    )

    @model_validator(mode="after")
    def _moves_listed_by_raw(self) -> OpenSpielConfig:
        if not self.list_moves and self.view == "raw":
            raise ValueError(
                "list_moves=false (--legal-moves none) needs view full or compact: the raw view is OpenSpiel's "
                "first text byte for byte, its legal moves included"
            )
        return self


class OpenSpielGame(RefereedGame[int]):
    """An OpenSpiel game played by text (see the module docstring for the rules of the adaptation).

    Args:
        config: An :class:`OpenSpielConfig`; alternatively pass its fields as ``options``.
        **options: ``game`` (the OpenSpiel game string) and the options of
            :class:`~tsmg.core.GameConfig` (``max_steps``, ``on_invalid``, ...).

    Raises:
        UnknownGameError, GameOptionsError, UnplayableGameError: as :func:`load`.
    """

    Config = OpenSpielConfig
    config: OpenSpielConfig

    def __new__(cls, config: OpenSpielConfig | None = None, **options: Any) -> Any:
        """The game itself, or with ``vs`` set the single-agent game against a bot (:mod:`.openspiel_bots`)."""
        vs = options.get("vs", config.vs if config is not None else None)
        if cls is OpenSpielGame and vs is not None:
            vs_bot: Any = loading.load(VS_BOT_GAME)  # by string: that module builds on this one
            return vs_bot(config, **options)  # not an OpenSpielGame: Python does not call __init__ again
        return super().__new__(cls)

    def __init__(self, config: OpenSpielConfig | None = None, **options: Any) -> None:
        """Load the OpenSpiel game; see the class docstring."""
        self.config = OpenSpielConfig.from_options(config, options)
        self.pyspiel_game: Any = load(self.config.game)
        game_type = self.pyspiel_game.get_type()
        self.game_type: Any = game_type
        self.turn_based = game_type.dynamics != pyspiel.GameType.Dynamics.SIMULTANEOUS
        self._agents = tuple(f"player_{index}" for index in range(self.pyspiel_game.num_players()))
        self._uses_observation = bool(game_type.provides_observation_string)
        self._notation = notation_for(self.pyspiel_game)  # answers in the game's notation (openspiel_answers)
        self._rng: np.random.Generator | None = None
        self._state: Any = None
        self._seen: dict[AgentID, str] = {}
        self._texts: dict[AgentID, str] = {}
        self._moves: dict[AgentID, MoveNames[int]] = {}
        self._names: dict[AgentID, dict[int, str]] = {}  # action number -> move name, per active seat

    # ------------------------------------------------------------------ the OpenSpiel state
    @property
    def state(self) -> Any:
        """The pyspiel state in play (do not change it: step the game instead)."""
        if self._state is None:
            raise GameError("no episode in progress; call reset() first")
        return self._state

    @property
    def np_random(self) -> np.random.Generator:
        """The generator chance is drawn from (created on first use if no seed was ever given)."""
        if self._rng is None:
            self._rng = np.random.default_rng()
        return self._rng

    def player(self, agent: AgentID) -> int:
        """OpenSpiel's player number of ``agent``."""
        match = _PLAYER.match(agent)
        if match is None or agent not in self._agents:
            raise GameError(f"unknown agent {agent!r}; agents are {list(self._agents)}")
        return int(match.group(1))

    def move_action(self, agent: AgentID, text: str) -> int:
        """OpenSpiel's action number of the legal move named ``text`` (a canonical text of :meth:`legal_actions`)."""
        return self._moves[agent][text]

    def reset_to(self, state: Any) -> None:
        """Start an episode at a copy of the OpenSpiel ``state`` (chance after it drawn from the game's generator).

        Exact exploitability (:meth:`exploitability`) asks a policy what it plays at every
        information state this way.
        """
        self.reset()
        self._state = state.clone()
        _resolve_chance(self._state, self.np_random)
        self._judge_endings(self._require_tally())
        self._refresh()

    def exploitability(self, policy: Policy) -> ExploitabilityReport:
        """The exact exploitability of ``policy`` in this game, by OpenSpiel's best responses.

        The capability :class:`tsmg.exploitability.HasExploitability` of every OpenSpiel game
        (:func:`tsmg.adapters.openspiel_tabular.exploitability`); a game that is not two-player
        zero-sum, or too large to enumerate, refuses in one sentence.

        Raises:
            ValueError: Not such a game, or a policy whose move probabilities cannot be read.
        """
        measure: Any = loading.load(EXPLOITABILITY)  # by string: that module builds on this one
        report: ExploitabilityReport = measure(policy, self)
        return report

    def move_name(self, agent: AgentID, action: int) -> str:
        """The name of ``agent``'s legal move with OpenSpiel's action number ``action`` (as legal_actions lists it).

        Raises:
            GameError: ``action`` is not one of ``agent``'s legal actions now.
        """
        name = self._names.get(agent, {}).get(action)
        if name is None:
            raise GameError(f"action {action} is not a legal move of {agent} now")
        return name

    # ------------------------------------------------------------------ Game implementation
    @property
    def agents(self) -> tuple[AgentID, ...]:
        """``player_0`` ... one seat per OpenSpiel player."""
        return self._agents

    def observe(self, agent: AgentID) -> str:
        """``agent``'s prompt: its own observation string, its legal moves when it acts, its return at the end."""
        self._require_tally()
        self.player(agent)
        return self._texts[agent]

    def legal_actions(self, agent: AgentID) -> list[str] | None:
        """The names of ``agent``'s legal moves now (every one, listed in the prompt or not)."""
        if agent not in self.active_agents:
            return []
        return list(self._moves[agent].canonical)

    def state_key(self, agent: AgentID) -> Hashable:
        """What ``agent`` observes now: its seat and OpenSpiel's observation string (``raw``) or its prompt."""
        self._require_tally()
        return (self.player(agent), self._seen[agent] if self.config.view == "raw" else self._texts[agent])

    @property
    def observation_lists_moves(self) -> bool:
        """The readable views list the legal moves themselves (one per line); the raw text leaves it to the LAP too."""
        return self.config.view != "raw" and self.config.list_moves

    def information_state(self, agent: AgentID) -> str:
        """OpenSpiel's information-state string of ``agent`` now (its observation string where the game has none).

        Two decisions of a seat share a prompt exactly when they share this string
        (:mod:`tsmg.adapters.openspiel_infostates` checks it).
        """
        self._require_tally()
        player = self.player(agent)
        if self.game_type.provides_information_state_string:
            return str(self.state.information_state_string(player))
        return str(self.state.observation_string(player))

    @cached_property
    def hidden_information(self) -> bool:
        """Whether a seat may not see everything: imperfect information, or simultaneous moves (pending moves).

        OpenSpiel calls some simultaneous games perfect-information (Goofspiel without ``imp_info``);
        a seat still bids without seeing the other bids of the round.
        """
        perfect = self.game_type.information == pyspiel.GameType.Information.PERFECT_INFORMATION
        return not perfect or not self.turn_based

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[dict[AgentID, str], dict[AgentID, dict[str, Any]]]:
        """Start an episode; in a game of hidden information each seat to act gets ``information_state`` in its info."""
        observations, infos = super().reset(seed, options)
        self._note_information_states(infos)
        return observations, infos

    def step(self, actions: Mapping[AgentID, str | Invalid]) -> StepResult:
        """Play a round; in a game of hidden information each seat to act next gets ``information_state`` in its info.

        ``infos[agent]["information_state"]`` is :meth:`information_state` at the decision the
        seat's new observation asks for (OpenSpiel's string: what a policy may condition on).
        """
        result = super().step(actions)
        self._note_information_states(result.infos)
        return result

    def _note_information_states(self, infos: dict[AgentID, dict[str, Any]]) -> None:
        if self.hidden_information:
            for agent in self.active_agents:
                infos.setdefault(agent, {})["information_state"] = self.information_state(agent)

    @cached_property
    def has_random_start(self) -> bool:
        """Whether the seed changes a first observation (chance that a seat sees before the first move).

        Found by dealing with seeds 0, 1, ... until a start differs from seed 0's (at most 8 deals).
        """
        if self.game_type.chance_mode == pyspiel.GameType.ChanceMode.DETERMINISTIC:
            return False
        first = None
        for seed in range(8):
            state = self.pyspiel_game.new_initial_state()
            _resolve_chance(state, np.random.default_rng(seed))
            start = tuple(self._raw_observation(state, player) for player in range(len(self._agents)))
            if first is not None and start != first:
                return True
            first = start
        return False

    @property
    def fork_mode(self) -> ForkMode:
        """``snapshot``: a fork clones the OpenSpiel state and the random generator."""
        return "snapshot"

    def _fork_parts(self, twin: OpenSpielGame) -> None:
        """A fork (:meth:`tsmg.core.RefereedGame.fork`) clones the OpenSpiel state, the generator and the caches."""
        twin._state = self._state.clone()
        twin._rng = copy.deepcopy(self._rng)
        twin._seen, twin._texts = dict(self._seen), dict(self._texts)
        twin._moves, twin._names = dict(self._moves), dict(self._names)

    def __repr__(self) -> str:
        """Show the id, the OpenSpiel game and the options that differ from the defaults."""
        options = self.config.model_dump(exclude_defaults=True, exclude={"game"})
        return f"{type(self).__name__}({self.game_id!r}, game={self.config.game!r}, {options})"

    # ------------------------------------------------------------------ referee hooks
    def _start(self, seed: int | None, options: Mapping[str, Any]) -> dict[AgentID, dict[str, Any]]:
        if options:
            raise GameError(f"OpenSpiel games take no reset options, got {sorted(options)}")
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._state = self.pyspiel_game.new_initial_state()
        _resolve_chance(self._state, self.np_random)
        return {}

    def _to_move(self) -> tuple[AgentID, ...]:
        state = self.state
        if state.is_terminal():
            return ()
        if state.is_simultaneous_node():
            return tuple(agent for player, agent in enumerate(self._agents) if state.legal_actions(player))
        return (self._agents[state.current_player()],)

    def _read(self, agent: AgentID, text: str) -> int | Invalid:
        moves = self._moves.get(agent)
        if not moves:
            return Invalid("the game is over" if self.done else f"it is not {agent}'s turn")
        example = moves.canonical[0]
        expected = f"expected one of the {len(moves)} legal moves in OpenSpiel's notation, e.g. {example}"
        expected_if_unlisted = expected if len(moves) > MAX_LISTED_MOVES else None
        return self._notation.read(self.state, self.player(agent), moves, text, expected_if_unlisted)

    def answer_spellings(self, agent: AgentID) -> Mapping[str, str]:
        """The other spellings of ``agent``'s legal moves it may answer with (:mod:`.openspiel_answers`)."""
        moves = self._moves.get(agent)
        return self._notation.spellings(self.state, self.player(agent), moves).by_move() if moves else {}

    def _advance(self, moves: dict[AgentID, int], infos: dict[AgentID, dict[str, Any]]) -> Mapping[AgentID, float]:
        state = self.state
        before = state.returns()
        if state.is_simultaneous_node():
            active = self._to_move()
            if any(agent not in moves for agent in active):
                for agent in active:  # OpenSpiel needs every seat's move: the round is void
                    infos[agent]["round_void"] = True
                return {}
            joint = [moves.get(agent, pyspiel.INVALID_ACTION) for agent in self._agents]
            if not self._apply(lambda twin: twin.apply_actions(joint), active, infos):
                return {}
        else:
            if not moves:  # an invalid answer under "penalize": the same seat answers again
                return {}
            [(agent, action)] = moves.items()
            if not self._apply(lambda twin: twin.apply_action(action), (agent,), infos):
                return {agent: -self.config.invalid_penalty}
        after = self.state.returns()
        return {agent: float(after[index] - before[index]) for index, agent in enumerate(self._agents)}

    def _apply(self, play: Any, agents: Sequence[AgentID], infos: dict[AgentID, dict[str, Any]]) -> bool:
        """Play on a clone; on OpenSpiel's refusal (SpielError) the answer becomes invalid and the state stays."""
        twin = self.state.clone()
        try:
            play(twin)
        except pyspiel.SpielError as error:
            reason = f"OpenSpiel refused the move: {' '.join(str(error).split())}"
            tally = self._require_tally()
            for agent in agents:
                infos[agent].update(valid=False, reason=reason, action=None)
                tally.invalid_streak[agent] += 1
            return False
        _resolve_chance(twin, self.np_random)
        self._state = twin
        return True

    def _world_endings(self) -> tuple[bool, bool]:
        return bool(self.state.is_terminal()), False

    def _legal_moves(self, agent: AgentID) -> Sequence[int] | None:
        return [self._moves[agent][text] for text in self._moves[agent].canonical]

    def _move_text(self, agent: AgentID, move: int) -> str:
        text = self._names.get(agent, {}).get(move)
        return text if text is not None else str(self.state.action_to_string(self.player(agent), move))

    def _forfeit_rewards(self, agent: AgentID) -> Mapping[AgentID, float]:
        # The forfeiting seat ends on the game's minimum utility, its worst outcome.
        so_far = self._require_tally().returns[agent]
        return {agent: min(0.0, float(self.pyspiel_game.min_utility()) - so_far)}

    def _success(self, agent: AgentID) -> bool | None:
        """A win in a finished zero-sum game (a positive return); undefined otherwise."""
        if self.game_type.utility != pyspiel.GameType.Utility.ZERO_SUM or not self.state.is_terminal():
            return None
        return bool(self.state.returns()[self.player(agent)] > 0)

    def _refresh(self) -> None:
        state = self.state
        active = set(self._to_move()) if not self.done else set()
        self._moves, self._names = {}, {}
        for player, agent in enumerate(self._agents):
            self._seen[agent] = self._raw_observation(state, player)
            if agent in active:
                self._moves[agent] = moves = _move_names(state, player)
                self._names[agent] = {action: text for text, action in moves.items()}
            if self.config.view == "raw":
                self._texts[agent] = self._render(agent, player, active)
            else:
                listed = self._moves[agent].canonical if agent in active and self.config.list_moves else None
                ending = self._ending(agent, active) if listed is None else ""  # the view shows it only then
                self._texts[agent] = openspiel_views.render(state, player, self.config.view, listed, ending)

    # ------------------------------------------------------------------ text
    def _raw_observation(self, state: Any, player: int) -> str:
        if self._uses_observation:
            return str(state.observation_string(player))
        return str(state.information_state_string(player))

    def _ending(self, agent: AgentID, active: set[AgentID]) -> str:
        """The closing line of a seat that does not act now: its return at the end, or whom it waits for."""
        if self.done:
            return f"The game is over. Your return: {self._require_tally().returns[agent]:+g}."
        if agent in active:  # only with list_moves=false: else the view lists the moves here
            example = _notation_example(self.state.get_game(), self.player(agent))
            return "It is your turn. Your legal moves are not listed: name one the way OpenSpiel writes moves" + (
                f" (at the start of a game, {example} is one)." if example else "."
            )
        waiting = [other for other in self._agents if other in active]
        return f"Waiting for {', '.join(waiting)}." if waiting else "Waiting."

    def _render(self, agent: AgentID, player: int, active: set[AgentID]) -> str:
        """The ``raw`` view: the adapter's first text, byte for byte (openspiel-small-v1 is played with it)."""
        name = self.config.game
        lines = [f"OpenSpiel game {name}. You are {agent} ({len(self._agents)} players).", self._seen[agent].rstrip()]
        if self.done:
            returns = self._require_tally().returns
            lines.append(f"The game is over. Your return: {returns[agent]:+g}.")
        elif agent in active:
            moves = self._moves[agent].canonical
            if len(moves) <= MAX_LISTED_MOVES:
                lines.append(f"Your legal moves: {', '.join(moves)}.")
            else:
                lines.append(
                    f"You have {len(moves)} legal moves, too many to list: answer with one in OpenSpiel's notation "
                    f"(as action_to_string writes it), e.g. {moves[0]}."
                )
        else:
            waiting = [other for other in self._agents if other in active]
            lines.append(f"Waiting for {', '.join(waiting)}." if waiting else "Waiting.")
        return "\n".join(line for line in lines if line)


#: Chance outcomes :func:`_notation_example` draws before it gives up on reaching a decision.
_MAX_EXAMPLE_CHANCE = 1_000


def _notation_example(game: Any, player: int) -> str | None:
    """A move of ``player`` in the game's first decision, named as OpenSpiel writes it: the notation, not a hint.

    Taken from the start of the game, its chance outcomes drawn with a generator of fixed seed, so it
    is the same at every decision. Always the first outcome would never end in some games (crazy
    eights deals on forever), so the draw follows the outcome probabilities and stops after
    :data:`_MAX_EXAMPLE_CHANCE` outcomes (no example then).
    """
    state = game.new_initial_state()
    rng = np.random.default_rng(0)
    for _ in range(_MAX_EXAMPLE_CHANCE):
        if not state.is_chance_node():
            break
        _resolve_one_chance(state, rng)
    else:
        return None
    actions = state.legal_actions(player) if not state.is_terminal() and not state.is_chance_node() else []
    return str(state.action_to_string(player, actions[0])) if actions else None


def _resolve_chance(state: Any, rng: np.random.Generator) -> None:
    """Play chance nodes with outcomes drawn from ``rng`` until a seat must move or the game ends."""
    while state.is_chance_node():
        _resolve_one_chance(state, rng)


def _resolve_one_chance(state: Any, rng: np.random.Generator) -> None:
    """Play one chance outcome of ``state``, drawn from ``rng`` with OpenSpiel's probabilities."""
    outcomes = state.chance_outcomes()
    probabilities = np.array([probability for _, probability in outcomes], dtype=float)
    index = int(rng.choice(len(outcomes), p=probabilities / probabilities.sum()))
    state.apply_action(outcomes[index][0])


def _move_names(state: Any, player: int) -> MoveNames[int]:
    """The seat's legal moves by name: ``action_to_string``, runs of whitespace read as one space.

    A text OpenSpiel gives two legal actions gets the action number (``"Pass (action 0)"``).
    """
    actions = list(state.legal_actions(player))
    texts = [" ".join(str(state.action_to_string(player, action)).split()) or f"action {action}" for action in actions]
    counts: dict[str, int] = {}
    for text in texts:
        counts[text] = counts.get(text, 0) + 1
    names = {}
    for action, text in zip(actions, texts, strict=True):
        names[f"{text} (action {action})" if counts[text] > 1 else text] = action
    return MoveNames(names)


# ------------------------------------------------------------------------------ OpenSpiel's bots
