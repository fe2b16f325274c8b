"""TextArena's environments as tsmg games: ``tsmg.make("textarena:TicTacToe-v0")``.

:class:`TextArenaGame` plays any environment TextArena (``textarena``, the ``tsmg[textarena]``
extra) registers, under the shared referee of :class:`~tsmg.core.RefereedGame`. The rules stay
TextArena's; this module is the text layer and the bookkeeping:

* **Seats** are TextArena's players, ``player_0`` ... ``player_{n-1}`` (``num_players``: the
  registered ids use the smallest count the environment accepts, two where it takes two). Each
  seat sees the messages TextArena addresses to it (its prompt, the game's messages, the other
  players' public moves) and never the messages addressed to another seat: TextArena keeps one
  message list per player, and the adapter renders only the seat's own.
* **Answers** are strict: an answer goes to a copy of the environment first, and when TextArena
  calls it an invalid move (its ``set_invalid_move``) the answer is :class:`~tsmg.core.Invalid`
  with TextArena's reason and the environment in play never sees it (TextArena's own "one more
  try, then you lose" allowance is the referee's ``forfeit_after`` here). Where a seat's
  messages announce moves in brackets (``'[4]'``, ``[check]``), :meth:`~TextArenaGame.legal_actions`
  lists those TextArena accepts now, and an answer naming one of them under the answer rule of
  :mod:`tsmg.answers` (``**[4]**``, ``[CHECK].``) plays that move. On the ids whose moves are
  listed (:data:`~tsmg.adapters.textarena_moves.LISTED_MOVES`, derived from TextArena's behaviour)
  nothing else is a move, and an answer naming two moves (``[up] [right]``) is invalid with a reason
  saying so. On the others (``open_text``: free speech, offers, moves shown only by example) any
  other answer is TextArena's to judge on a copy, read strictly where it can be
  (:mod:`~tsmg.adapters.textarena_moves`: two moves of which TextArena would play one, a sentence
  around a move). Any other exception TextArena raises is an error of the game
  (:class:`~tsmg.core.GameCodeError`).
* **Seeds**: TextArena draws its randomness from Python's global ``random`` module (its
  ``State`` calls ``random.seed(seed)``, its games call ``random.shuffle``, ``random.choice``...).
  Each episode keeps its own state of that module, seeded by ``reset(seed=...)``; every call into TextArena
  runs with the episode's state swapped in and the caller's restored after (under a lock), so the
  same seed plays the same episode in any process and the caller's ``random`` is left as it was
  (TextArena's own import draws from it too, and runs under a saved and restored state).
* **Rewards** are TextArena's rewards, paid when its episode ends (0 before); a seat that
  forfeits by invalid answers scores -1, TextArena's loss. The episode terminates when TextArena
  says it is done and is truncated at ``max_steps``. A seat succeeds when it wins: TextArena rewards
  it highest and some seat lower (a draw is no one's success; one seat: TextArena's full reward).
* **Forking** is cheap (``fork_mode == "snapshot"``): the environment in play is never changed in
  place, every move adopting the copy it was tried on, so a fork shares it and the episode's
  random state until either side moves.

Environments that cannot be played here are refused with the reason and how to provide what is
missing (:mod:`tsmg.adapters.textarena_refusals`: NLTK's data, this Python's syntax, a module or
file TextArena lacks; hosted judges and numpy's global generator always).

(Past 600 lines: the game, the trial copies its strictness rests on, the episode's random state and
the id's spec all read the same TextArena environment, so they stay together; the refusals and the
rule of what an answer plays live in their own modules.)

Example:
    >>> import tsmg
    >>> game = tsmg.make("textarena:TicTacToe-v0")
    >>> observations, _ = game.reset(seed=0)
    >>> game.active_agents, game.legal_actions("player_0")[:3]
    (('player_0',), ['[0]', '[1]', '[2]'])
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import io
import pickle
import random
import re
from collections.abc import Hashable, Iterator, Mapping
from functools import cached_property
from typing import Any

from pydantic import Field

from tsmg.adapters import textarena_refusals as refusals
from tsmg.adapters.textarena_moves import LISTED_MOVES, NEUTRAL_ANSWER, bracketed, named_moves, play_signature, relays
from tsmg.adapters.textarena_refusals import ALWAYS, PROBED, UnplayableGameError
from tsmg.answers import MAX_ANSWER_CHARS, MoveNames, quote
from tsmg.core import AgentID, ForkMode, GameConfig, GameError, Invalid, RefereedGame
from tsmg.lap import MAX_LISTED_ACTIONS
from tsmg.registry import TEXTARENA_PREFIX, GameOptionsError, GameSpec, UnknownGameError

__all__ = [
    "PREFIX",
    "TextArenaConfig",
    "TextArenaGame",
    "UnplayableGameError",
    "base_env_ids",
    "refused_games",
    "textarena_spec",
]

#: The id prefix of a TextArena environment given by its TextArena id: ``textarena:TicTacToe-v0``.
PREFIX = TEXTARENA_PREFIX
#: Player counts tried, in this order, when an environment's count is not given.
PLAYER_COUNTS = (2, 1, 3, 4, 5, 6, 7, 8)
#: Longest free-text answer passed to TextArena (negotiation and debate answers are sentences).
MAX_FREE_ANSWER_CHARS = 1000
#: Messages of a seat's history shown in its prompt after the first (the rules): the most recent ones.
MAX_SHOWN_MESSAGES = 40
#: Bracketed moves tried per decision (each costs a trial step on a copy of the environment).
MAX_CANDIDATES = 64
#: Bracketed parts of an open-text answer tried alone, to tell two moves in one answer (each costs a trial).
MAX_PARTS = 8


def refused_games() -> dict[str, str]:
    """The environments refused here as a user names them (``textarena:ID``), with the reason (tsmg.registry.refusals).

    Those of :data:`~tsmg.adapters.textarena_refusals.ALWAYS` and those of
    :data:`~tsmg.adapters.textarena_refusals.PROBED` that this machine cannot play now.
    """
    refused = {}
    for env_id in dict.fromkeys([*ALWAYS, *PROBED]):
        if env_id not in _registry():
            continue
        try:
            entry, kwargs = _env_factory(env_id)
            _player_count(env_id, entry, kwargs)
        except UnplayableGameError as error:
            refused[f"{PREFIX}{env_id}"] = error.reason
    return refused


def _registry() -> dict[str, Any]:
    return refusals.registry()


def base_env_ids() -> list[str]:
    """TextArena's environment ids without its wrapper variants (``-train``, ``-raw``: same game, other wrappers)."""
    ids = list(_registry())
    return [env_id for env_id in ids if not env_id.endswith(("-train", "-raw"))]


def _env_factory(env_id: str) -> tuple[Any, dict[str, Any]]:
    """The environment class of ``env_id`` and its registered keyword arguments (no wrappers: tsmg renders)."""
    registry = _registry()
    if env_id not in registry:
        names = base_env_ids()
        close = difflib.get_close_matches(env_id, names, n=5, cutoff=0.6)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise UnknownGameError(
            f"TextArena has no environment {env_id!r}.{hint} `tsmg games` lists the registered TextArena/ID ids"
        )
    base = env_id.removesuffix("-train").removesuffix("-raw")
    reason = refusals.refusal(base)
    if reason is not None:
        raise UnplayableGameError(base, reason)
    spec = registry[env_id]
    return refusals.load_entry(spec.entry_point), dict(spec.kwargs)  # TextArena names entry points as module:Class


class _Randomness:
    """An episode's own state of Python's ``random`` module, which TextArena's games draw from.

    (Two of TextArena's games draw from numpy's global generator instead, IteratedStagHunt and
    SpellingBee; both are refused for other reasons, and a test keeps every game that does refused.)
    """

    def __init__(self, seed: int | None) -> None:
        self.python = random.Random(seed).getstate()

    def __deepcopy__(self, memo: dict[int, Any]) -> _Randomness:
        """A copy sharing the saved state, an immutable tuple."""
        twin = copy.copy(self)
        memo[id(self)] = twin
        return twin

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Swap this state in for the block (under the lock), keep what the block drew, restore the caller's."""
        with refusals.RANDOM_LOCK:
            saved = random.getstate()
            random.setstate(self.python)
            try:
                with contextlib.redirect_stdout(io.StringIO()):  # some environments print their boards
                    yield
            finally:
                self.python = random.getstate()
                random.setstate(saved)


class _MarksInvalidMoves:
    """Mixed into TextArena's state class: the reason its game gives ``set_invalid_move`` kept in ``_tsmg_invalid``."""

    _tsmg_invalid: str | None = None

    def set_invalid_move(self, *args: Any, **kwargs: Any) -> Any:
        """Record the reason, then let TextArena's state do what it does with an invalid move."""
        reason = kwargs.get("reason", args[0] if args else None)
        self._tsmg_invalid = str(reason) if reason else "TextArena called it an invalid move"
        return super().set_invalid_move(*args, **kwargs)  # type: ignore[misc]


_MARKED: dict[type, type] = {}


def _mark_invalid_moves(state: Any) -> None:
    """Make TextArena's state record the reason when its game calls ``set_invalid_move`` (in ``_tsmg_invalid``).

    The state's class is swapped for a subclass with :class:`_MarksInvalidMoves` mixed in (made
    once per class), so copies of the state keep recording.
    """
    cls = type(state)
    if cls not in _MARKED:
        # Named in this module, so that pickle (the fast copy of an environment) finds the class again.
        name = f"_Marked_{cls.__module__.replace('.', '_')}_{cls.__name__}"
        marked = type(name, (_MarksInvalidMoves, cls), {"__module__": __name__, "__qualname__": name})
        globals()[name] = _MARKED[cls] = marked
    state.__class__ = _MARKED[cls]
    state._tsmg_invalid = None


_UNPICKLABLE: set[type] = set()


def _copy_env(env: Any) -> Any:
    """An independent copy of a TextArena environment (every answer is tried on one).

    Through pickle, several times faster than deepcopy on large boards (Settlers of Catan: 3 ms
    against 16), or deepcopy where the environment does not pickle.
    """
    if type(env) not in _UNPICKLABLE:
        try:
            return pickle.loads(pickle.dumps(env, protocol=pickle.HIGHEST_PROTOCOL))
        except Exception:  # a lambda or an open handle in the environment: deepcopy copies those
            _UNPICKLABLE.add(type(env))
    return copy.deepcopy(env)


def _new_env(entry: Any, kwargs: Mapping[str, Any], num_players: int, randomness: _Randomness, seed: int | None) -> Any:
    """A TextArena environment reset for ``num_players`` with ``randomness`` (its state marks invalid moves)."""
    with randomness.active():
        env = entry(**kwargs)
        env.reset(num_players=num_players, seed=seed)
    _mark_invalid_moves(env.state)
    return env


def _player_count(env_id: str, entry: Any, kwargs: Mapping[str, Any]) -> int:
    """The first of :data:`PLAYER_COUNTS` the environment accepts (its reset asserts the count).

    Raises:
        UnplayableGameError: It accepts none of them.
    """
    errors = []
    for count in PLAYER_COUNTS:
        try:
            _new_env(entry, kwargs, count, _Randomness(0), 0)
        except (AssertionError, ValueError) as error:
            errors.append(f"{count}: {' '.join(str(error).split())[:120]}")
            continue
        except OSError as error:
            reason = refusals.start_refusal(error)
            if reason is None:
                raise
            raise UnplayableGameError(env_id, reason) from None
        return count
    raise UnplayableGameError(env_id, f"it starts with none of {list(PLAYER_COUNTS)} players ({errors[0]})")


def textarena_spec(game_id: str) -> GameSpec:
    """The spec of ``textarena:ENV_ID`` (what :func:`tsmg.make` builds for such an id).

    The environment is started here with its player count, so a bad id fails before anything is made.
    """
    env_id = game_id.removeprefix(PREFIX).strip()
    if not env_id:
        raise UnknownGameError(
            f"{game_id!r} names no TextArena environment: write textarena:ID, e.g. textarena:TicTacToe-v0"
        )
    entry, kwargs = _env_factory(env_id)
    players = _player_count(env_id, entry, kwargs)
    return GameSpec(
        id=game_id,
        entry_point=TextArenaGame,
        kwargs={"env": env_id, "num_players": players},
        description=f"TextArena's {env_id} [{players} player{'s' if players > 1 else ''}].",
    )


class TextArenaConfig(GameConfig):
    """Options of a TextArena environment: which one, for how many players, plus the options every game takes."""

    env: str = Field(description="TextArena environment id, e.g. TicTacToe-v0.")
    num_players: int = Field(default=2, ge=1, description="Players of the episode (the environment must accept it).")


class TextArenaGame(RefereedGame[str]):
    """A TextArena environment played by text (see the module docstring for the rules of the adaptation).

    Args:
        config: A :class:`TextArenaConfig`; alternatively pass its fields as ``options``.
        **options: ``env`` (the TextArena id), ``num_players`` and the options of
            :class:`~tsmg.core.GameConfig` (``max_steps``, ``on_invalid``, ...).

    Attributes:
        open_text: Whether the id's moves are open text (not in
            :data:`~tsmg.adapters.textarena_moves.LISTED_MOVES`): answers other than the listed moves
            go to TextArena. ``tsmg games --json`` and the catalog show it.

    Raises:
        UnknownGameError, UnplayableGameError: an unknown or refused environment.
        GameOptionsError: the environment does not start with ``num_players`` players.
    """

    Config = TextArenaConfig
    config: TextArenaConfig

    def __init__(self, config: TextArenaConfig | None = None, **options: Any) -> None:
        """Check that the environment starts; see the class docstring."""
        self.config = TextArenaConfig.from_options(config, options)
        self._entry, self._kwargs = _env_factory(self.config.env)
        self.open_text = self.config.env.removesuffix("-train").removesuffix("-raw") not in LISTED_MOVES
        self._agents = tuple(f"player_{index}" for index in range(self.config.num_players))
        try:
            _new_env(self._entry, self._kwargs, self.config.num_players, _Randomness(0), 0)
        except AssertionError as error:
            raise GameOptionsError(
                f"TextArena's {self.config.env} does not start with {self.config.num_players} players: "
                f"{' '.join(str(error).split())}"
            ) from None
        self._randomness = _Randomness(None)
        self._env: Any = None
        self._history: dict[AgentID, list[tuple[int, str]]] = {}
        self._texts: dict[AgentID, str] = {}
        self._trials: dict[str, tuple[Any, _Randomness, str | None]] = {}  # answer -> (env copy, randomness, invalid)
        self._moves: MoveNames[str] | None = None  # the announced moves TextArena accepts now (computed on demand)

    # ------------------------------------------------------------------ the TextArena environment
    @property
    def env(self) -> Any:
        """The TextArena environment in play (do not step it: step the game instead)."""
        if self._env is None:
            raise GameError("no episode in progress; call reset() first")
        return self._env

    def player(self, agent: AgentID) -> int:
        """TextArena's player id of ``agent``."""
        if agent not in self._agents:
            raise GameError(f"unknown agent {agent!r}; agents are {list(self._agents)}")
        return self._agents.index(agent)

    # ------------------------------------------------------------------ Game implementation
    @property
    def agents(self) -> tuple[AgentID, ...]:
        """``player_0`` ... one seat per TextArena player."""
        return self._agents

    def observe(self, agent: AgentID) -> str:
        """``agent``'s prompt: the messages TextArena sent it, its legal moves when it acts, its return at the end."""
        self._require_tally()
        self.player(agent)
        if agent not in self._texts:
            self._texts[agent] = self._render(agent)
        return self._texts[agent]

    def legal_actions(self, agent: AgentID) -> list[str] | None:
        """The bracketed moves ``agent``'s messages announce that TextArena accepts now (None if none are announced)."""
        if agent not in self.active_agents:
            return []
        moves = self._announced_moves(agent)
        return list(moves.canonical) if moves else None

    def state_key(self, agent: AgentID) -> Hashable:
        """What ``agent`` observes now: its seat and its prompt."""
        return (self.player(agent), self.observe(agent))

    @cached_property
    def has_random_start(self) -> bool:
        """Whether the seed changes a first observation (found by starting with seeds 0 ... 7 until one differs)."""
        first = None
        for seed in range(8):
            randomness = _Randomness(seed)
            env = _new_env(self._entry, self._kwargs, self.config.num_players, randomness, seed)
            start = tuple(tuple(map(str, env.state.observations[player])) for player in range(len(self._agents)))
            if first is not None and start != first:
                return True
            first = start
        return False

    @property
    def fork_mode(self) -> ForkMode:
        """``snapshot``: a fork shares the environment in play, which no move changes in place."""
        return "snapshot"

    def _fork_parts(self, twin: TextArenaGame) -> None:
        """A fork (:meth:`tsmg.core.RefereedGame.fork`) copies the randomness, the histories and the texts."""
        # The environment in play is never changed in place (each move adopts the copy it was tried on,
        # whose message queues are then emptied), so the fork shares it until either side moves.
        twin._randomness = copy.deepcopy(self._randomness)
        twin._history = {agent: list(messages) for agent, messages in self._history.items()}
        twin._texts, twin._trials, twin._moves = dict(self._texts), {}, None

    def __repr__(self) -> str:
        """Show the id, the TextArena environment and the options that differ from the defaults."""
        options = self.config.model_dump(exclude_defaults=True, exclude={"env"})
        return f"{type(self).__name__}({self.game_id!r}, env={self.config.env!r}, {options})"

    # ------------------------------------------------------------------ referee hooks
    def _start(self, seed: int | None, options: Mapping[str, Any]) -> dict[AgentID, dict[str, Any]]:
        if options:
            raise GameError(f"TextArena games take no reset options, got {sorted(options)}")
        if seed is not None:
            self._randomness = _Randomness(seed)
        else:  # TextArena gets a seed all the same (Sokoban seeds its own generators with it), drawn from the episode's
            with self._randomness.active():
                seed = random.getrandbits(31)
        self._env = _new_env(self._entry, self._kwargs, self.config.num_players, self._randomness, seed)
        self._history = {agent: [] for agent in self._agents}
        self._take_messages()
        return {}

    def _to_move(self) -> tuple[AgentID, ...]:
        state = self.env.state
        if state.done:
            return ()
        return (self._agents[state.current_player_id],)

    def _read(self, agent: AgentID, text: str) -> str | Invalid:
        if agent not in self._to_move():
            return Invalid("the game is over" if self.done else f"it is not {agent}'s turn")
        moves = self._announced_moves(agent)
        if moves and len(text) <= MAX_ANSWER_CHARS:
            move = moves.read(text)
            if not isinstance(move, Invalid):
                return move
            if not self.open_text:  # (an open-text answer naming several moves is judged below: it may be speech)
                named = named_moves(text, moves.canonical)
                if len(named) > 1:
                    return Invalid(
                        f"the answer names {len(named)} moves ({', '.join(named)}); answer with exactly one move, "
                        f"e.g. {named[0]}"
                    )
                return move
        elif not self.open_text:
            return Invalid(f"expected one of the moves the game announces; got {quote(text)}")
        answer = text.strip()
        if not answer:
            return Invalid(
                "the answer is empty: answer with a move, e.g. one of the bracketed moves the game announces"
            )
        if len(answer) > MAX_FREE_ANSWER_CHARS:
            return Invalid(f"the answer is longer than {MAX_FREE_ANSWER_CHARS} characters")
        return self._judge(agent, answer, moves.canonical if moves else ())

    def _judge(self, agent: AgentID, answer: str, moves: tuple[str, ...]) -> str | Invalid:
        """An open-text answer naming no announced move, as TextArena plays it (the rule: :mod:`.textarena_moves`)."""
        invalid = self._trial(answer)[2]
        if invalid is not None:
            return Invalid(f"TextArena rejected the move: {invalid}")
        played = self._play(answer)
        alone = {
            part: self._play(part) for part in bracketed(answer)[:MAX_PARTS] if part != answer and self._accepts(part)
        }
        kept = [part for part, play in alone.items() if play == played]
        dropped = [part for part, play in alone.items() if play != played]
        if kept and dropped:
            return Invalid(
                f"the answer holds more than one move ({kept[0]} and {dropped[0]}), and TextArena would play only "
                f"{kept[0]}: answer with one move"
            )
        neutral = self._play(NEUTRAL_ANSWER) if self._accepts(NEUTRAL_ANSWER) else None
        same = [move for move in dict.fromkeys([*moves, *kept]) if self._play(move) == played and move != answer]
        if self._speaks(agent):  # free speech: the answer is the move, unless it played as an announced one
            executed = [move for move in same if move in moves and self._play(move) != neutral]
            return executed[0] if len(executed) == 1 and played != neutral else answer
        if same:
            return Invalid(f"the answer plays as the move {same[0]} without being its name: answer {same[0]} alone")
        if played == neutral:
            return Invalid(
                f"TextArena reads this answer as it reads any text that names no move; answer with a move"
                f"{', e.g. ' + moves[0] if moves else ' as the rules above say'}"
            )
        return answer

    def _play(self, answer: str) -> bytes:
        """What TextArena played for ``answer`` on a copy (:func:`~tsmg.adapters.textarena_moves.play_signature`)."""
        return play_signature(self._trial(answer)[0])

    def _speaks(self, agent: AgentID) -> bool:
        """Whether this turn takes free speech: TextArena accepts a neutral sentence and relays it to another seat."""
        return self._accepts(NEUTRAL_ANSWER) and relays(
            self._trial(NEUTRAL_ANSWER)[0], NEUTRAL_ANSWER, self.player(agent)
        )

    def _advance(self, moves: dict[AgentID, str], infos: dict[AgentID, dict[str, Any]]) -> Mapping[AgentID, float]:
        if not moves:  # an invalid answer under "penalize": the same seat answers again
            return {}
        [(agent, move)] = moves.items()
        env, randomness, invalid = self._trial(move)
        if invalid is not None:  # a default move TextArena refuses: the turn is used up
            infos[agent].update(valid=False, reason=f"TextArena rejected the move: {invalid}", action=None)
            return {}
        self._env, self._randomness = env, randomness
        self._take_messages()
        rewards = env.state.rewards if env.state.done else None
        if not rewards:
            return {}
        return {
            self._agents[player]: float(reward) for player, reward in rewards.items() if 0 <= player < len(self._agents)
        }

    def _world_endings(self) -> tuple[bool, bool]:
        return bool(self.env.state.done), False

    def _legal_moves(self, agent: AgentID) -> list[str] | None:
        moves = self._announced_moves(agent)
        return list(moves.canonical) if moves else None

    def _move_text(self, agent: AgentID, move: str) -> str:
        return move

    def _success(self, agent: AgentID) -> bool | None:
        """Whether ``agent`` won the game TextArena finished (None while it lasts, or when it was cut short).

        One seat: TextArena's full reward, 1 (a partial score is not a win). Several seats: a seat wins
        when TextArena rewards it highest and some other seat lower (a shared win counts; a draw, every
        seat rewarded alike, is no seat's success), as TextArena's ``set_winner``/``set_winners`` do.
        """
        state = self.env.state
        if not state.done or not state.rewards:
            return None
        rewards = [float(state.rewards.get(player, 0)) for player in range(len(self._agents))]
        own = rewards[self.player(agent)]
        if len(rewards) == 1:
            return own >= 1
        return own == max(rewards) and own > min(rewards)

    def _refresh(self) -> None:
        self._texts, self._trials, self._moves = {}, {}, None

    # ------------------------------------------------------------------ moves
    def _trial(self, answer: str) -> tuple[Any, _Randomness, str | None]:
        """Step a copy of the environment with ``answer``: the copy, its random state, TextArena's invalid reason."""
        if answer not in self._trials:
            env, randomness = _copy_env(self.env), copy.deepcopy(self._randomness)
            env.state._tsmg_invalid = None
            with randomness.active():
                env.step(answer)
            self._trials[answer] = (env, randomness, env.state._tsmg_invalid)
        return self._trials[answer]

    def _accepts(self, name: str) -> bool:
        """Whether TextArena accepts the announced move ``name`` now.

        A move whose trial raises is left out of the list, not reported here: the exception is the
        game's error, and it is raised (as :class:`~tsmg.core.GameCodeError`) when a seat plays that move.
        """
        try:
            return self._trial(name)[2] is None
        except Exception:
            return False

    def _announced_moves(self, agent: AgentID) -> MoveNames[str] | None:
        """The bracketed texts of the game's messages to ``agent`` that TextArena accepts as its move now."""
        if self._moves is None:
            candidates: list[str] = []
            for sender, message in reversed(self._history[agent]):
                if sender != -1:  # the game's messages announce moves; a player's may quote anything
                    continue
                candidates += [name for name in bracketed(message) if name not in candidates]
            legal = [name for name in candidates[:MAX_CANDIDATES] if self._accepts(name)]
            self._moves = MoveNames({name: name for name in sorted(legal, key=_natural)})
        return self._moves or None

    # ------------------------------------------------------------------ text
    def _take_messages(self) -> None:
        """Move the messages TextArena queued for each player into that seat's history.

        TextArena's own log of every message (``state.logs``, which no game reads) is emptied too,
        so that copying the environment for a trial does not grow with the episode.
        """
        state = self.env.state
        state.logs = []
        queued = state.observations
        for player, agent in enumerate(self._agents):
            for sender, message, *_ in queued.get(player, []):
                self._history[agent].append((int(sender), str(message)))
            queued[player] = []

    def _render(self, agent: AgentID) -> str:
        history = self._history[agent]
        roles = getattr(self.env.state, "role_mapping", {}) or {}
        shown = history[:1] + history[max(1, len(history) - MAX_SHOWN_MESSAGES) :]
        lines = [f"TextArena game {self.config.env}. You are {agent} ({len(self._agents)} players)."]
        if len(history) > len(shown):
            lines.append(f"({len(history) - len(shown)} earlier messages not shown.)")
        for sender, message in shown:
            name = roles.get(sender, "GAME" if sender == -1 else f"Player {sender}")
            lines.append(f"[{name}] {message.strip()}")
        if self.done:
            lines.append(f"The game is over. Your return: {self._require_tally().returns[agent]:+g}.")
        elif agent in self._to_move():
            moves = self._announced_moves(agent)
            if moves and len(moves) <= MAX_LISTED_ACTIONS:
                closing = " (or another move the rules allow)" if self.open_text else ""
                lines.append(f"Your legal moves: {', '.join(moves.canonical)}{closing}.")
            else:
                lines.append("Your turn: answer with your move as the rules above say.")
        else:
            lines.append(f"Waiting for {', '.join(self._to_move())}.")
        return "\n".join(lines)


def _natural(text: str) -> tuple[Any, ...]:
    """Sort key reading runs of digits as numbers (``[2]`` before ``[10]``)."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))
