"""Tool schemas with typed arguments, and the text form of a tool call that games parse.

A tool-using game (the service games, :mod:`games.service`) offers several tools, each a
:class:`ToolSpec` with typed arguments. Its moves are calls written in one **text form**,
``name(arg="value", other=12)``: what the game's legal actions list, what strict parsing,
constrained choice, training and the trainer integrations use, exactly like any other game's
move text. A hosted tool-calling model gets the same tools as function schemas
(:meth:`ToolSpec.openai_schema`, the OpenAI ``tools`` field), and its ``tool_calls`` come back to
the game as the text form (:func:`call_from_json`).

Text form: the tool's name, then the arguments in parentheses as ``name=value`` pairs separated
by commas; a string value in double quotes (a backslash escapes a quote), an integer bare. The
canonical text (:func:`format_call`) lists the arguments in the schema's order.

Example:
    >>> lookup = ToolSpec(name="lookup_order", description="Look an order up.", parameters=[
    ...     ToolParam(name="order_id", type="string", description="The order's id.")])
    >>> text = format_call(lookup, {"order_id": "A12"}); text
    'lookup_order(order_id="A12")'
    >>> parse_call(text, [lookup])
    ('lookup_order', {'order_id': 'A12'})
    >>> parse_call('lookup_order(id="A12")', [lookup])
    'lookup_order takes order_id; got id'
    >>> call_from_json("lookup_order", '{"order_id": "A12"}', [lookup])
    'lookup_order(order_id="A12")'

**The service-game members** live here too, apart from :class:`~tsmg.core.Game`: a game whose moves
call tools, and that may keep each episode's exact influence graph (:mod:`tsmg.influence`), is a
:class:`ToolGame` by having its three members, with no base class to inherit (the service games of
:mod:`games.service`, and such a game served over HTTP, ``tsmg.make(URL)``). ``Game`` keeps
the core every game has; code that plays any game reads these members through :func:`game_tools`,
:func:`provides_influence` and :func:`exact_influence`, which answer None or False for the others.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from tsmg.influence import InfluenceGraph

#: The argument types a tool may take (JSON Schema's names).
ParamType = Literal["string", "integer"]


class ToolParam(BaseModel):
    """One typed argument of a tool."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z_][a-z0-9_]*$")
    type: ParamType = "string"
    description: str = ""


class ToolSpec(BaseModel):
    """A tool the agent may call: its name, what it does and its typed arguments (all required)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z_][a-z0-9_]*$")
    description: str
    parameters: list[ToolParam] = Field(default_factory=list)

    def openai_schema(self) -> dict[str, Any]:
        """The tool as an OpenAI ``tools`` entry (a function with a JSON-Schema object of its arguments)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": {
                        param.name: {"type": param.type, "description": param.description} for param in self.parameters
                    },
                    "required": [param.name for param in self.parameters],
                    "additionalProperties": False,
                },
            },
        }

    def signature(self) -> str:
        """``name(arg: type, ...)``: how a prompt lists the tool."""
        return f"{self.name}({', '.join(f'{param.name}: {param.type}' for param in self.parameters)})"


def format_call(tool: ToolSpec, arguments: Mapping[str, Any]) -> str:
    """The canonical text form of a call of ``tool`` (arguments in the schema's order)."""
    parts = []
    for param in tool.parameters:
        value = arguments[param.name]
        parts.append(
            f"{param.name}={int(value)}" if param.type == "integer" else f"{param.name}={json.dumps(str(value))}"
        )
    return f"{tool.name}({', '.join(parts)})"


_CALL = re.compile(r"^\s*`*\s*([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)\s*`*\s*\.?\s*$", re.DOTALL)
_ARGUMENT = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*("(?:[^"\\]|\\.)*"|-?\d+)\s*(,|$)')


def parse_call(text: str, tools: Sequence[ToolSpec]) -> tuple[str, dict[str, Any]] | str:
    """``(name, arguments)`` of a call in text form, typed by the tool's schema, or the reason it is not one."""
    match = _CALL.match(text)
    if match is None:
        return (
            f'expected one tool call such as {tools[0].name}(...) with name="value" arguments' if tools else "no tools"
        )
    name, body = match.group(1), match.group(2)
    tool = next((tool for tool in tools if tool.name == name), None)
    if tool is None:
        return f"unknown tool {name!r}; the tools are {[tool.name for tool in tools]}"
    arguments = _arguments(body)
    if arguments is None:
        return f'the arguments of {name} must be name="text" or name=number pairs separated by commas'
    expected = [param.name for param in tool.parameters]
    if sorted(arguments) != sorted(expected):
        return f"{name} takes {', '.join(expected) or 'no arguments'}; got {', '.join(arguments) or 'none'}"
    for param in tool.parameters:
        value = arguments[param.name]
        if param.type == "integer" and not isinstance(value, int):
            return f"{name}'s {param.name} is an integer; got {json.dumps(value)}"
        if param.type == "string":
            arguments[param.name] = str(value)
    return name, arguments


def _arguments(body: str) -> dict[str, Any] | None:
    """The ``name=value`` pairs of a call's parentheses, typed as written (None: not such pairs)."""
    arguments: dict[str, Any] = {}
    position = 0
    while position < len(body) and body[position:].strip():
        found = _ARGUMENT.match(body, position)
        if found is None:
            return None
        key, raw = found.group(1), found.group(2)
        arguments[key] = json.loads(raw) if raw.startswith('"') else int(raw)
        position = found.end()
    return arguments


def read_call(text: str) -> tuple[str, dict[str, Any]] | None:
    """``(name, arguments)`` of any call in text form, without the tools' schemas (None: not a call).

    What a reader of a record (the viewer) uses; a game checks its calls with :func:`parse_call`.

    >>> read_call('issue_refund(order_id="F18", amount="41.81")')
    ('issue_refund', {'order_id': 'F18', 'amount': '41.81'})
    >>> read_call("up") is None
    True
    """
    match = _CALL.match(text)
    if match is None:
        return None
    arguments = _arguments(match.group(2))
    return None if arguments is None else (match.group(1), arguments)


def call_from_json(name: str, arguments: str, tools: Sequence[ToolSpec]) -> str:
    """A hosted model's function call (name, JSON arguments) in text form, for the game to parse.

    Arguments that do not fit the tool's schema keep what they said (``name(key="value")``, or the
    raw text when they are not a JSON object), so that the game's parser refuses them with its reason.
    """
    tool = next((tool for tool in tools if tool.name == name), None)
    try:
        values = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return f"{name}({arguments})"
    if not isinstance(values, dict):
        return f"{name}({arguments})"
    if tool is not None and sorted(values) == sorted(param.name for param in tool.parameters):
        try:
            return format_call(tool, values)
        except (TypeError, ValueError):
            pass
    shown = (f"{key}={value if isinstance(value, int) else json.dumps(str(value))}" for key, value in values.items())
    return f"{name}({', '.join(shown)})"


@runtime_checkable
class ToolGame(Protocol):
    """A tool-using game (a service game): its moves call typed tools, and it may keep each episode's data flow.

    A game is one by having these members (``isinstance(game, ToolGame)`` checks them; no base class
    to inherit). Code that plays any game reads them through :func:`game_tools`,
    :func:`provides_influence` and :func:`exact_influence`.
    """

    #: Whether :meth:`influence_graph` gives every finished episode's exact influence graph; training's
    #: ``iapo`` credit then reads it without an annotator model.
    provides_influence: ClassVar[bool]

    def tool_specs(self) -> Sequence[ToolSpec] | None:
        """The tools the game's moves call (typed schemas), or None.

        Its moves are then calls in the text form ``name(arg="value")``; under the ``tool`` action
        format a hosted model gets these schemas (one function per tool) instead of ``make_move``.
        """
        ...

    def influence_graph(self) -> InfluenceGraph | None:
        """The exact influence graph of the finished episode, or None for a game that keeps none.

        A game that knows its own data flow (which fields of which tool result or user message each
        action's arguments came from) returns it here; the rollout calls it once the episode is over
        and stores it in the record's ``influence["exact"]``. Node ``step`` values index the
        episode's decisions in order (for a single-agent game, the round). See :mod:`tsmg.influence`
        for the graph's contract.
        """
        ...


def game_tools(game: object) -> Sequence[ToolSpec] | None:
    """The tools of a tool-using game (:meth:`ToolGame.tool_specs`); None for any other game."""
    return game.tool_specs() if isinstance(game, ToolGame) else None


def provides_influence(game: object) -> bool:
    """Whether ``game`` keeps every finished episode's exact influence graph (:attr:`ToolGame.provides_influence`)."""
    return isinstance(game, ToolGame) and bool(game.provides_influence)


def exact_influence(game: object) -> InfluenceGraph | None:
    """The finished episode's exact influence graph of a game that keeps one (:meth:`ToolGame.influence_graph`).

    None for a game that keeps none, and before the episode is over.
    """
    return game.influence_graph() if isinstance(game, ToolGame) and game.provides_influence else None
