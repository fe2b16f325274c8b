"""The argument parser every ``tsmg`` command is built with: help conventions and deprecated aliases.

One home for what all sub-commands share, whichever package registers them (evaluation, serve,
view, training): :class:`Parser` raises :class:`UsageError` instead of exiting, formats help with
:class:`HelpFormatter` (descriptions and examples as written, each option's default stated), and
resolves the deprecated spellings a command still accepts (the positional game, ``rollout
--policy``) into the current ones, so that both parse to the same namespace. It imports nothing
but the standard library: every layer that registers a command may use it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

#: The attribute :func:`document_default` sets on an action whose default lives elsewhere.
_DEFAULT_TEXT = "tsmg_default_text"


class UsageError(Exception):
    """A command line argparse cannot read (unknown option, missing argument, bad value)."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and examples as written; each option's help ends with its default.

    An option whose help already says its default is left alone; so are switches (their help says
    what they switch), required options and help without a default to state (``None``: the help
    must say what happens without the option). A repeatable option's empty list reads "none"; a
    default that only a config file knows is named by :func:`document_default`.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        help_text = action.help or ""
        if not action.option_strings or states_default(help_text):
            return action.help
        describe: Callable[[], object] | None = getattr(action, _DEFAULT_TEXT, None)
        if describe is not None:
            return _with_default(help_text, str(describe()).replace("%", "%%"))
        if action.nargs == 0 or action.required or action.default in (None, argparse.SUPPRESS):
            return action.help
        return _with_default(help_text, "none" if action.default == [] else "%(default)s")


def _with_default(help_text: str, default: str) -> str:
    """``help_text`` ending with its default, inside its closing parenthesis if it has one."""
    if help_text.endswith(")"):
        return f"{help_text[:-1]}; default: {default})"
    return f"{help_text} (default: {default})"


def states_default(help_text: str) -> bool:
    """Whether an option's help already says its default ("(default: …)", "…; default: …", "all (default)")."""
    text = help_text.lower()
    return "(default" in text or "default:" in text


def document_default(action: argparse.Action, describe: Callable[[], object]) -> argparse.Action:
    """Have ``--help`` state ``describe()`` as the default of ``action`` (computed only when help is shown).

    For options whose parsed default must stay ``None`` (a flag that overrides a config file only
    when given) while the effective default lives in a config model that is costly to import.
    """
    setattr(action, _DEFAULT_TEXT, describe)
    return action


@dataclass(frozen=True)
class _Alias:
    """A deprecated spelling (``old_dest``) of the option stored at ``dest``."""

    old_dest: str
    old_name: str
    dest: str
    name: str
    required: bool
    default: Any


class Parser(argparse.ArgumentParser):
    """argparse with the project's help format, one-sentence usage errors and deprecated aliases."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Build the parser; ``formatter_class`` defaults to :class:`HelpFormatter`."""
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self._aliases: list[_Alias] = []

    def error(self, message: str) -> NoReturn:
        """Raise the problem as one sentence that points at ``--help``."""
        raise UsageError(f"{message} (see: {self.prog} --help)")

    def add_alias(
        self, old: argparse.Action, new: argparse.Action, *, required: bool = False, default: Any = None
    ) -> None:
        """Accept ``old`` as a deprecated spelling of ``new``.

        Both actions must parse to ``None`` (or an empty list) when not given. After parsing, a
        value given the old way moves to ``new``'s destination; giving both, or neither when
        ``required``, is a usage error; neither leaves ``default``.
        """
        self._aliases.append(
            _Alias(old.dest, _spelling(old), new.dest, _spelling(new), required=required, default=default)
        )

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse, then fold each deprecated spelling into the current one (see :meth:`add_alias`)."""
        parsed, extras = super().parse_known_args(args, namespace)
        for alias in self._aliases:
            old = getattr(parsed, alias.old_dest, None)
            new = getattr(parsed, alias.dest, None)
            if hasattr(parsed, alias.old_dest):
                delattr(parsed, alias.old_dest)
            if old not in (None, []) and new not in (None, []):
                self.error(
                    f"{alias.name} and the deprecated {alias.old_name} say the same thing: give only {alias.name}"
                )
            if old not in (None, []):
                setattr(parsed, alias.dest, old)
            elif new in (None, []):
                if alias.required:
                    self.error(f"the following arguments are required: {alias.name}")
                setattr(parsed, alias.dest, alias.default)
        return parsed, extras


def _spelling(action: argparse.Action) -> str:
    """How the user writes ``action``: its long option, or a positional's metavar."""
    if action.option_strings:
        return action.option_strings[-1]
    return f"positional {action.metavar or action.dest.upper()}"


def add_game_option(parser: Parser, *, several: bool = False, required: bool = True, help: str | None = None) -> None:
    """``--game ID`` (repeatable when ``several``), with the positional game kept as a deprecated alias.

    Args:
        parser: The sub-command's parser.
        several: The command takes a list of games (``args.game`` is then a list).
        required: Giving no game is a usage error (else ``args.game`` is ``None`` or ``[]``).
        help: What the game is for (default: "registered game id"); whether it repeats and is
            required is added.
    """
    notes = (["repeatable"] if several else []) + ["required" if required else "default: none"]
    # Not required by argparse itself: that is checked after parsing, where the positional counts too.
    new = parser.add_argument(
        "--game",
        action="append" if several else "store",
        metavar="ID",
        help=f"{help or 'registered game id'} ({'; '.join(notes)})",
    )
    old = parser.add_argument(
        "deprecated_game",
        nargs="*" if several else "?",
        metavar="GAME",
        help="deprecated: the game id" + ("s" if several else "") + " as a positional argument; use --game ID",
    )
    parser.add_alias(old, new, required=required, default=[] if several else None)


def at_least_one(text: str) -> int:
    """An argparse ``type``: a whole number of at least 1 (``--episodes 0`` or ``-3`` is refused, naming the flag)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def examples(*lines: str) -> str:
    """An ``epilog`` of example command lines (each a ``tsmg …`` line, or a ``#`` comment above one)."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def config_default(config_class: Any, path: str) -> object:
    """The default of the field at dotted ``path`` of a pydantic config class, as ``--help`` states it.

    A field without one (a required section's required field) reads as "none, give it or --config".
    """
    from pydantic import BaseModel

    node: Any = config_class
    for key in path.split("."):
        if not (isinstance(node, type) and issubclass(node, BaseModel)):
            node = getattr(node, key)  # inside a section's default value
            continue
        field = node.model_fields[key]
        if not field.is_required():
            node = field.get_default(call_default_factory=True)
        elif isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            node = field.annotation  # a required section: its own fields have defaults
        else:
            return "none, give it or --config"
    return node
