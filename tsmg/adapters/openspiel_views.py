"""The text an adapted OpenSpiel game shows a language model: its ``view`` option.

``view="raw"`` is the adapter's first text, kept byte for byte (OpenSpiel's observation string
under one line naming the seat, the moves joined by ", "): the published suite
``openspiel-small-v1`` is played with it. ``view="full"`` (the default) is written for a
language model, in parts, in this order:

* **role**: the seat in words (who acts first, the mark or colour it plays);
* **rules**: a short rules card;
* **private**: what only this seat knows, named in words (a card as "Queen", dice as numbers);
* **state**: what both seats see now (the pot, the board);
* **history**: the public moves so far, in the game's own move names (``action_to_string``);

then the legal moves, once, one per line (move names may contain ", ": nim's ``pile:1, take:1;``),
or their number and an example above :data:`MAX_LISTED_MOVES`. The LAP's format line then lists
them no more (:attr:`~tsmg.core.Game.observation_lists_moves`). ``view="compact"`` is ``full``
without the rules card (the parts that differ between decisions).

Each part comes from a hand-written function where there is one (:data:`PARTS`: Kuhn and Leduc
poker, Liar's Dice, ...; then ``BOARD_TEXTS`` of ``tsmg.adapters.openspiel_board_texts`` where
that module exists), else from what OpenSpiel offers for every game (:func:`generic_parts`): its
type and long name, the observation string, the information-state string where it says more
than the observation, and, in a perfect-information game, the history's move names. A
hand-written function takes the pyspiel state and the seat's player number and returns a dict
with any of the keys of :data:`PART_KEYS`; a missing key falls back to the generic part.

Faithful to information states: two decisions of a seat get the same text exactly when
OpenSpiel gives them the same information state (:mod:`.openspiel_infostates` checks it).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import pyspiel

from tsmg import loading
from tsmg.lap import MAX_LISTED_ACTIONS

__all__ = ["MAX_LISTED_MOVES", "PARTS", "PART_KEYS", "TextView", "generic_parts", "parts_function", "render"]

#: ``full``: role, rules card, private information, state, history, moves; ``compact``: the same
#: without the rules card; ``raw``: the adapter's first text (OpenSpiel's observation string).
TextView = Literal["full", "compact", "raw"]
#: Decisions with more legal moves than this give their number and an example instead of the list.
MAX_LISTED_MOVES = MAX_LISTED_ACTIONS
#: The module of the board games' hand-written texts (chess, go, ...): ``BOARD_TEXTS``, a dict like :data:`PARTS`.
BOARD_TEXTS_MODULE = "tsmg.adapters.openspiel_board_texts"
#: The parts of a view, in the order the prompt shows them.
PART_KEYS = ("role", "rules", "private", "state", "history")
#: Perfect-information histories longer than this show their last moves only (the state shows the rest).
MAX_HISTORY_MOVES = 80

PartsFunction = Callable[[Any, int], dict[str, str]]


# ------------------------------------------------------------------------------ shared helpers
def _ordinal(player: int) -> str:
    return ("first", "second", "third", "fourth", "fifth", "sixth")[player] if player < 6 else f"{player + 1}th"


class _Replay:
    """One game's replayed history, extended move by move while the next state continues it."""

    def __init__(self) -> None:
        self.twin: Any = None
        self.played: list[tuple[int, int, str]] = []


_REPLAYS = threading.local()  # per thread: game string -> _Replay (a game is stepped by one thread at a time)


def replay(state: Any) -> list[tuple[int, int, str]]:
    """The history of a sequential ``state`` as ``(player, action, name)``, the name as OpenSpiel wrote it then.

    The player of a chance outcome is ``-1``. Names are taken on a replay, before each action is
    applied (chess's SAN and others depend on the position the move is played in); the replay is
    kept per thread and game and extended while the next state continues its history, so a prompt
    costs the moves since the last one, not the whole game again.
    """
    game = state.get_game()
    cache: dict[str, _Replay] = getattr(_REPLAYS, "by_game", None) or {}
    _REPLAYS.by_game = cache
    kept = cache.setdefault(str(game), _Replay())
    history = [(item.player, item.action) for item in state.full_history()]
    if kept.twin is None or [(who, action) for who, action, _ in kept.played] != history[: len(kept.played)]:
        kept.twin, kept.played = game.new_initial_state(), []
    for player, action in history[len(kept.played) :]:
        kept.played.append((player, action, " ".join(str(kept.twin.action_to_string(player, action)).split())))
        kept.twin.apply_action(action)
    return list(kept.played)


def _seat(player: int, me: int) -> str:
    return "you" if player == me else f"player_{player}"


# ------------------------------------------------------------------------------ Kuhn poker
_KUHN_CARDS = ("Jack", "Queen", "King")


def kuhn_poker(state: Any, player: int) -> dict[str, str]:
    """Kuhn poker: the card named, the pot, the betting, and what Pass means now."""
    history = state.history()
    bets = [action for action in history[2:]]
    put_in = [1, 1]
    for index, action in enumerate(bets):
        put_in[index % 2] += action  # Bet (1) puts one chip in; Pass (0) none
    names = {0: "Pass", 1: "Bet"}
    betting = ", ".join(f"{_seat(index % 2, player)} {names[action]}" for index, action in enumerate(bets))
    facing_bet = 1 in bets  # after a bet the only moves left are calling or folding it
    parts = {
        "role": (
            f"You are player_{player}, the {_ordinal(player)} to act; "
            f"your opponent is player_{1 - player}, who acts {_ordinal(1 - player)}."
        ),
        "rules": (
            "Kuhn poker. The deck has three cards: Jack < Queen < King. Each player antes 1 chip and gets one "
            "card the other cannot see. player_0 acts first, then the players alternate. With no bet to you, "
            "Pass checks and Bet puts 1 chip in. Facing a bet, Pass folds (the bettor takes the pot) and Bet "
            "calls (puts 1 chip in). After two passes, or a bet and a call, the higher card takes the pot. "
            "Your return is what you win or lose."
        ),
        "private": f"Your card: {_KUHN_CARDS[history[player]]}." if len(history) > player else "",
        "state": f"Pot: {sum(put_in)} chips (you have put in {put_in[player]}, your opponent {put_in[1 - player]}).",
        "history": f"Betting so far: {betting}." if betting else "Betting so far: none.",
    }
    if not state.is_terminal() and state.current_player() == player:
        parts["state"] += (
            " Your opponent has bet: Pass folds, Bet calls."
            if facing_bet
            else " No bet to you: Pass checks, Bet bets 1 chip."
        )
    return parts


# ------------------------------------------------------------------------------ Leduc poker
def _leduc_card(card: int) -> str:
    # OpenSpiel's Leduc ranks card // 2 (RankHand); card % 2 only tells the two copies apart.
    return f"{_KUHN_CARDS[card // 2]} of {('spades', 'hearts')[card % 2]}"


def leduc_poker(state: Any, player: int) -> dict[str, str]:
    """Leduc poker: the private and public cards named, the pot, the betting of each round."""
    played = replay(state)
    deals = [action for who, action, _ in played if who == pyspiel.PlayerId.CHANCE]
    rounds: list[list[str]] = [[]]
    for who, _, name in played[2:]:
        if who == pyspiel.PlayerId.CHANCE:
            rounds.append([])
        else:
            rounds[-1].append(f"{_seat(who, player)} {name}")
    observation = str(state.observation_string(player)) if not state.is_terminal() else ""
    pot = re.search(r"\[Pot: (\d+)\]", observation)
    ante = re.search(r"\[Ante: (\d+) (\d+)\]", observation)
    state_text = ""
    if pot and ante:
        mine, theirs = int(ante.group(1 + player)), int(ante.group(2 - player))
        state_text = f"Pot: {pot.group(1)} chips (you have put in {mine}, your opponent {theirs})."
        if mine < theirs:
            state_text += f" Your opponent has raised: Call puts in {theirs - mine} more, Fold gives up the pot."
        elif not state.is_terminal() and state.current_player() == player:
            state_text += " No bet to you: Call checks."
    public = f" Public card: {_leduc_card(deals[2])}." if len(deals) > 2 else " Public card: not dealt yet."
    history = [
        f"Round {index + 1} betting: {', '.join(moves) if moves else 'none yet'}." for index, moves in enumerate(rounds)
    ]
    return {
        "role": (
            f"You are player_{player}, the {_ordinal(player)} to act in each betting round; "
            f"your opponent is player_{1 - player}."
        ),
        "rules": (
            "Leduc poker. The deck has six cards: two Jacks, two Queens, two Kings (Jack < Queen < King; the suits "
            "only tell the two copies apart). Each player antes 1 chip and gets one private card. Round 1 of "
            "betting: raises are 2 chips. Then one public card is dealt face up, and round 2 of betting: raises "
            "are 4 chips. At most two raises per round. Fold gives up the pot; Call matches the opponent's bet "
            "(with no bet to match, it checks); Raise matches and raises. At the showdown a private card that "
            "pairs the public card wins, otherwise the higher card wins; equal ranks split the pot."
        ),
        "private": f"Your card: {_leduc_card(deals[player])}." if len(deals) > player else "",
        "state": (state_text + public).strip(),
        "history": " ".join(history),
    }


# ------------------------------------------------------------------------------ Liar's Dice
def _bid_words(name: str) -> str:
    match = re.fullmatch(r"(\d+)-(\d+)", name)
    if match is None:
        return name
    quantity, face = match.groups()
    return f"{name} (at least {quantity} {'die shows' if quantity == '1' else 'dice show'} {face})"


def liars_dice(state: Any, player: int) -> dict[str, str]:
    """Liar's Dice: the seat's dice as numbers, the bids in words."""
    game = state.get_game()
    params = game.get_parameters()
    sides, players = int(params["dice_sides"]), game.num_players()
    played = replay(state)
    rolls = [name.removeprefix("Roll ") for who, _, name in played if who == pyspiel.PlayerId.CHANCE]
    per_player = len(rolls) // players if players else 0
    mine = rolls[player * per_player : (player + 1) * per_player] if per_player else []
    bids = [f"{_seat(who, player)}: {_bid_words(name)}" for who, _, name in played if who != pyspiel.PlayerId.CHANCE]
    count = int(params["numdice"])
    return {
        "role": f"You are player_{player}, the {_ordinal(player)} to bid; there are {players} players.",
        "rules": (
            f"Liar's Dice. Each player rolls {count} {sides}-sided {'die' if count == 1 else 'dice'} in secret. "
            "Players bid in turn. A bid q-f claims that at least q dice among all players' dice show face f; "
            f"a {sides} is wild and counts as every face. Each bid must be higher than the last: more dice, or the "
            "same number of dice with a higher face. Instead of bidding you may answer Liar to challenge the last "
            "bid: the dice are shown, and the bidder wins if the bid holds, the challenger otherwise."
        ),
        "private": f"Your {'die' if len(mine) == 1 else 'dice'}: {', '.join(mine)}." if mine else "",
        "history": "Bids so far (oldest first): " + ("; ".join(bids) + "." if bids else "none."),
    }


# ------------------------------------------------------------------------------ the other hand-written games
def _board_game(rules: str, marks: Sequence[str]) -> PartsFunction:
    def parts(state: Any, player: int) -> dict[str, str]:
        order = "first" if player == 0 else "second"
        return {
            "role": f"You are player_{player}: you play {marks[player]} and move {order}.",
            "rules": rules,
            "state": "The board now:\n" + str(state.observation_string(player)).rstrip(),
        }

    return parts


def goofspiel(state: Any, player: int) -> dict[str, str]:
    """Goofspiel: role and rules in words; the state is OpenSpiel's own readable observation."""
    return {
        "role": f"You are player_{player} (P{player} in the state below); all players bid at the same time.",
        "rules": (
            "Goofspiel. Every player holds the bid cards 1..N; a deck of point cards 1..N is turned up one at a "
            "time. Each turn every player bids one of their remaining cards at the same time; the highest bid "
            "wins the point card's value (a tie: nobody wins it). Bid cards are used up. Most points wins."
        ),
    }


def phantom_ttt(state: Any, player: int) -> dict[str, str]:
    """Phantom tic-tac-toe: role and rules; what this seat has seen is OpenSpiel's information state."""
    mark = "x" if player == 0 else "o"
    return {
        "role": f"You are player_{player}: you play {mark} and move {'first' if player == 0 else 'second'}.",
        "rules": (
            "Phantom tic-tac-toe: tic-tac-toe on a 3x3 board where you do not see your opponent's marks. A move "
            "onto a cell your opponent holds fails, reveals that mark to you, and you move again. Three in a row "
            "wins. Cells are (row,column) from (0,0) at the top left."
        ),
    }


def dark_hex(state: Any, player: int) -> dict[str, str]:
    """Dark hex: role and rules; what this seat has seen is OpenSpiel's information state."""
    return {
        "role": f"You are player_{player} and move {'first' if player == 0 else 'second'}.",
        "rules": (
            "Dark hex: hex where you do not see your opponent's stones. A move onto a cell your opponent holds "
            "fails, reveals that stone to you, and you move again. Player_0 connects top and bottom, player_1 "
            "left and right; the first to connect their two sides wins."
        ),
    }


def first_sealed_auction(state: Any, player: int) -> dict[str, str]:
    """First-price sealed-bid auction: the private value in words."""
    value = str(state.observation_string(player)).strip() if not state.is_terminal() else ""
    return {
        "role": f"You are bidder player_{player}; every bidder bids once, in secret.",
        "rules": (
            "First-price sealed-bid auction. Each bidder learns a private value of the item and bids once, in "
            "secret, at most that value. The highest bid wins the item and pays its bid (a tie is broken at "
            "random); the winner's return is value minus bid, everyone else's 0."
        ),
        "private": f"Your value of the item: {value}." if value.isdigit() else "",
        "state": "",
    }


def blotto(state: Any, player: int) -> dict[str, str]:
    """Colonel Blotto: rules in words (one simultaneous move)."""
    params = state.get_game().get_parameters()
    return {
        "role": f"You are player_{player}; all players allocate at the same time.",
        "rules": (
            f"Colonel Blotto. Split {params['coins']} coins over {params['fields']} battlefields, [a,b,c] giving a "
            "coins to the first field and so on. The player with more coins on a field wins it; the player who "
            "wins more fields wins the game."
        ),
        "private": "",
        "state": "",
    }


#: The hand-written views, by OpenSpiel short name.
PARTS: dict[str, PartsFunction] = {
    "kuhn_poker": kuhn_poker,
    "leduc_poker": leduc_poker,
    "liars_dice": liars_dice,
    "goofspiel": goofspiel,
    "phantom_ttt": phantom_ttt,
    "dark_hex": dark_hex,
    "first_sealed_auction": first_sealed_auction,
    "blotto": blotto,
    "clobber": _board_game(
        "Clobber: on a checkerboard full of stones, a move takes one of your stones onto an orthogonally adjacent "
        "opponent stone, which is removed. The player who cannot move loses.",
        ("o", "x"),
    ),
}


def _nim_rules(state: Any, player: int) -> dict[str, str]:
    misere = bool(state.get_game().get_parameters().get("is_misere", True))
    return {
        "role": f"You are player_{player} and move {'first' if player == 0 else 'second'}.",
        "rules": (
            "Nim: piles of stones; players take turns taking one or more stones from one pile ('pile:2, take:3;' "
            "takes 3 stones from the second pile). "
            + ("The player who takes the last stone loses." if misere else "The player who takes the last stone wins.")
        ),
        "state": "Stones per pile now: " + str(state.observation_string(player)).split(":", 1)[-1].strip() + ".",
    }


def _simple(role: str, rules: str) -> PartsFunction:
    def parts(state: Any, player: int) -> dict[str, str]:
        return {"role": role.format(player=player), "rules": rules}

    return parts


PARTS.update(
    {
        "nim": _nim_rules,
        "dots_and_boxes": _simple(
            "You are player_{player}; player_0 moves first.",
            "Dots and Boxes: players take turns drawing a line between two adjacent dots; completing a box scores "
            "it and gives another turn. The player with more boxes at the end wins.",
        ),
        "einstein_wurfelt_nicht": _simple(
            "You are player_{player}.",
            "EinStein würfelt nicht: each turn a die picks which of your numbered cubes moves (the nearest one if "
            "it is gone); black moves down, right or diagonally, white up, left or diagonally, capturing any cube "
            "it lands on. Reach the opposite corner or capture all enemy cubes to win.",
        ),
        "pig": _simple(
            "You are player_{player}; players take turns, player_0 first.",
            "Pig: on your turn roll a die as often as you like, adding each roll to your turn total; a 1 loses "
            "the turn total and ends your turn; stop to bank the turn total. The first to reach the winning score "
            "wins.",
        ),
        "bargaining": _simple(
            "You are player_{player}; player_0 makes the first offer.",
            "Bargaining: the players split a pool of items; each values the items privately. Players take turns "
            "offering how many of each item the offerer keeps, or accept the last offer. On agreement each scores "
            "the value of the items they get; with no agreement in time, both score 0.",
        ),
        "oh_hell": _simple(
            "You are player_{player}.",
            "Oh Hell!: trick-taking card game. Each player bids how many tricks they will take, then tricks are "
            "played following suit where possible; the trump suit beats the others. Scores reward taking the "
            "number of tricks bid.",
        ),
        "catch": _simple(
            "You are the catcher (player_{player}).",
            "Catch: a ball falls from the top of the grid one row per step; move your paddle at the bottom left, "
            "right or stay, to be under the ball when it lands (+1, else -1).",
        ),
    }
)


def parts_function(short_name: str) -> PartsFunction | None:
    """The hand-written view of the game ``short_name``: this module's, then ``openspiel_board_texts``'s, or None.

    A game has one hand-written view, in one of the two modules (tic-tac-toe and Connect Four are
    the board texts': a labelled board and the moves so far).
    """
    if short_name in PARTS:
        return PARTS[short_name]
    if loading.find_spec(BOARD_TEXTS_MODULE) is None:  # the board games' texts are another module's, when present
        return None
    board_texts = loading.import_module(BOARD_TEXTS_MODULE)
    texts: Mapping[str, PartsFunction] = getattr(board_texts, "BOARD_TEXTS", {})
    return texts.get(short_name)


# ------------------------------------------------------------------------------ the generic view
def generic_parts(state: Any, player: int) -> dict[str, str]:
    """The parts of any game's view from what OpenSpiel offers (see the module docstring)."""
    game = state.get_game()
    game_type = game.get_type()
    players = game.num_players()
    perfect = game_type.information == pyspiel.GameType.Information.PERFECT_INFORMATION
    simultaneous = game_type.dynamics == pyspiel.GameType.Dynamics.SIMULTANEOUS
    chance = game_type.chance_mode != pyspiel.GameType.ChanceMode.DETERMINISTIC
    kind = ", ".join(
        [
            "simultaneous moves" if simultaneous else "players take turns",
            "perfect information" if perfect else "hidden information",
            "with chance" if chance else "no chance",
            {
                pyspiel.GameType.Utility.ZERO_SUM: "zero-sum",
                pyspiel.GameType.Utility.CONSTANT_SUM: "constant-sum",
                pyspiel.GameType.Utility.IDENTICAL: "all players share one payoff",
            }.get(game_type.utility, "general-sum"),
        ]
    )
    observation = information = ""
    if game_type.provides_observation_string:
        observation = str(state.observation_string(player)).rstrip()
    if game_type.provides_information_state_string and not perfect:
        information = str(state.information_state_string(player)).rstrip()
    parts = {
        "role": f"You are player_{player}, one of {players} players (player_0 to player_{players - 1}).",
        "rules": (
            f"{game_type.long_name} (OpenSpiel's {game_type.short_name}): {kind}. Returns range from "
            f"{game.min_utility():g} to {game.max_utility():g}."
        ),
        "state": (f"What you observe (OpenSpiel's notation):\n{observation}" if observation else ""),
    }
    if information and information != observation:  # it holds what the observation shows, and the seat's past
        parts["private"] = f"Your information state (OpenSpiel's notation):\n{information}"
        parts["state"] = ""
    if perfect and not simultaneous:
        played = replay(state)
        shown = played[-MAX_HISTORY_MOVES:]
        lines = [f"{'chance' if who < 0 else _seat(who, player)}: {name}" for who, _, name in shown]
        earlier = f" ({len(played) - len(shown)} earlier moves not shown)" if len(played) > len(shown) else ""
        parts["history"] = (
            f"Moves so far, oldest first{earlier}:\n" + "\n".join(lines) if lines else "Moves so far: none."
        )
    return parts


def render(
    state: Any,
    player: int,
    view: TextView,
    moves: Sequence[str] | None,
    ending: str,
) -> str:
    """The prompt of seat ``player`` under ``view`` (``full`` or ``compact``).

    Args:
        state: The pyspiel state.
        player: The seat's player number.
        view: ``full`` or ``compact``.
        moves: The seat's legal move names when it acts, else None.
        ending: The closing line when the seat does not act (the game is over, or whom it waits for).
    """
    game_type = state.get_game().get_type()
    parts = generic_parts(state, player)
    special = parts_function(game_type.short_name)
    if special is not None:
        parts.update(special(state, player))
    title = f"You are playing {game_type.long_name}."
    sections = [title]
    for key in PART_KEYS:
        if key == "rules" and view == "compact":
            continue
        text = parts.get(key, "").strip()
        if text:
            sections.append(f"Rules: {text}" if key == "rules" and not text.startswith("Rules") else text)
    if moves is None:
        sections.append(ending)
    elif len(moves) <= MAX_LISTED_MOVES:
        sections.append("Your legal moves, one per line (answer with one, as written):\n" + "\n".join(moves))
    else:
        sections.append(
            f"You have {len(moves)} legal moves, too many to list: answer with one in OpenSpiel's notation "
            f"(as action_to_string writes it), e.g. {moves[0]}."
        )
    return "\n\n".join(sections)
