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
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

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
