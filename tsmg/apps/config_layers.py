"""A configuration built in layers, as ``tsmg train`` and ``tsmg sft`` build theirs: file, flags, ``--set``.

The one home of the layering rule: the YAML file (``--config``; with ``--resume`` and no file, the
run folder's own ``config.yaml``), then the flags given (each sets one field, :data:`FieldFlag`),
then ``--out``, then ``--set SECTION.FIELD=VALUE`` overrides (values read as YAML). A command adds
what only it has (``--episodes`` for sft, the deprecated ``--self-play`` for train) between the flags and ``--out``
through ``extra``; :func:`validated` checks the whole in one sentence before any model loads.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from tsmg.apps.cli_parser import config_default, document_default
from tsmg.assignments import assign_config_field, validation_problems
from tsmg.run_folder import CONFIG_FILE

__all__ = ["FieldFlag", "add_field_flags", "layered_data", "validated"]

#: A flag that sets one configuration field: (flag, section, field, type, help).
FieldFlag = tuple[str, str, str, type, str]


def add_field_flags(
    parser: argparse.ArgumentParser,
    flags: Sequence[FieldFlag],
    config_class: Callable[[], type],
    metavars: dict[str, str] | None = None,
) -> None:
    """Add each flag of ``flags``, its help stating the config's default (``config_class`` is loaded on ``--help``)."""
    for flag, section, name, kind, text in flags:
        document_default(
            parser.add_argument(flag, type=kind, metavar=(metavars or {}).get(flag), help=text),
            partial(_default_of, config_class, f"{section}.{name}"),
        )


def _default_of(config_class: Callable[[], type], path: str) -> object:
    return config_default(config_class(), path)


def layered_data(
    args: argparse.Namespace,
    flags: Sequence[FieldFlag],
    what: str,
    extra: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """The layers merged into one mapping of sections, not yet validated.

    ``args`` carries ``config``, ``resume``, ``out`` and ``set`` besides the ``flags``; ``what`` names the
    configuration in errors ("a training config"); ``extra`` adds a command's own flags to the mapping.

    Raises:
        ValueError: The file is not a mapping, ``--resume`` without a run to resume, or a ``--set`` is
            malformed or its value is not YAML.
    """
    data: dict[str, Any] = {}
    source = args.config
    if source is None and args.resume:  # the run folder's own configuration
        if args.out is None:
            raise ValueError("--resume continues the run in --out RUN_FOLDER: add --out")
        if (args.out / CONFIG_FILE).is_file():
            source = args.out / CONFIG_FILE
    if source is not None:
        loaded = yaml.safe_load(Path(source).read_text(encoding="utf-8"))
        if not isinstance(loaded, dict):
            raise ValueError(f"{source}: {what} is a YAML mapping of sections")
        data = loaded
    for flag, section, name, _, _ in flags:
        value = getattr(args, flag.lstrip("-").replace("-", "_"))
        if value is not None:
            data.setdefault(section, {})[name] = value
    if extra is not None:
        extra(data)
    if args.resume and source is None and not data and not args.set:  # nothing says what to train: no run to resume
        raise ValueError(
            f"--resume: no run is at {args.out} (no {CONFIG_FILE} there); give the --out folder of the run to "
            "continue, or drop --resume to start a new one"
        )
    if args.out is not None:
        data.setdefault("run", {})["out_dir"] = str(args.out)
    for assignment in args.set:
        assign_config_field(data, assignment)  # a value that is not YAML is a ValueError already
    return data


def validated(config_class: type, data: dict[str, Any], what: str) -> Any:
    """``config_class`` built from ``data``, or a ValueError naming every problem ("invalid {what}: field: …")."""
    from pydantic import ValidationError

    try:
        return config_class.model_validate(data)  # type: ignore[attr-defined]
    except ValidationError as error:
        raise ValueError(f"invalid {what}: {validation_problems(error, config_class)}") from None
