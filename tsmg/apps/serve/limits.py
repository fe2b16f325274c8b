"""What a client of ``tsmg serve`` may ask for: the opponents it may name and the game options it may set.

The checks here run before a session builds anything, so a refused request costs the server
nothing: no model is loaded, no game is made, no backend is imported (this module imports
none). What a game lets be offered (:func:`scripted_opponents`) is found once, at start.

**Opponents.** A one-seat session names the policy of the other seats. The server offers the
scripted ones that can play its game (``random`` where the game lists its moves, ``oracle``
where it has one, ``fixed:TEXT`` always) and the models its operator loaded at start
(``tsmg serve --opponent-model SPEC``); any other name is refused with the list.
OpenSpiel's bots (``openspiel-mcts``, ``openspiel-br``) search or solve, so they too are offered
only where the operator names them with ``--opponent-model``; that also lets a client ask for
the bot as the game option ``vs`` (``mcts``, ``br``; ``random`` is always allowed), whose
options (``simulations``) the limits below bound.

**Game options.** A client may send options to make its game with (``game_options``) and
options of one episode (``options``). ``tsmg serve --client-options`` says which it may set
(default: all) and ``--option-limit NAME=MAX`` bounds one. Without a limit, a value may not
ask the server for more than the served game already does:

* an integer (a board size, a step limit, a bot's search budget) is at most the served game's
  value (unbounded where the served game sets none, e.g. ``forfeit_after=None``);
* a text, a list or an object (a custom map, a word list) is no bigger than the served game's
  value or :data:`DEFAULT_MAX_SIZE`, whichever is larger, counted in characters and items
  (:func:`option_size`): a small map is fine, a 100×100 one needs the operator's limit;
* booleans and fractions (probabilities, rewards) are checked by the game alone.

An ``--option-limit`` bounds a number's value, or any other value's size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tsmg.core import Game
from tsmg.model_spec import OPENSPIEL_BOTS, ModelSpecError, parse_model_spec
from tsmg.policies import OraclePolicy

#: The scripted opponents every server offers (``fixed:TEXT`` stands for any fixed answer).
SCRIPTED_OPPONENTS = ("random", "oracle", "fixed:TEXT")
#: Why a scripted opponent is not offered, where the served game cannot be played by it.
CANNOT_PLAY = {
    "random": "the served game does not list its moves, which random play picks from",
    "oracle": "the served game has no oracle",
}
#: The bots the OpenSpiel game option ``vs`` names (besides ``random``), by the model spec that enables them.
VS_BOT_SPECS = {"mcts": "openspiel-mcts", "br": "openspiel-br"}
#: Size (characters and items) of a text, list or object any client may send without a limit: a
#: 16×16 map, a choice such as ``on_invalid="penalize"``.
DEFAULT_MAX_SIZE = 256


class NotOffered(ValueError):
    """A client asked for something this server does not offer (HTTP 422); the message names what it does."""


def canonical_spec(spec: str) -> str:
    """A model spec as written canonically (``" hf:DIR"`` is ``"hf:DIR"``).

    Raises:
        ModelSpecError: The spec names no kind of player.
    """
    return str(parse_model_spec(spec))


def offered_opponents(models: Sequence[str], scripted: Sequence[str] = SCRIPTED_OPPONENTS) -> list[str]:
    """What a one-seat session may name as its opponent: the scripted policies that play the game, then ``models``.

    Args:
        models: The canonical specs the operator loaded (``--opponent-model``).
        scripted: Those of :data:`SCRIPTED_OPPONENTS` that can play the served game
            (:func:`scripted_opponents`); all of them by default.
    """
    return [*scripted, *models]


def scripted_opponents(game: Game) -> list[str]:
    """The scripted opponents that can play ``game``: ``random`` where it lists its moves, ``oracle`` where it has one.

    ``fixed:TEXT`` always. Resets ``game`` (seed 0) to look at the start of an episode.
    """
    try:
        OraclePolicy.check_game(game, seed=0)
        has_oracle = True
    except ValueError:
        has_oracle = False
    lists_moves = all(game.legal_actions(agent) for agent in game.active_agents)
    plays = {"random": lists_moves, "oracle": has_oracle, "fixed:TEXT": True}
    return [name for name in SCRIPTED_OPPONENTS if plays[name]]


def check_opponent(spec: Any, offered: Sequence[str]) -> str:
    """The canonical spec of an opponent a client named, if the server offers it.

    Only parses text (imports nothing, loads nothing): ``spec`` is offered when it is one of
    ``offered`` (``fixed:TEXT`` standing for any fixed answer).

    Args:
        spec: What the client named.
        offered: What the server offers for its game (:func:`offered_opponents`).

    Raises:
        NotOffered: ``spec`` is not text, or names a policy the server does not offer.
    """
    listed = ", ".join(offered)
    if not isinstance(spec, str):
        raise NotOffered(f"opponent must be text naming one of: {listed}")
    try:
        parsed = parse_model_spec(spec)
    except ModelSpecError:
        parsed = None
    if parsed is not None and ("fixed:TEXT" if parsed.kind == "fixed" else str(parsed)) in offered:
        return str(parsed)
    hint = ""
    if parsed is not None and parsed.kind in CANNOT_PLAY:
        hint = f" ({CANNOT_PLAY[parsed.kind]})"
    elif parsed is not None and parsed.kind in OPENSPIEL_BOTS:
        hint = f" (the operator enables OpenSpiel's bots: tsmg serve --opponent-model {parsed.kind})"
    elif parsed is not None and not parsed.scripted:
        hint = " (a model opponent is loaded at start: tsmg serve --opponent-model)"
    raise NotOffered(f"opponent {spec!r:.60} is not offered by this server; choose one of: {listed}{hint}")


def check_vs_bot(where: str, options: Mapping[str, Any], models: Sequence[str]) -> None:
    """Refuse a client's game option ``vs`` naming an OpenSpiel bot the operator did not enable.

    Args:
        where: Which field carried the options, for the message.
        options: What the client asked for (options the server sets itself left out).
        models: The canonical specs the operator enabled (``--opponent-model``).

    Raises:
        NotOffered: ``vs`` names ``mcts`` or ``br`` without ``--opponent-model openspiel-mcts`` /
            ``openspiel-br``; the message lists the bots this server offers.
    """
    bot = options.get("vs")
    if bot is None or bot == "random" or VS_BOT_SPECS.get(bot) in models:
        return
    offered = ", ".join(["random", *(name for name, spec in VS_BOT_SPECS.items() if spec in models)])
    spec = VS_BOT_SPECS.get(bot, "")
    hint = f" (the operator enables it: tsmg serve --opponent-model {spec})" if spec else ""
    raise NotOffered(f"{where}.vs: {bot!r:.40} is not offered by this server; choose one of: {offered}{hint}")


def option_size(value: Any) -> int:
    """How big a non-numeric option value is: a text's characters, summed through lists and objects.

    >>> option_size(["SFFF", "FHFH"]), option_size({"a": "xy"}), option_size(None)
    (8, 3, 0)
    """
    if isinstance(value, str):
        return len(value)
    if isinstance(value, Mapping):
        return sum(option_size(key) + option_size(item) for key, item in value.items())
    if isinstance(value, list | tuple):
        return sum(option_size(item) if isinstance(item, str | list | tuple | Mapping) else 1 for item in value)
    return 0 if value is None else 1


@dataclass(frozen=True)
class OptionRules:
    """Which game options a client may set, and how large.

    Attributes:
        allowed: Option names a client may set (None: every option).
        limits: Per option, the largest number (or, for other values, size) a client may ask for.
    """

    allowed: frozenset[str] | None = None
    limits: Mapping[str, float] = field(default_factory=dict)

    def check(self, where: str, options: Mapping[str, Any], served: Mapping[str, Any]) -> None:
        """Refuse the first option of ``options`` a client may not set, or asks too much of.

        Args:
            where: Which field carried them (``game_options`` or ``options``), for the message.
            options: What the client sent.
            served: The served game's own values (its options as made by the server).

        Raises:
            NotOffered: An option is not in the allow-list or is over its limit; the message
                names the limit and the flag that sets it.
        """
        for name, value in options.items():
            name = str(name)
            if self.allowed is not None and name not in self.allowed:
                allowed = ", ".join(sorted(self.allowed)) or "none"
                raise NotOffered(
                    f"{where}.{name:.40}: this server does not let clients set it (they may set: {allowed}; "
                    "tsmg serve --client-options)"
                )
            self._check_size(where, name, value, served.get(name))

    def _check_size(self, where: str, name: str, value: Any, served: Any) -> None:
        limit = self.limits.get(name)
        is_number = isinstance(value, int | float) and not isinstance(value, bool)
        if limit is not None:
            asked = value if is_number else option_size(value)
            if asked > limit:
                what = "" if is_number else " in size (characters and items)"
                raise NotOffered(
                    f"{where}.{name}: {asked:g}{what} is over this server's limit of {limit:g} "
                    f"(tsmg serve --option-limit {name}=N)"
                )
            return
        if is_number:
            if isinstance(value, int) and isinstance(served, int) and not isinstance(served, bool) and value > served:
                raise NotOffered(
                    f"{where}.{name}: {value} is over this server's limit of {served} (the served game's own value; "
                    f"tsmg serve --option-limit {name}=N raises it)"
                )
            return
        if isinstance(value, bool) or value is None:
            return
        size, limit = option_size(value), max(option_size(served), DEFAULT_MAX_SIZE)
        if size > limit:
            raise NotOffered(
                f"{where}.{name}: a value of size {size} (characters and items) is over this server's limit of "
                f"{limit} (tsmg serve --option-limit {name}=N raises it)"
            )


def parse_option_limit(text: str) -> tuple[str, float]:
    """``NAME=MAX`` as given to ``--option-limit``.

    Raises:
        ValueError: Not of that form, or MAX is not a non-negative number.
    """
    name, equals, number = text.partition("=")
    try:
        limit = float(number)
    except ValueError:
        limit = -1.0
    if not equals or not name.strip() or not limit >= 0 or limit == float("inf"):
        raise ValueError(f"--option-limit takes NAME=MAX with MAX a non-negative number, got {text!r}")
    return name.strip(), limit


def parse_client_options(text: str) -> frozenset[str] | None:
    """``all`` (None), ``none`` (empty) or a comma-separated list of names, as given to ``--client-options``."""
    if text.strip() == "all":
        return None
    if text.strip() == "none":
        return frozenset()
    return frozenset(name.strip() for name in text.split(",") if name.strip())
