"""``KEY=VALUE`` assignments as typed on command lines (game options, model options, config fields).

Values are read as YAML scalars, so ``max_steps=20`` gives an int, ``on_invalid=penalize`` a
string, ``stop=[a, b]`` a list and ``x=null`` None. :func:`validation_problems` says, in the
same terms, what is wrong with the settings a config was built from.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, get_args

import yaml

if TYPE_CHECKING:
    from pydantic import ValidationError


def parse_assignment(text: str, what: str = "option") -> tuple[str, Any]:
    """Split ``KEY=VALUE`` at the first ``=``; the value read as YAML.

    Raises:
        ValueError: No ``=``, or nothing before it; the message names ``what`` was being read.

    Example:
        >>> parse_assignment("max_steps=20"), parse_assignment("url=http://h:1/v1?a=b")
        (('max_steps', 20), ('url', 'http://h:1/v1?a=b'))
    """
    key, separator, raw = text.partition("=")
    if not separator or not key.strip():
        raise ValueError(f"{what} must be KEY=VALUE, got {text!r}")
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError as error:
        raise ValueError(f"{what} {text!r}: the value is not readable ({str(error).splitlines()[0]})") from None
    return key.strip(), value


def parse_assignments(texts: Iterable[str], what: str = "option") -> dict[str, Any]:
    """Every ``KEY=VALUE`` of ``texts`` as a dict (a later key wins)."""
    return dict(parse_assignment(text, what) for text in texts)


def parse_model_option(text: str) -> tuple[str, str, Any]:
    """``MODEL:KEY=VALUE`` as ``(model, key, value)``; MODEL may hold colons (``openai:NAME``).

    Raises:
        ValueError: The text has no ``=`` or no ``:`` before the key.

    Example:
        >>> parse_model_option("openai:m:base_url=http://127.0.0.1:8000/v1")
        ('openai:m', 'base_url', 'http://127.0.0.1:8000/v1')
    """
    target, _, _ = text.partition("=")
    model, colon, _ = target.rpartition(":")
    if not (colon and model):
        raise ValueError(f"--model-option must be MODEL:KEY=VALUE, got {text!r}")
    key, value = parse_assignment(text[len(model) + 1 :], "--model-option")
    return model, key, value


def assign_config_field(data: dict[str, Any], assignment: str) -> None:
    """Set ``SECTION.FIELD=VALUE`` (``--set``) in the nested mapping a config is read from.

    Raises:
        ValueError: Not ``SECTION.FIELD=VALUE``, or a name on the path is a value, not a section.

    Example:
        >>> data = {"optim": {"lr": 0.1}}
        >>> assign_config_field(data, "optim.lr=0.001"); assign_config_field(data, "rollout.group_size=4"); data
        {'optim': {'lr': 0.001}, 'rollout': {'group_size': 4}}
    """
    path, value = parse_assignment(assignment, "--set SECTION.FIELD=VALUE (e.g. optim.lr=1e-4)")
    keys = [key.strip() for key in path.split(".") if key.strip()]
    if len(keys) < 2:
        raise ValueError(f"--set takes SECTION.FIELD=VALUE (e.g. optim.lr=1e-4), got {assignment!r}")
    node = data
    for key in keys[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise ValueError(f"--set {assignment!r}: {key} is not a section")
        node = child
    node[keys[-1]] = value


def validation_problems(error: ValidationError, schema: type | None = None) -> str:
    """A pydantic error's problems as ``field: problem`` pairs (no field for a whole-model check), joined by ``;``.

    With the ``schema`` (the pydantic model the input was validated against), an unknown key is said
    in words, with the nearest valid key when one is close: ``unknown key 'group_sise' in section
    rollout; did you mean 'group_size'?``.
    """
    problems = []
    for item in error.errors():
        if item["type"] == "extra_forbidden" and schema is not None:
            problems.append(unknown_key(schema, [str(part) for part in item["loc"]]))
            continue
        field = ".".join(str(part) for part in item["loc"])
        message = str(item["msg"]).removeprefix("Value error, ")
        problems.append(f"{field}: {message}" if field else message)
    return "; ".join(problems)


def unknown_key(schema: type, path: list[str]) -> str:
    """Say that the last key of ``path`` is none of its section's keys, naming the nearest one when one is close.

    ``schema`` is the pydantic model at the top; the keys before the last lead through its
    sub-models (``["rollout", "tree", "root"]``: the key ``root`` in section ``rollout.tree``).

    Example:
        >>> from pydantic import create_model
        >>> Rollout = create_model("Rollout", group_size=(int, 8), groups_per_update=(int, 8))
        >>> Config = create_model("Config", rollout=(Rollout, ...))
        >>> unknown_key(Config, ["rollout", "group_sise"])
        "unknown key 'group_sise' in section rollout; did you mean 'group_size'?"
        >>> unknown_key(Config, ["rolout"])
        "unknown section 'rolout'; did you mean 'rollout'?"
        >>> unknown_key(Config, ["rollout", "seed"])
        "unknown key 'seed' in section rollout; its keys are: group_size, groups_per_update"
    """
    import difflib

    *sections, key = path
    model: type | None = schema
    for name in sections:
        model = _sub_model(model, name)
    what = f"key {key!r} in section {'.'.join(sections)}" if sections else f"section {key!r}"
    if model is None:
        return f"unknown {what}"
    keys = list(getattr(model, "model_fields", {}))
    close = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
    if close:
        return f"unknown {what}; did you mean {close[0]!r}?"
    return f"unknown {what}; its keys are: {', '.join(keys)}"


def _sub_model(model: type | None, name: str) -> type | None:
    """The pydantic model the field ``name`` of ``model`` holds (through ``X | None``), or None."""
    field = getattr(model, "model_fields", {}).get(name)
    if field is None:
        return None
    candidates = [field.annotation]
    while candidates:
        annotation = candidates.pop()
        if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
            return annotation
        candidates.extend(get_args(annotation))
    return None
