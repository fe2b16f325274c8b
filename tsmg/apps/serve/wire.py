r"""What a client of ``tsmg serve`` sends, read once for both transports: a JSON object, within bounds.

An HTTP body and a WebSocket text frame go through :func:`read_json_object`, so the same bad
message gets the same sentence whichever way it came (HTTP: a 400 with it as ``detail``; the
WebSocket: an error frame with it as ``message``, and the session goes on). What it refuses, and
why each would otherwise reach the client as a crash:

* text that is not JSON, or not UTF-8 (OpenEnv's WebSocket handler would answer with its own words);
* ``NaN``, ``Infinity`` and numbers out of a float's range (Python's ``json`` reads them; the
  response then cannot be written as JSON);
* a top level that is not an object (OpenEnv's handler calls ``.get`` on it and ends the session);
* nesting deeper than :data:`MAX_JSON_DEPTH` (deeper than the interpreter's recursion limit,
  ``json`` itself raises ``RecursionError``; a few hundred levels still overflow the recursion of
  whatever walks the value later, e.g. the size of a game option);
* a lone surrogate written as a JSON escape (``\ud800``): it decodes, but cannot be sent back as UTF-8.
"""

from __future__ import annotations

import json
import math
from typing import Any

#: The deepest nesting of objects and lists accepted. A tsmg message is a few levels deep (a
#: custom map is four: message, data, options, the map's rows); the margin leaves room for
#: nested tool-call arguments.
MAX_JSON_DEPTH = 64


class BadJSON(ValueError):
    """A message that is not a JSON object within bounds; the message is the sentence the client gets."""


def read_json_object(raw: str | bytes) -> dict[str, Any]:
    """The JSON object a client sent.

    Raises:
        BadJSON: ``raw`` is not JSON, holds NaN or an out-of-range number, is not an object, is
            nested more than :data:`MAX_JSON_DEPTH` levels deep, or holds a lone surrogate.

    Example:
        >>> read_json_object(b'{"type": "step", "data": {"text": "left"}}')
        {'type': 'step', 'data': {'text': 'left'}}
        >>> read_json_object("[" * 100 + "]" * 100)
        Traceback (most recent call last):
        ...
        tsmg.apps.serve.wire.BadJSON: the request is nested too deeply: at most 64 levels of objects and lists
    """
    too_deep = f"the request is nested too deeply: at most {MAX_JSON_DEPTH} levels of objects and lists"
    try:
        value = json.loads(raw, parse_float=_finite_float, parse_constant=_reject_constant)
    except RecursionError:
        raise BadJSON(too_deep) from None
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError and the two refusals below
        raise BadJSON(f"the request is not valid JSON: {error}") from None
    # Counting brackets costs next to nothing; only a message with more of them than the limit is walked.
    brackets = raw.count(b"[") + raw.count(b"{") if isinstance(raw, bytes) else raw.count("[") + raw.count("{")
    if brackets > MAX_JSON_DEPTH and _deeper_than(value, MAX_JSON_DEPTH):
        raise BadJSON(too_deep)
    if not isinstance(value, dict):
        raise BadJSON(f"the request must be a JSON object, got {type(value).__name__}")
    escapes = raw.lower().count(b"\\ud") if isinstance(raw, bytes) else raw.lower().count("\\ud")
    if escapes and not _valid_unicode(value):
        raise BadJSON("the request holds text that is not valid Unicode (a lone surrogate)")
    return value


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:20]} is out of range")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether objects and lists nest in ``value`` more than ``limit`` levels (walked without recursion)."""
    pending: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _valid_unicode(value: Any) -> bool:
    """Whether every text in ``value`` encodes as UTF-8 (recursive: called on values within the depth limit)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, dict):
        return all(_valid_unicode(key) and _valid_unicode(item) for key, item in value.items())
    if isinstance(value, list):
        return all(_valid_unicode(item) for item in value)
    return True
