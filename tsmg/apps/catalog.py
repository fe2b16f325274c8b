"""The game catalog as ``tsmg games`` prints it: the listing, each game's options, and docs/catalog.md.

A game's options are the fields of its :class:`~tsmg.core.GameConfig` (pydantic): name, type,
default, constraint (``Field(ge=1)`` as ``>= 1``) and description are read from the fields, so
``tsmg games --options ID``, its ``--json`` and the catalog page's option tables list exactly what
``-o KEY=VALUE`` accepts, and a field added to a config appears in all three without anyone
writing it twice. ``tests/test_catalog_page.py`` keeps docs/catalog.md equal to ``tsmg games
--markdown``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tsmg
from tsmg.config_reference import type_name
from tsmg.core import GameConfig
from tsmg.registry import make

__all__ = ["CATALOG_COMMAND", "catalog_markdown", "constraint_text", "game_listing", "game_options", "options_text"]


def game_listing() -> list[dict[str, Any]]:
    """One dict per registered game: id, num_agents, turn_based, description, defaults, config.

    ``defaults`` are the options the id registers; ``config`` names the class of its options as
    ``module:Class`` (``tsmg games --options ID`` lists them). A game that says whether its moves are
    open text (an ``open_text`` attribute: TextArena's negotiation, speech and unlisted-move games)
    has it as ``open_text``.
    """
    items = []
    for spec in tsmg.specs():
        item: dict[str, Any] = {"id": spec.id, "description": spec.description, "defaults": dict(spec.kwargs)}
        try:
            game = spec.make()
            item.update(num_agents=game.num_agents, turn_based=game.turn_based, agents=list(game.agents))
            config = getattr(game, "config", None)  # a Game written from scratch may keep no GameConfig
            if isinstance(config, GameConfig):
                item["config"] = f"{type(config).__module__}:{type(config).__qualname__}"
            open_text = getattr(game, "open_text", None)
            if isinstance(open_text, bool):
                item["open_text"] = open_text
        except ImportError as error:
            item.update(num_agents=None, turn_based=None, error=f"missing dependency: {error}")
        items.append(item)
    return items


#: The command that writes docs/catalog.md (tests/test_catalog_page.py compares the page with its output).
CATALOG_COMMAND = "python -m tsmg.apps.cli games --markdown > docs/catalog.md"


def catalog_markdown(items: Sequence[dict[str, Any]], refused: dict[str, str]) -> str:
    """The catalog page: one table per source of games (the id's namespace), then the refused games.

    Args:
        items: :func:`game_listing`'s entries.
        refused: What a user would type for each refused game, with the reason (:func:`tsmg.registry.refusals`).
    """
    by_source: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        namespace, _, name = item["id"].rpartition("/")
        by_source.setdefault(namespace, []).append(item)
    lines = [
        "# Game catalog",
        "",
        f"<!-- Generated from the registry by `{CATALOG_COMMAND}`; do not edit by hand. -->",
        "",
        f"Every registered id ({len(items)}), by source, as `tsmg games` lists them; play one with "
        "`tsmg play --game ID`, check it with `tsmg check --game ID`. Generated from the registry "
        f"(`{CATALOG_COMMAND}`); a test fails when this page and the registry disagree. "
        "[games.md](games.md) explains the catalog and [openspiel.md](openspiel.md) the OpenSpiel adapter. "
        "*Moves: open text* marks a game whose moves are not all listed (free speech, offers, moves shown only by "
        "example): any answer goes to the game ([textarena.md](textarena.md)). *Options* links to the table of "
        "what `-o KEY=VALUE` sets for that id, with the values the id registers over the table's defaults "
        "(`tsmg games --options ID` prints one id's options with its own defaults).",
    ]
    for namespace in sorted(by_source, key=lambda name: (name != "", name.lower())):
        listed = by_source[namespace]
        title = namespace or "tsmg's own games"
        lines += ["", f"## {title} ({len(listed)})", "", "| id | agents | turns | description | options |"]
        lines.append("|---|---|---|---|---|")
        for item in listed:
            turns = {True: "turn-based", False: "simultaneous", None: "?"}[item["turn_based"]]
            agents = item["num_agents"] if item["num_agents"] is not None else "?"
            description = (item["description"] or "") + (f" ({item['error']})" if "error" in item else "")
            description += " Moves: open text." if item.get("open_text") else ""
            lines.append(f"| `{item['id']}` | {agents} | {turns} | {_cell(description)} | {_options_cell(item)} |")
    if refused:
        lines += [
            "",
            f"## Refused ({len(refused)})",
            "",
            "Offered by a library tsmg adapts, and refused by name with the reason (`tsmg play` says the same).",
            "",
            "| game | why tsmg refuses it |",
            "|---|---|",
        ]
        lines += [f"| `{name}` | {_cell(reason)} |" for name, reason in refused.items()]
    lines += _option_tables(items)
    return "\n".join(lines) + "\n"


def _options_cell(item: dict[str, Any]) -> str:
    """The options column of an id's row: a link to its config's table, then what the id registers."""
    if "config" not in item:
        return ""
    name = _config_name(item["config"])
    values = ", ".join(f"{key}={_value(value)}" for key, value in item["defaults"].items())
    return _cell(f"[{name}](#{name.lower()})" + (f": {values}" if values else ""))


def _config_name(reference: str) -> str:
    """A config class's heading on the page: its class name (``games.frozen_lake:FrozenLakeConfig`` -> the name)."""
    return reference.rpartition(":")[2].rpartition(".")[2]


def _option_tables(items: Sequence[dict[str, Any]]) -> list[str]:
    """The options section: every game's options once, then each config class's own, with the ids that use it."""
    from tsmg import loading

    users: dict[str, list[str]] = {}
    for item in items:
        if "config" in item:
            users.setdefault(item["config"], []).append(item["id"])
    names = [_config_name(reference) for reference in users]
    if len(set(names)) != len(names):  # two classes of one name would share an anchor; say which, never merge
        raise ValueError(f"two game config classes share a name: {sorted(users)}")
    common = f"{GameConfig.__module__}:{GameConfig.__qualname__}"
    lines = [
        "",
        f"## Options ({len(users | {common: []})} configs)",
        "",
        "What `-o KEY=VALUE` sets (`--set rollout.game_options.KEY=VALUE` in training), read from each config's "
        "fields: type, the class's default (the values an id registers, in its row, win), bounds, meaning.",
    ]
    header = ["", "| option | type | default | bounds | what it does |", "|---|---|---|---|---|"]
    for reference in [common, *sorted(set(users) - {common}, key=lambda name: _config_name(name).lower())]:
        config = loading.load(reference)
        own = [option for option in _describe(config, None) if option["every_game"] == (reference == common)]
        text = f"`{reference}`: every game takes these options. " if reference == common else f"`{reference}`. "
        if users.get(reference):
            ids = users[reference]
            more = f" and {len(ids) - 6} more" if len(ids) > 6 else ""
            text += f"Ids with {'only these' if reference == common else 'it'}: "
            text += ", ".join(f"`{game_id}`" for game_id in ids[:6]) + more + "."
        lines += ["", f"### {_config_name(reference)}", "", text.strip(), *header]
        lines += [_option_row(option) for option in own]
    return lines


def _option_row(option: dict[str, Any]) -> str:
    default = "required" if option["required"] else f"`{_value(option['default'])}`"
    cells = (f"`{option['name']}`", option["type"], default, option["constraint"])
    return "| " + " | ".join(_cell(cell) for cell in (*cells, option["description"])) + " |"


def _cell(text: str) -> str:
    """``text`` inside a Markdown table cell (one line, its pipes escaped)."""
    return " ".join(text.split()).replace("|", "\\|")


def constraint_text(field: Any) -> str:
    """The bounds a pydantic field declares (``Field(ge=1, le=9)``) as a reader writes them: ``>= 1, <= 9``.

    Example:
        >>> fields = GameConfig.model_fields
        >>> constraint_text(fields["max_steps"]), constraint_text(fields["on_invalid"])
        ('>= 1', '')
    """
    symbols = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "multiple_of": "a multiple of"}
    lengths = {"min_length": "length >=", "max_length": "length <="}
    parts = []
    for item in field.metadata:
        for attribute, word in {**symbols, **lengths, "pattern": "matches"}.items():
            value = getattr(item, attribute, None)
            if value is not None:
                parts.append(f"{word} {value}")
    return ", ".join(parts)


def game_options(game_id: str) -> list[dict[str, Any]]:
    """Every option of the game ``game_id``, from its config's fields: what ``-o KEY=VALUE`` accepts.

    Each entry: ``name``, ``type``, ``default`` (this id's value: the registered options laid over the
    config's defaults, as ``tsmg.make(game_id)`` builds it), ``constraint``, ``description``,
    ``every_game`` (an option of :class:`~tsmg.core.GameConfig`, which every game takes) and
    ``required`` (the config has no default for it: the id registers its value). The game's own
    options come first.

    A game that keeps no :class:`~tsmg.core.GameConfig` (one written from scratch on the ``Game``
    protocol) lists none.

    Raises:
        UnknownGameError: ``game_id`` is not registered (the message suggests close ids).
    """
    config = getattr(make(game_id), "config", None)
    if not isinstance(config, GameConfig):  # a Game written from scratch, not on tsmg's game classes
        return []
    return _describe(type(config), config.model_dump(mode="json"))


def _describe(config: type[GameConfig], values: dict[str, Any] | None) -> list[dict[str, Any]]:
    """:func:`game_options`'s entries for a config class, with ``values`` as defaults (None: the class's own)."""
    options = []
    for name, field in config.model_fields.items():
        if values is not None:
            default = values[name]
        else:
            default = None if field.is_required() else field.get_default(call_default_factory=True)
        options.append(
            {
                "name": name,
                "type": type_name(field.annotation),
                "default": default,
                "constraint": constraint_text(field),
                "description": " ".join((field.description or "").split()),
                "every_game": name in GameConfig.model_fields,
                "required": field.is_required(),
            }
        )
    return sorted(options, key=lambda option: option["every_game"])  # stable: declaration order within each


def options_text(game_id: str) -> str:
    """``tsmg games --options ID``: each option's name, type, this id's default and bounds; its description below."""
    import textwrap

    options = game_options(game_id)
    lines = textwrap.wrap(
        f"{game_id}: the defaults are this id's; set an option with -o KEY=VALUE (tsmg play, eval, rollout) or "
        "--set rollout.game_options.KEY=VALUE (tsmg train); a value is read as YAML (null, true, 4x4, [a, b]).",
        104,
    )
    for every_game in (False, True):
        chosen = [option for option in options if option["every_game"] == every_game]
        lines += ["", "options every game takes:" if every_game else "this game's options:"]
        if not chosen:
            lines.append("  (none)")
        for option in chosen:
            bound = f"  ({option['constraint']})" if option["constraint"] else ""
            lines.append(f"  {option['name']}: {option['type']} = {_value(option['default'])}{bound}")
            lines += textwrap.wrap(option["description"], 100, initial_indent="      ", subsequent_indent="      ")
    return "\n".join(lines)


def _value(value: Any) -> str:
    """An option's value as ``-o KEY=VALUE`` reads it (YAML): ``null``, ``true``, ``4x4``, ``[a, b]``."""
    import yaml

    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 16).strip()
    return text.removesuffix("...").strip()
