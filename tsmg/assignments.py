"""``KEY=VALUE`` assignments as typed on command lines (game options, model options, config fields).

Values are read as YAML scalars, so ``max_steps=20`` gives an int, ``on_invalid=penalize`` a
string, ``stop=[a, b]`` a list and ``x=null`` None. :func:`validation_problems` says, in the
same terms, what is wrong with the settings a config was built from.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

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


def validation_problems(error: ValidationError) -> str:
    """A pydantic error's problems as ``field: problem`` pairs (no field for a whole-model check), joined by ``;``."""
    problems = []
    for item in error.errors():
        field = ".".join(str(part) for part in item["loc"])
        message = str(item["msg"]).removeprefix("Value error, ")
        problems.append(f"{field}: {message}" if field else message)
    return "; ".join(problems)
