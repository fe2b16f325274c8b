"""``check_game``: does a game keep the TSMG contract? Failure messages say what to fix.

Checks, in order: the API shape (agents, reset, step, info), seed determinism (same seed and
actions ⇒ identical episode), that ``has_random_start`` says what a few seeds show (in either
direction), that every legal action's text parses back, that invalid text is rejected with a
reason and never raises (no call into the game may raise: a :class:`~tsmg.core.GameCodeError`
fails the check naming the call), the answer rule of :mod:`tsmg.answers` against a corpus of
hostile answers (no answer is read as a move it does not name or spell in the game's notation,
``Game.answer_spellings``, and an answer that names two legal
moves in the game's own notation, ``[up] [right]``, is no move: :func:`two_move_answers`; a game
whose moves are open text, ``open_text`` true, may read such an answer as a move of its own, a
sentence or a combined bid, never as one of the two), that the game's oracle, where it has one,
answers with legal moves that its steps accept, terminated/truncated sanity (a
finished episode refuses ``step``; answers out of turn are refused), that an episode whose every answer is
invalid ends, and that a policy answering nothing but nonsense scores no better than the random
policy on success, return and head-to-head results, seat by seat, over enough seeds to tell.

(Past 600 lines: one check per paragraph above, each short, in the order they run; the hostile-answer
corpus and the statistics they share are the rest.)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tsmg.answers import names_move, normalize_answer
from tsmg.core import AgentID, Game, GameCodeError, GameError, Invalid
from tsmg.registry import make

_INVALID_PROBES = ("", "   ", "\x00\x1b[31m", "definitely not an action " * 50, "🙂 ünïcödé", "<action></action>")
#: Answers that name no move in any game here, unless a game lists one of them as its move (then
#: it must read it as that move): abbreviations, synonyms, other games' moves, coordinates.
_HOSTILE_ANSWERS = (
    *"abcdefhlnprsuwxy",
    *(str(number) for number in range(11)),
    "-1", "+1", "01", "1.0", "one", "two", "five", "yes", "no", "ok", "pass", "none", "null", "move", "action",
    "up", "down", "left", "right", "north", "south", "east", "west", "top", "bottom", "middle", "center",
    "centre", "top left", "top-left", "bottom right", "upper left", "stand", "stay", "hit", "fold", "raise",
    "call", "check", "bet", "rock", "paper", "scissors", "scissor", "pick up", "drop off", "pickup",
    "dropoff", "reveal", "flag", "open", "cell 1", "cell 5", "#5", "square 5", "column 1", "col 1", "c1",
    "row 1", "(1, 2)", "1 2", "1,2", "1, 2", "x=1, y=2", "<action>", "</action>", "I don't know",
)  # fmt: skip
#: Seed offset of the checker's own random choices, apart from the game seeds.
_CHOICE_SEED = 10_007
#: A difference counts as real when it is this many standard errors from zero (one-sided p < 0.002).
_Z_THRESHOLD = 3.0


class GameCheckError(AssertionError):
    """A game broke its contract; the message says what and how to fix it."""


@dataclass
class CheckReport:
    """What :func:`check_game` exercised.

    Attributes:
        nonsense: Per seat, the always-invalid policy's figures against the random policy's over
            the same seeds: ``return``/``success``/``outcome`` means (outcome: +1 per other seat
            beaten by return, -1 per seat lost to) for ``invalid`` and ``random``, and ``episodes``.
    """

    game_id: str
    episodes: int = 0
    steps: int = 0
    legal_actions_checked: int = 0
    hostile_answers_checked: int = 0
    nonsense: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _game_errors_fail_the_check(check: Callable[..., CheckReport]) -> Callable[..., CheckReport]:
    """Report a call into the game that raised (:class:`GameCodeError`) as a failed check naming the call."""

    @functools.wraps(check)
    def checked(*args: Any, **kwargs: Any) -> CheckReport:
        try:
            return check(*args, **kwargs)
        except GameCodeError as error:
            raise GameCheckError(
                f"{error.game_id}: {error.call} raised {type(error.error).__name__}: {error.error} (a game error: no "
                "call into a game may raise; return Invalid(reason) for bad text)"
            ) from error

    return checked


@_game_errors_fail_the_check
def check_game(
    game: Game | str,
    seeds: Sequence[int] = (0, 1, 2, 3, 4),
    max_rounds: int = 200,
    nonsense_seeds: int = 100,
    end_within: int = 20_000,
) -> CheckReport:
    """Check that ``game`` (an instance or a registered id) keeps the TSMG contract.

    Args:
        game: The game, or a registered id to :func:`tsmg.make`.
        seeds: Seeds of the random-play episodes used by the checks.
        max_rounds: Rounds after which a random-play episode is cut short by the checker.
        nonsense_seeds: Episodes per seat comparing an always-invalid policy with the random
            one (0 skips that comparison).
        end_within: Rounds within which an episode of nothing but invalid answers must end.

    Returns:
        A :class:`CheckReport` of what was exercised.

    Raises:
        GameCheckError: on the first broken rule, saying what to fix.
    """
    if isinstance(game, str):
        game = make(game)
    name = game.game_id
    report = CheckReport(game_id=name)
    _check_agents(game)
    first_starts = []
    for seed in seeds:
        trace = _play_random(game, seed, max_rounds, report, hostile=True)
        replay = _play_random(game, seed, max_rounds, report)
        if trace != replay:
            raise GameCheckError(
                f"{name}: two episodes with seed {seed} and the same actions differ at round "
                f"{_first_difference(trace, replay)}. Draw every random number from the generator passed to "
                "initial_state/transition (RulesGame) or seeded in reset(); never from the global random module."
            )
        first_starts.append(trace[0])
    _check_random_start(game, seeds, first_starts)
    _check_oracle_episode(game, seeds[0], max_rounds)
    _check_step_errors(game, seeds[0])
    _check_invalid_answers_end(game, seeds[0], end_within)
    if nonsense_seeds:
        _check_nonsense_never_beats_random(game, nonsense_seeds, end_within, report)
    return report


def observed_random_start(game: Game, seeds: Sequence[int] = (0, 1, 2, 3, 4)) -> bool:
    """Whether ``game``'s first observations differ between ``seeds`` (what ``has_random_start`` must say)."""
    starts = [tuple(sorted(game.reset(seed=seed)[0].items())) for seed in seeds]
    return any(start != starts[0] for start in starts)


def _check_random_start(game: Game, seeds: Sequence[int], first_starts: Sequence[Any]) -> None:
    """``has_random_start`` says what the seeds show, in either direction (clients plan their seeds by it)."""
    if callable(game.has_random_start):  # a def without @property: the bound method is true, whatever it returns
        raise GameCheckError(
            f"{game.game_id}: has_random_start is a method, so it reads as True whatever it returns; put @property "
            "on the line above 'def has_random_start(self)'."
        )
    if len(seeds) < 2:
        return
    varies = any(start != first_starts[0] for start in first_starts)
    if game.has_random_start and not varies:
        raise GameCheckError(
            f"{game.game_id}: has_random_start is True but seeds {list(seeds)} all give the same first observation; "
            "draw the start from the generator seeded in reset(), or return False from has_random_start."
        )
    if varies and not game.has_random_start:
        raise GameCheckError(
            f"{game.game_id}: has_random_start is False but the first observation changes with the seed (seeds "
            f"{list(seeds)}); return True from has_random_start, or draw nothing from the generator before the "
            "first observation."
        )


def _check_agents(game: Game) -> None:
    agents = game.agents
    if not isinstance(agents, tuple) or not agents or not all(isinstance(a, str) for a in agents):
        raise GameCheckError(f"{game.game_id}: agents must be a non-empty tuple of str, got {agents!r}")
    if len(set(agents)) != len(agents):
        raise GameCheckError(f"{game.game_id}: agent ids must be unique, got {agents!r}")


def _check_keyed(game: Game, what: str, mapping: Any, value_type: type | tuple[type, ...]) -> None:
    if not isinstance(mapping, dict) or set(mapping) != set(game.agents):
        keys = sorted(mapping) if isinstance(mapping, dict) else type(mapping).__name__
        raise GameCheckError(
            f"{game.game_id}: {what} must be a dict keyed by every agent {list(game.agents)}, got {keys}"
        )
    for agent, value in mapping.items():
        if not isinstance(value, value_type):
            raise GameCheckError(
                f"{game.game_id}: {what}[{agent!r}] must be {value_type}, got {type(value).__name__}: {value!r:.80}"
            )


def _play_random(game: Game, seed: int, max_rounds: int, report: CheckReport, hostile: bool = False) -> list[Any]:
    """Play one episode with seeded random legal actions; return a trace for comparison.

    With ``hostile``, the answer rule is checked against the hostile corpus in the first rounds
    and every 25th round after (the replay skips it: it sees the same states).
    """
    name = game.game_id
    rng = np.random.default_rng(seed + _CHOICE_SEED)
    reset_result = game.reset(seed=seed)
    if not (isinstance(reset_result, tuple) and len(reset_result) == 2):
        raise GameCheckError(f"{name}: reset() must return (observations, infos)")
    observations, infos = reset_result
    _check_keyed(game, "reset observations", observations, str)
    _check_keyed(game, "reset infos", infos, dict)
    trace: list[Any] = [tuple(sorted(observations.items()))]
    report.episodes += 1
    for round_index in range(max_rounds):
        active = game.active_agents
        if not active:
            raise GameCheckError(f"{name}: the episode is not over but no agent is active; list who must act")
        if not set(active) <= set(game.agents):
            raise GameCheckError(f"{name}: active agents {active} are not all in agents {game.agents}")
        if game.turn_based and len(active) != 1:
            raise GameCheckError(f"{name}: turn_based is True but {len(active)} agents are active: {active}")
        actions = {}
        for agent in active:
            observation = game.observe(agent)
            if observation != game.observe(agent):
                raise GameCheckError(
                    f"{name}: observe({agent!r}) changed between two calls; rendering must not change state"
                )
            key = game.state_key(agent)
            if not isinstance(key, Hashable):
                raise GameCheckError(f"{name}: state_key({agent!r}) must be hashable, got {type(key).__name__}")
            legal = game.legal_actions(agent)
            if legal is not None:
                _check_legal_actions(game, agent, legal, report)
                if hostile and (round_index < 2 or round_index % 25 == 0):
                    sampler = np.random.default_rng([seed, round_index])  # apart from the play's own choices
                    _check_answer_rule(game, agent, legal, observation, sampler, report)
            if hostile:
                _check_oracle_move(game, agent, legal)
            _check_invalid_texts(game, agent)
            # Without enumerable legal actions the checker can only answer with a probe text,
            # which the game may treat as invalid; that is fine and not reported.
            actions[agent] = legal[int(rng.integers(len(legal)))] if legal else _PROBE_FALLBACK
        result = game.step(actions)
        report.steps += 1
        try:
            observations, rewards, terminated, truncated, step_infos = result
        except (TypeError, ValueError):
            raise GameCheckError(f"{name}: step() must return a StepResult of five dicts") from None
        _check_keyed(game, "step observations", observations, str)
        _check_keyed(game, "step rewards", rewards, (float, int))
        _check_keyed(game, "step terminated", terminated, bool)
        _check_keyed(game, "step truncated", truncated, bool)
        _check_keyed(game, "step infos", step_infos, dict)
        for agent in active:
            info = step_infos[agent]
            missing = {"action", "valid", "reason"} - set(info)
            if missing:
                raise GameCheckError(
                    f"{name}: infos[{agent!r}] after its answer lacks {sorted(missing)}; report the parsed action, "
                    "whether it was valid, and why not"
                )
            if actions[agent] is not _PROBE_FALLBACK and not info["valid"]:
                raise GameCheckError(
                    f"{name}: legal action {actions[agent]!r} of {agent!r} was rejected at step: {info['reason']}"
                )
        if not all(np.isfinite(value) for value in rewards.values()):
            raise GameCheckError(f"{name}: rewards must be finite numbers, got {rewards}")
        trace.append(
            (
                tuple(sorted(actions.items())),
                tuple(sorted(observations.items())),
                tuple(sorted(rewards.items())),
                tuple(sorted(terminated.items())),
                tuple(sorted(truncated.items())),
            )
        )
        if all(terminated[a] or truncated[a] for a in game.agents):
            if not game.done:
                raise GameCheckError(f"{name}: every agent is terminated or truncated but done is False")
            if game.active_agents:
                raise GameCheckError(f"{name}: the episode is over but active_agents is {game.active_agents}")
            return trace
        if game.done:
            raise GameCheckError(f"{name}: done is True but step() did not report every agent terminated or truncated")
    report.notes.append(f"seed {seed}: cut short after {max_rounds} rounds")
    return trace


_PROBE_FALLBACK = "__tsmg_checker_no_legal_actions__"


def _check_legal_actions(game: Game, agent: str, legal: list[str], report: CheckReport) -> None:
    name = game.game_id
    if not isinstance(legal, list) or not all(isinstance(text, str) for text in legal):
        raise GameCheckError(f"{name}: legal_actions({agent!r}) must return a list of str or None")
    if not legal:
        raise GameCheckError(
            f"{name}: {agent!r} is active but has no legal actions; an active agent must be able to act "
            "(return None from legal_actions if they cannot be enumerated)"
        )
    if len(set(legal)) != len(legal):
        raise GameCheckError(f"{name}: legal_actions({agent!r}) lists duplicates: {legal}")
    for text in legal:
        parsed = game.parse(agent, text)
        if isinstance(parsed, Invalid):
            raise GameCheckError(
                f"{name}: legal action {text!r} of {agent!r} does not parse back ({parsed.reason}); make "
                "parse_action accept exactly what action_text produces"
            )
        report.legal_actions_checked += 1


_FIX_ORACLE = (
    "make oracle_action return the text of a legal move (one of legal_actions), or None where the game has no oracle; "
    "`tsmg eval --model oracle` would otherwise score the oracle's answers invalid"
)


def _check_oracle_move(game: Game, agent: AgentID, legal: list[str] | None) -> None:
    """Where the game has an oracle, its move now parses, and is one of the legal moves where they are listed."""
    oracle = game.oracle_action(agent)
    if oracle is None:
        return
    parsed = game.parse(agent, oracle)
    if isinstance(parsed, Invalid):
        raise GameCheckError(
            f"{game.game_id}: the oracle's move {oracle!r} for {agent!r} is not a valid answer ({parsed.reason}); "
            + _FIX_ORACLE
        )
    if legal is not None and not any(_same_move(parsed, game.parse(agent, text)) for text in legal):
        raise GameCheckError(
            f"{game.game_id}: the oracle's move {oracle!r} for {agent!r} is not among its legal moves "
            f"{legal[:10]}{'...' if len(legal) > 10 else ''}; " + _FIX_ORACLE
        )


def _check_oracle_episode(game: Game, seed: int, max_rounds: int) -> None:
    """An episode where each seat with an oracle move plays it (the others at random): every step accepts them."""
    rng = np.random.default_rng(seed + _CHOICE_SEED)
    game.reset(seed=seed)
    played_oracle = False
    for round_index in range(max_rounds):
        if game.done or (round_index >= 2 and not played_oracle):
            return  # over, or a game without an oracle (for the seats that moved first)
        actions, oracle_seats = {}, []
        for agent in game.active_agents:
            oracle = game.oracle_action(agent)
            if oracle is not None:
                actions[agent] = oracle
                oracle_seats.append(agent)
            else:
                legal = game.legal_actions(agent)
                actions[agent] = legal[int(rng.integers(len(legal)))] if legal else _PROBE_FALLBACK
        played_oracle = played_oracle or bool(oracle_seats)
        infos = game.step(actions).infos
        for agent in oracle_seats:
            if not infos[agent].get("valid", True):
                raise GameCheckError(
                    f"{game.game_id}: the oracle's move {actions[agent]!r} for {agent!r} was refused at step: "
                    f"{infos[agent].get('reason')}; " + _FIX_ORACLE
                )


def _check_invalid_texts(game: Game, agent: str) -> None:
    name = game.game_id
    for text in _INVALID_PROBES:
        try:
            parsed = game.parse(agent, text)
        except Exception as error:
            call, raised = (error.call, error.error) if isinstance(error, GameCodeError) else ("parse", error)
            raise GameCheckError(
                f"{name}: {call} raised {raised!r} on the answer {text!r:.40} of {agent!r} (a game error); return "
                "Invalid(reason) for bad text"
            ) from error
        if isinstance(parsed, Invalid) and not (isinstance(parsed.reason, str) and parsed.reason.strip()):
            raise GameCheckError(f"{name}: Invalid answers must carry a reason saying what was expected")
        if text in ("", "   ") and not isinstance(parsed, Invalid):
            raise GameCheckError(f"{name}: an empty answer {text!r} parsed as a valid action; it must be Invalid")


def _check_step_errors(game: Game, seed: int) -> None:
    name = game.game_id
    game.reset(seed=seed)
    active = game.active_agents
    inactive = [agent for agent in game.agents if agent not in active]
    if inactive:
        try:
            game.step({inactive[0]: "x"})
        except GameError:
            pass
        else:
            raise GameCheckError(f"{name}: step() accepted an answer from {inactive[0]!r}, whose turn it is not")
    try:
        game.step({})
    except GameError:
        pass
    else:
        raise GameCheckError(f"{name}: step({{}}) accepted no answer although {list(active)} must act")
    # Finish the episode with invalid answers under the game's own rules, then step once more.
    game.reset(seed=seed)
    for _ in range(10_000):
        if game.done:
            break
        legal = {agent: game.legal_actions(agent) for agent in game.active_agents}
        game.step({agent: (moves[0] if moves else Invalid("checker")) for agent, moves in legal.items()})
    if game.done:
        try:
            game.step({agent: "x" for agent in game.agents})
        except GameError:
            return
        raise GameCheckError(f"{name}: step() after the episode ended must raise GameError; call reset() first")


def _first_difference(left: list[Any], right: list[Any]) -> int:
    for index, (a, b) in enumerate(zip(left, right, strict=False)):
        if a != b:
            return index
    return min(len(left), len(right))


# ------------------------------------------------------------------------------ the answer rule
def _check_answer_rule(
    game: Game, agent: AgentID, legal: list[str], observation: str, rng: np.random.Generator, report: CheckReport
) -> None:
    """No hostile answer is read as a move it does not name or spell; every legal move's name is read in any case."""
    name = game.game_id
    aliases = dict(game.answer_aliases(agent))
    folded_observation = " ".join(observation.lower().split())
    for alias, target in aliases.items():
        phrase = normalize_answer(alias) or alias.lower()
        if phrase not in folded_observation:
            raise GameCheckError(
                f"{name}: the alias {alias!r} (for {target!r}) is not announced in {agent!r}'s observation; say it "
                "in the prompt or drop it from answer_aliases (tsmg.answers: a model cannot guess aliases)"
            )
    sample = [legal[int(index)] for index in rng.choice(len(legal), size=min(len(legal), 12), replace=False)]
    moves = [(text, game.parse(agent, text)) for text in legal]
    spellings = _check_spellings(game, agent, dict(moves), sample)
    folded = [normalize_answer(text) or text for text in legal]
    spelled_keys = [(normalize_answer(spelling) or spelling, target) for spelling, target in spellings.items()]
    for text in sample:
        key = normalize_answer(text) or text
        shared = folded.count(key) > 1 or any(other == key and target != text for other, target in spelled_keys)
        if shared or text != text.strip():
            continue  # another move has this name but for case (or spells it so): only the exact text names it
        expected = game.parse(agent, text)
        for variant in (text.upper(), text.title(), f"**{text}**", f" '{text}'. ", f"{text}."):
            if not _same_move(game.parse(agent, variant), expected):
                raise GameCheckError(
                    f"{name}: {variant!r} was not read as the move {text!r}; an answer names a move whatever its case "
                    "and surrounding punctuation (normalize with tsmg.answers.normalize_answer before matching)"
                )
    # Each sampled move's first spelling gets near misses and two-move answers too: ``[e2e4] [d2d4]`` is no move.
    first_spellings: dict[str, str] = {}
    for spelling, target in spellings.items():
        first_spellings.setdefault(target, spelling)
    spelled = [first_spellings[text] for text in sample if text in first_spellings]
    by_text = dict(moves)
    spelled_moves = [(spelling, by_text[spellings[spelling]]) for spelling in spelled]
    two_moves = _two_move_pairs(sample, moves, spellings)
    two_moves.update(_two_move_pairs(spelled, spelled_moves, [*legal, *spellings]))
    for answer in hostile_answers([*sample, *spelled], legal, two_moves):
        parsed = game.parse(agent, answer)
        report.hostile_answers_checked += 1
        if isinstance(parsed, Invalid):
            continue
        if answer in two_moves and not getattr(game, "open_text", False):
            first, second = two_moves[answer]
            raise GameCheckError(
                f"{name}: the answer {answer!r} names two moves, {first!r} and {second!r}, and was read as the move "
                f"{parsed!r}. An answer is a move only when it names exactly one: return Invalid(reason) for an "
                "answer that names several (tsmg.answers.MoveNames does this), or set open_text = True on a game "
                "whose moves are free text"
            )
        named = [text for text, move in moves if _same_move(move, parsed)]
        if not named:
            continue  # read as a move outside legal_actions: the step will tell whether it is legal
        move_aliases = [alias for alias, target in aliases.items() if target in named]
        move_aliases += [spelling for spelling, target in spellings.items() if target in named]
        if not any(names_move(answer, text, move_aliases) for text in named):
            raise GameCheckError(
                f"{name}: the answer {answer!r} was read as the move {named[0]!r}, which it does not name. Read an "
                "answer as a move only when it is the move's own name (any case, surrounding punctuation aside), "
                "an alias the prompt announces (Game.answer_aliases) or its spelling in the game's notation "
                "(Game.answer_spellings); anything else is Invalid with a reason (tsmg.answers.MoveNames does this)"
            )


def _check_spellings(game: Game, agent: AgentID, parsed: Mapping[str, Any], sample: Sequence[str]) -> dict[str, str]:
    """The game's spellings of legal moves (Game.answer_spellings); the sampled moves' ones must read as their move."""
    name = game.game_id
    spellings = dict(game.answer_spellings(agent))
    for spelling, target in spellings.items():
        if target not in parsed:
            raise GameCheckError(
                f"{name}: answer_spellings gives {spelling!r} for {target!r}, which is not one of {agent!r}'s legal "
                "moves now; key each spelling to the canonical text of a legal move"
            )
        if target in sample and not _same_move(game.parse(agent, spelling), parsed[target]):
            raise GameCheckError(
                f"{name}: {spelling!r} is given as a spelling of {target!r} (answer_spellings) but is not read as "
                "that move; read every spelling the game gives as its move"
            )
    return spellings


def two_move_answers(first: str, second: str) -> list[str]:
    """Answers that name two moves in the game's own notation: ``[up] [right]``, ``[up] or [right]``...

    Example:
        >>> two_move_answers("[hold]", "[roll]")[:3]
        ['[hold] [roll]', '[hold] or [roll]', '[hold], [roll]']
    """
    return [
        f"{first} {second}", f"{first} or {second}", f"{first}, {second}", f"{first}\n{second}",
        f"{first} and {second}", f"{first} then {second}", f"{first}; {second}", f"{first} / {second}",
    ]  # fmt: skip


def _two_move_pairs(
    sample: Sequence[str], moves: Sequence[tuple[str, Any]], also_names: Iterable[str] = ()
) -> dict[str, tuple[str, str]]:
    """Two-move answers of consecutive sampled moves that are different moves (not names of one), each with its pair.

    An answer that is itself a move's name or one of ``also_names`` (spellings) is left out.
    """
    parsed = dict(moves)
    pairs: dict[str, tuple[str, str]] = {}
    for index, first in enumerate(sample):
        second = sample[(index + 1) % len(sample)]
        if second == first or _same_move(parsed.get(first), parsed.get(second)):
            continue
        for answer in two_move_answers(first, second):
            pairs.setdefault(answer, (first, second))
    named = {normalize_answer(text) for text in [*(text for text, _ in moves), *also_names]}
    return {answer: pair for answer, pair in pairs.items() if normalize_answer(answer) not in named}


def hostile_answers(sample: Sequence[str], legal: Sequence[str], extra: Iterable[str] = ()) -> list[str]:
    """The fixed hostile answers, per sampled legal move its near misses (prefixes, sentences), then ``extra``.

    None of them is a legal move's own text (those are moves).
    """
    corpus = list(_HOSTILE_ANSWERS)
    for text in sample:
        corpus += [text[:1], text[:-1], f"{text}x", f"x{text}", f"{text}s", f"{text} {text}", f"{text} please"]
        corpus += [f"I choose {text}", f"move {text}", f"<action>{text}</action>"]
        corpus += [text.replace(" ", ""), text.replace(" ", "_")]
    corpus += list(extra)
    listed = set(legal)
    return [answer for answer in dict.fromkeys(corpus) if answer not in listed]


def _same_move(first: Any, second: Any) -> bool:
    if isinstance(first, Invalid) or isinstance(second, Invalid):
        return False
    try:
        if isinstance(first, np.ndarray) or isinstance(second, np.ndarray):
            return bool(np.array_equal(first, second))
        return bool(first == second)
    except Exception:  # incomparable moves are different moves
        return False


# ------------------------------------------------------------------------------ invalid answers
_NONSENSE = Invalid("the checker's always-invalid policy")


def _check_invalid_answers_end(game: Game, seed: int, end_within: int) -> None:
    """An episode in which every answer is invalid must end (a forfeit or a step limit)."""
    game.reset(seed=seed)
    for _ in range(end_within):
        if game.done:
            return
        game.step(dict.fromkeys(game.active_agents, _NONSENSE))
    raise GameCheckError(
        f"{game.game_id}: an episode in which every answer is invalid had not ended after {end_within} rounds, so an "
        "evaluation of a model that cannot answer would never finish. Give the game a step limit (max_steps, e.g. in "
        "tsmg.register) or keep forfeit_after set"
    )


def _check_nonsense_never_beats_random(game: Game, episodes: int, end_within: int, report: CheckReport) -> None:
    """Seat by seat: always-invalid answers score no better than random play (return, success, outcome)."""
    name = game.game_id
    seeds = range(1_000, 1_000 + episodes)
    baseline = [_play_episode(game, seed, None, end_within) for seed in seeds]
    for seat in game.agents:
        nonsense = [_play_episode(game, seed, seat, end_within) for seed in seeds]
        figures: dict[str, Any] = {"episodes": episodes}
        for measure in ("return", "success", "outcome"):
            pairs = [
                (played[measure][seat], base[measure][seat])
                for played, base in zip(nonsense, baseline, strict=True)
                if played[measure][seat] is not None and base[measure][seat] is not None
            ]
            if not pairs:
                continue
            differences = [float(invalid) - float(random) for invalid, random in pairs]
            figures[measure] = {
                "invalid": sum(float(invalid) for invalid, _ in pairs) / len(pairs),
                "random": sum(float(random) for _, random in pairs) / len(pairs),
            }
            if _significantly_positive(differences):
                invalid, random = figures[measure]["invalid"], figures[measure]["random"]
                raise GameCheckError(
                    f"{name}: answering nothing but nonsense in seat {seat!r} beats random play on {measure} "
                    f"({invalid:+.3f} against {random:+.3f} over {len(pairs)} seeds), so an evaluation would rank a "
                    "model that cannot play above one that plays badly. Make invalid answers cost: a forfeit that "
                    "scores the game's worst outcome (RulesGame.forfeit, forfeit_reward=), forfeit_after, or "
                    "invalid_penalty"
                )
        report.nonsense[seat] = figures
        report.episodes += episodes
    report.episodes += episodes


def _play_episode(game: Game, seed: int, invalid_seat: AgentID | None, end_within: int) -> dict[str, dict[str, Any]]:
    """Random legal play, ``invalid_seat`` answering only nonsense; per seat return, success and outcome."""
    rng = np.random.default_rng(seed + _CHOICE_SEED)
    game.reset(seed=seed)
    returns = dict.fromkeys(game.agents, 0.0)
    for _ in range(end_within):
        if game.done:
            break
        actions: dict[AgentID, str | Invalid] = {}
        for agent in game.active_agents:
            legal = game.legal_actions(agent)
            if agent == invalid_seat or not legal:
                actions[agent] = _NONSENSE
            else:
                actions[agent] = legal[int(rng.integers(len(legal)))]
        for agent, reward in game.step(actions).rewards.items():
            returns[agent] += reward
    success = {agent: game.is_success(agent) for agent in game.agents}
    outcome: Mapping[AgentID, float | None] = {
        agent: (sum(np.sign(returns[agent] - returns[other]) for other in game.agents if other != agent)
                if len(game.agents) > 1 else None)
        for agent in game.agents
    }  # fmt: skip
    return {"return": returns, "success": success, "outcome": dict(outcome)}


def _significantly_positive(differences: Sequence[float]) -> bool:
    """Whether paired differences are above zero by more than :data:`_Z_THRESHOLD` standard errors."""
    count = len(differences)
    mean = sum(differences) / count
    if mean <= 0:
        return False
    variance = sum((value - mean) ** 2 for value in differences) / max(count - 1, 1)
    stderr = math.sqrt(variance / count)
    return stderr == 0 or mean / stderr > _Z_THRESHOLD
