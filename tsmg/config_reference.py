"""Every field of a pydantic configuration, its value and what it does, read from the fields themselves.

One home for the reference of what can be set: ``tsmg train --print-config`` prints a run's whole
configuration as YAML with each field's description above it (the output is a valid ``--config``
file), and ``tsmg train --print-config markdown`` prints docs/config.md, the page of every field with
its type and default. Both walk the pydantic model, so a field added to the schema appears in both
without anyone writing it twice; ``tests/test_config_reference.py`` keeps the page equal to the
command's output.
"""

from __future__ import annotations

import json
import textwrap
import types
import typing
from dataclasses import dataclass
from typing import Any

import yaml

__all__ = ["FieldDoc", "commented_yaml", "describe_fields", "markdown_reference", "type_name"]

#: Width of the comment lines in the YAML output (the value lines may be longer).
_COMMENT_WIDTH = 96


@dataclass(frozen=True)
class FieldDoc:
    """One field of a configuration: its dotted path, readable type, default and description.

    ``default`` is ``None`` both for a field whose default is None and for a required one: ``required``
    tells them apart. ``section`` marks a field that is itself a configuration (its fields follow it).
    """

    path: str
    type: str
    default: Any
    required: bool
    description: str
    section: bool


def _model_of(annotation: Any) -> type | None:
    """The pydantic model an annotation names, alone or as ``Model | None``; else None."""
    from pydantic import BaseModel

    candidates = [annotation]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        candidates = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    if len(candidates) == 1 and isinstance(candidates[0], type) and issubclass(candidates[0], BaseModel):
        return candidates[0]
    return None


def type_name(annotation: Any) -> str:
    """An annotation as a reader writes it: ``int``, ``float | None``, ``'sync' | 'async'``, ``list[str]``.

    Example:
        >>> from typing import Literal, Optional
        >>> type_name(Optional[int]), type_name(Literal["a", "b"]), type_name(dict[str, typing.Any])
        ('int | None', "'a' | 'b'", 'dict[str, any]')
    """
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin is typing.Literal:
        return " | ".join(repr(arg) for arg in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(arg) for arg in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(type_name(arg) for arg in args)}]"
    if annotation is type(None):
        return "None"
    if annotation is Ellipsis:  # tuple[str, ...]
        return "..."
    if annotation is typing.Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation))


def describe_fields(model: type, prefix: str = "") -> list[FieldDoc]:
    """Every field of ``model`` and of its sections, depth first, in declaration order.

    A section whose type is a configuration is followed by its own fields (also where its default is
    None, as for an optional section): the reference lists what can be set, not only what is set.
    """
    docs: list[FieldDoc] = []
    for name, field in model.model_fields.items():  # type: ignore[attr-defined]
        path = f"{prefix}{name}"
        section = _model_of(field.annotation)
        default = None if field.is_required() else field.get_default(call_default_factory=True)
        if section is not None and default is not None:
            default = None  # a section's default is its fields' defaults, listed below it
        description = " ".join((field.description or "").split())
        docs.append(
            FieldDoc(path, type_name(field.annotation), default, field.is_required(), description, section is not None)
        )
        if section is not None:
            docs.extend(describe_fields(section, prefix=f"{path}."))
    return docs


def _scalar(value: Any) -> str:
    """A value as one YAML flow expression on one line (``1.0e-05``, ``[a, b]``, ``{}``, ``null``, a quoted string)."""
    if isinstance(value, str) and "\n" in value:
        return json.dumps(value)  # a JSON string is a YAML double-quoted scalar, escapes and all
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 16, sort_keys=False).strip()
    return text.removesuffix("...").strip()


def _comment(text: str, indent: str) -> list[str]:
    return [f"{indent}# {line}" for line in textwrap.wrap(text, _COMMENT_WIDTH - len(indent) - 2)]


def commented_yaml(model: type, values: dict[str, Any], notes: dict[str, str] | None = None) -> str:
    """``values`` (a validated ``model``'s ``model_dump(mode="json")``) as YAML, each field's description above it.

    ``notes`` adds a sentence to the comment of a dotted path (e.g. that a value is an example).
    Loading the text with ``yaml.safe_load`` gives ``values`` back.
    """
    notes = notes or {}
    lines: list[str] = []

    def write(section_model: type, section_values: dict[str, Any], prefix: str, depth: int) -> None:
        indent = "  " * depth
        for name, field in section_model.model_fields.items():  # type: ignore[attr-defined]
            path = f"{prefix}{name}"
            description = " ".join((field.description or "").split())
            comment = " ".join(part for part in (description, notes.get(path, "")) if part)
            if comment:
                lines.extend(_comment(comment, indent))
            value = section_values.get(name)
            section = _model_of(field.annotation)
            if section is not None and isinstance(value, dict):
                lines.append(f"{indent}{name}:")
                write(section, value, f"{path}.", depth + 1)
            else:
                lines.append(f"{indent}{name}: {_scalar(value)}")

    write(model, values, "", 0)
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Text safe in a Markdown table cell: no column break, no HTML tag (``<tag>`` in a description)."""
    return text.replace("|", "\\|").replace("<", "\\<")


def markdown_reference(model: type, title: str, intro: str) -> str:
    """A page of every field of ``model``: one table per top-level section, path, type, default, meaning."""
    out = [f"# {title}", "", intro, ""]
    for doc in describe_fields(model):
        if "." not in doc.path:  # a top-level section starts a table
            out += [
                f"## `{doc.path}`",
                "",
                doc.description,
                "",
                "| key | type | default | what it does |",
                "|---|---|---|---|",
            ]
            continue
        default = "required" if doc.required else ("(section)" if doc.section else f"`{_scalar(doc.default)}`")
        out.append(f"| `{doc.path}` | {_cell(doc.type)} | {_cell(default)} | {_cell(doc.description)} |")
    for index in range(len(out) - 1, 0, -1):  # a blank line after each table
        if out[index].startswith("|") and (index + 1 == len(out) or out[index + 1].startswith("## ")):
            out.insert(index + 1, "")
    return "\n".join(out).rstrip() + "\n"
