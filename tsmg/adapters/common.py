"""What the Gymnasium and PettingZoo adapters share: Text spaces, option checks, default text layers.

* Text spaces for exported envs (:func:`text_space`, :class:`TextFitter`) and the per-step info
  they hand out (:func:`export_info`, :func:`as_answer`).
* Reading and writing env actions: Discrete actions by name or number under the answer rule of
  :mod:`tsmg.answers` (:class:`DiscreteMoves`), numeric arrays (:func:`parse_numbers`), action
  masks (:func:`mask_filter`), and an env's own verdict on a text answer (:func:`env_verdict`).
* Describing raw observations as text (:func:`describe_value`, :func:`describe_observation`) and
  as hashable state keys (:func:`hashable_value`).
"""

from __future__ import annotations

import copy
import re
import string
import sys
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from tsmg.answers import MoveNames, quote
from tsmg.core import AgentID, Game, Invalid
from tsmg.registry import make

#: Characters of the exported Text spaces: printable ASCII (with newline and tab, which every
#: multi-line observation needs) plus the typographic and box-drawing symbols text games like to
#: draw with. Anything else is replaced by ``?`` (with a warning) so observations stay in the space.
TEXT_CHARSET: str = string.printable + "".join(
    sorted(set("…–—‘’“”«»·•×÷°±§¶→←↑↓↔─│┌┐└┘├┤┬┴┼═║╔╗╚╝█░▒▓■□▪▫●○◆◇★☆✓✗♠♥♦♣♟♜♞♝♛♚♙"))
)
#: Longest observation the exported spaces admit (catalog renders are a few hundred characters).
OBSERVATION_MAX_LENGTH = 8192
#: Longest action text the exported spaces admit (answers are names, numbers or short phrases).
ACTION_MAX_LENGTH = 256
#: Arrays with more entries are not spelled out by the default renderers: a language model cannot
#: read thousands of numbers (PettingZoo's chess observation has 7,104), so they ask for ``render=``.
MAX_DESCRIBED_ENTRIES = 256
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


# ------------------------------------------------------------------------------ text spaces
def text_space(max_length: int, charset: str = TEXT_CHARSET, min_length: int = 0) -> spaces.Text:
    """A :class:`gymnasium.spaces.Text` space over ``charset`` (empty text allowed by default)."""
    return spaces.Text(max_length, min_length=min_length, charset=charset)


class TextFitter:
    """Makes text lie in a Text space: unknown characters become ``?``, overlong text is cut.

    Warns once per kind of problem and owner, because a render that needs fitting is a setting to
    fix (a larger ``observation_max_length`` or ``charset``), not something to repeat every step.
    """

    def __init__(self, space: spaces.Text, owner: str) -> None:
        """Fit text into ``space``; ``owner`` names the env in warnings."""
        self.space = space
        self.owner = owner
        self._warned: set[str] = set()

    def __call__(self, text: str) -> str:
        """``text`` itself when it fits, else its fitted version."""
        space = self.space
        if space.contains(text):
            return text
        known = space.character_set
        if any(character not in known for character in text):
            bad = sorted({character for character in text if character not in known})[:10]
            self._warn("charset", f"{self.owner}: characters {bad!r} are outside the Text charset; shown as '?'")
            text = "".join(character if character in known else "?" for character in text)
        if len(text) > space.max_length:
            self._warn(
                "length",
                f"{self.owner}: text of {len(text)} characters cut to max_length={space.max_length}",
            )
            text = text[: space.max_length]
        return text.ljust(space.min_length)

    def _warn(self, kind: str, message: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(message, stacklevel=3)


def export_info(game: Game, agent: AgentID, game_info: Mapping[str, Any]) -> dict[str, Any]:
    """The info an exported env hands out: the game's per-step info plus ``legal_actions``.

    Deep copies: Gymnasium and PettingZoo promise the caller fresh objects on every call.
    """
    info = copy.deepcopy(dict(game_info))
    legal = game.legal_actions(agent)
    info["legal_actions"] = None if legal is None else list(legal)
    return info


def game_from(game: Game | str, game_options: Mapping[str, Any] | None) -> Game:
    """``game`` itself, or the game registered under that id made with ``game_options``.

    Raises:
        TypeError: ``game_options`` were given with a game instance (they only apply to ids).
    """
    if isinstance(game, str):
        return make(game, **dict(game_options or {}))
    if game_options:
        raise TypeError("game_options only apply when the game is given by its id")
    return game


def as_answer(action: Any) -> str | Invalid:
    """An exported env's action as an answer: text as it is; anything else an invalid answer."""
    if isinstance(action, str | Invalid):
        return action
    return Invalid("no action given" if action is None else f"expected text, got {type(action).__name__}")


def check_render_mode(render_mode: str | None) -> None:
    """Refuse a render mode other than None and ``"ansi"`` (all that text envs offer)."""
    if render_mode not in (None, "ansi"):
        raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")


# ------------------------------------------------------------------------------ observations as text
def describe_value(value: Any) -> str:
    """Readable text for a raw observation: numbers, arrays, tuples and dicts, nested.

    Example:
        >>> print(describe_value({"position": np.array([1, 2]), "carrying": True}))
        position: [1, 2]
        carrying: True
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        return f"{float(value):g}"
    if isinstance(value, np.ndarray):
        return np.array2string(value, separator=", ", threshold=sys.maxsize)
    if isinstance(value, Mapping):
        return "\n".join(f"{key}: {describe_value(item)}" for key, item in value.items())
    if isinstance(value, tuple | list):
        inner = ", ".join(describe_value(item) for item in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    return str(value)


def describe_observation(value: Any, owner: str) -> str:
    """:func:`describe_value`, refusing arrays too large for a model to read (pass ``render=`` then).

    Raises:
        ValueError: An array in ``value`` has more than :data:`MAX_DESCRIBED_ENTRIES` entries.
    """
    for array in _arrays(value):
        if array.size > MAX_DESCRIBED_ENTRIES:
            raise ValueError(
                f"{owner}: observations hold an array of shape {array.shape} ({array.size} values), too many to "
                "show a language model as numbers; pass render= a function that describes them in words"
            )
    return describe_value(value)


def check_describable(space: spaces.Space[Any], owner: str) -> None:
    """Refuse, up front, observations the default renderers cannot show (see :func:`describe_observation`).

    Raises:
        ValueError: ``space`` (or a part of a Dict/Tuple space) holds more than
            :data:`MAX_DESCRIBED_ENTRIES` numbers; the message asks for ``render=``.
    """
    parts: list[spaces.Space[Any]] = [space]
    while parts:
        part = parts.pop()
        if isinstance(part, spaces.Dict):  # the action mask is shown as the legal actions, not as numbers
            parts.extend(sub for key, sub in part.spaces.items() if key != "action_mask")
        elif isinstance(part, spaces.Tuple):
            parts.extend(part.spaces)
        elif isinstance(part, spaces.Box | spaces.MultiBinary | spaces.MultiDiscrete):
            size = int(np.prod(part.shape)) if part.shape else 1
            if size > MAX_DESCRIBED_ENTRIES:
                raise ValueError(
                    f"{owner}: observations hold {size} numbers ({part}), too many to show a language model; pass "
                    "render= a function that describes them in words (docs/interop.md)"
                )


def _arrays(value: Any) -> list[np.ndarray]:
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, Mapping):
        return [array for item in value.values() for array in _arrays(item)]
    if isinstance(value, tuple | list):
        return [array for item in value for array in _arrays(item)]
    return []


def hashable_value(value: Any) -> Hashable:
    """A hashable equivalent of a raw observation (for state keys)."""
    if isinstance(value, np.ndarray):
        return (value.shape, tuple(value.ravel().tolist()))
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return tuple((key, hashable_value(item)) for key, item in value.items())
    if isinstance(value, tuple | list):
        return tuple(hashable_value(item) for item in value)
    if isinstance(value, Hashable):
        return value
    return repr(value)


# ------------------------------------------------------------------------------ env actions
class DiscreteMoves:
    """The text layer of a Discrete action space: each action by its name, or by its number without names.

    Reading follows the answer rule (:mod:`tsmg.answers`): a name in any case with surrounding
    punctuation aside, or an alias from ``aliases`` (which the game must announce in its
    prompt); with names, numbers are not answers.

    Example:
        >>> moves = DiscreteMoves(spaces.Discrete(3), ["rock", "paper", "scissors"], {"stone": "rock"})
        >>> moves.read(" Paper! "), moves.read("stone"), moves.read("1").reason
        (1, 0, "expected one of rock, paper, scissors; got '1'")
    """

    def __init__(
        self, space: spaces.Discrete, names: Sequence[str] | None = None, aliases: Mapping[str, str] | None = None
    ) -> None:
        """Name the actions of ``space`` (``names`` in order; numbers when None)."""
        start = int(space.start)
        self.space = space
        self.actions: list[int] = list(range(start, start + int(space.n)))
        if names is not None and len(names) != len(self.actions):
            raise ValueError(f"action_names needs a Discrete action space with {len(names)} actions, got {space}")
        self.names: tuple[str, ...] | None = tuple(names) if names is not None else None
        self._texts = self.names or tuple(str(action) for action in self.actions)
        self._start = start
        self._by_name = MoveNames(dict(zip(self._texts, self.actions, strict=True)), aliases)
        self.aliases: dict[str, str] = dict(aliases or {})
        if self.names is None:
            self._expected = f"expected an integer from {self.actions[0]} to {self.actions[-1]}"
        else:
            self._expected = f"expected one of {', '.join(self.names)}"

    def read(self, text: str) -> int | Invalid:
        """The action ``text`` names, or :class:`Invalid`."""
        return self._by_name.read(text, self._expected)

    def text(self, action: Any) -> str:
        """Canonical text of an action: its name, or its number."""
        return self._texts[int(action) - self._start]


def parse_numbers(space: spaces.Space[Any], text: str) -> Any:
    """Parse a Box / MultiDiscrete / MultiBinary action written as numbers (commas, spaces, brackets)."""
    numbers = _NUMBER.findall(text)
    leftover = _NUMBER.sub(" ", text).translate(str.maketrans("", "", "[](),;")).strip()
    shape = space.shape or ()
    size = int(np.prod(shape)) if shape else 1
    if leftover or len(numbers) != size:
        return Invalid(f"expected {size} number(s) separated by spaces or commas; got {quote(text)}")
    try:
        action = np.asarray([float(number) for number in numbers], dtype=space.dtype).reshape(shape)
    except (ValueError, OverflowError) as error:
        return Invalid(f"could not read {quote(text)} as numbers: {error}")
    if not space.contains(action):
        return Invalid(f"{quote(text)} is outside the action space {space}")
    return action


def number_text(action: Any) -> str:
    """Canonical text of a numeric array action: its numbers separated by spaces."""
    return " ".join(describe_value(value) for value in np.asarray(action).ravel())


def parse_default(space: spaces.Space[Any], text: str, discrete: DiscreteMoves | None) -> Any:
    """The default reading of an answer for ``space``: Discrete by name or number, Text as is, arrays as numbers."""
    if isinstance(space, spaces.Discrete) and discrete is not None:
        return discrete.read(text)
    if isinstance(space, spaces.Text):
        if space.contains(text):
            return text
        return Invalid(f"the answer must be at most {space.max_length} characters from the env's charset")
    if isinstance(space, spaces.Box | spaces.MultiDiscrete | spaces.MultiBinary):
        return parse_numbers(space, text)
    return Invalid(f"no default parser for the action space {space}; pass parse=")


def default_action_text(space: spaces.Space[Any], action: Any, discrete: DiscreteMoves | None) -> str:
    """Canonical text of an env action: a Discrete name or number, text as it is, else its numbers."""
    if isinstance(space, spaces.Discrete) and discrete is not None:
        return discrete.text(action)
    return action if isinstance(action, str) else number_text(action)


def env_legal_moves(space: spaces.Space[Any], mask: Any, env_info: Mapping[str, Any]) -> list[Any] | None:
    """Playable env actions: Discrete actions narrowed by ``mask``, the ``legal_actions`` a Text env reports."""
    if isinstance(space, spaces.Discrete):
        actions = list(range(int(space.start), int(space.start + space.n)))
        return actions if mask is None else mask_filter(actions, space, mask)
    if isinstance(space, spaces.Text):
        legal = env_info.get("legal_actions")
        if isinstance(legal, list) and all(isinstance(action, str) for action in legal):
            return list(legal)
    return None


def mask_filter(actions: list[int], space: spaces.Discrete, mask: Any) -> list[int]:
    """The Discrete ``actions`` that ``mask`` allows (all of them if the mask has the wrong shape)."""
    mask = np.asarray(mask)
    if mask.shape != (int(space.n),):
        return actions
    start = int(space.start)
    return [action for action in actions if mask[action - start]]


def check_mask(action: Any, mask: Any, legal: Sequence[Any] | None, text: Callable[[Any], str]) -> Any:
    """``action`` when the mask allows it (or there is no mask), else :class:`Invalid` listing the allowed ones."""
    if mask is None or legal is None or any(same_action(action, move) for move in legal):
        return action  # without a mask the env itself judges the action (e.g. Text action spaces)
    allowed = ", ".join(text(move) for move in legal)
    return Invalid(f"{text(action)} is not a legal move now (legal: {allowed})")


def check_in_space(action: Any, space: spaces.Space[Any], text: Callable[[Any], str]) -> Any:
    """``action`` when ``space`` holds it, else :class:`Invalid`: what the library would refuse, refused as an answer.

    Gymnasium's ``action_space.contains`` is the libraries' own test of a legal action (PettingZoo's
    ``AssertOutOfBoundsWrapper`` asserts it), so an action a custom ``parse=`` reads outside the space
    is an invalid answer here instead of an error inside the env.
    """
    try:
        inside = space.contains(action)
    except (TypeError, ValueError):  # e.g. an array of another shape: not an action of this space
        inside = False
    if inside:
        return action
    try:
        shown = text(action)
    except Exception:  # the action is outside the space: its text may not exist either
        shown = repr(action)
    return Invalid(f"{shown} is not an action of the space {space}")


def same_action(first: Any, second: Any) -> bool:
    """Whether two env actions are equal (scalars or arrays)."""
    return bool(np.array_equal(np.asarray(first), np.asarray(second)))


def env_verdict(env_info: Mapping[str, Any], info: dict[str, Any]) -> None:
    """Take over the env's own verdict on a text answer (``valid``/``reason``/``action`` in its info).

    Envs with a Text action space parse the answer themselves; the envs this package exports
    report the outcome under these keys, so wrapping one again keeps the validity information.
    """
    if env_info.get("valid") is False:
        info["valid"] = False
        info["reason"] = env_info.get("reason")
        info["action"] = env_info.get("action")
    elif isinstance(env_info.get("action"), str):
        info["action"] = env_info["action"]
