"""docs/catalog.md is the registry's listing (``tsmg games --markdown``), refused games apart with the reason."""

import json
import subprocess
import sys
from pathlib import Path

import tsmg
from tsmg.apps.catalog import CATALOG_COMMAND, catalog_markdown, game_listing
from tsmg.registry import refusals, register, register_refusals, unregister

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "catalog.md"

#: A refusal source of this module, as a library's registration module names its own.
REFUSED_HERE = {"demo:unplayable": "it needs the network at run time"}


def test_the_catalog_page_is_what_the_registry_lists():
    """In a fresh process, so that games the tests register never reach the page."""
    printed = subprocess.run(
        [sys.executable, "-m", "tsmg.apps.cli", "games", "--markdown"],
        capture_output=True, text=True, check=True, cwd=ROOT, timeout=120,
    ).stdout  # fmt: skip
    assert PAGE.read_text(encoding="utf-8") == printed, (
        f"docs/catalog.md and the registry disagree: regenerate the page with `{CATALOG_COMMAND}`"
    )


def test_every_registered_id_has_a_row_and_every_refusal_its_reason():
    """The ids a fresh process registers: games that other tests register in this process are not the catalog's."""
    page = PAGE.read_text(encoding="utf-8")
    listing = subprocess.run(
        [sys.executable, "-m", "tsmg.apps.cli", "games", "--json"],
        capture_output=True, text=True, check=True, cwd=ROOT, timeout=120,
    ).stdout  # fmt: skip
    ids = [game["id"] for game in json.loads(listing)]
    assert len(ids) >= 134 and all(f"| `{game_id}` |" in page for game_id in ids)
    refused = page.split("## Refused", 1)[1].split("## Options", 1)[0]
    assert "| `openspiel:crossword` | it has no discrete actions to name" in refused
    assert "| `openspiel:mfg_garnet` | it is a mean-field game" in refused
    assert "`OpenSpiel/" not in refused


def test_a_new_game_or_refusal_changes_the_page():
    """The page follows the registry: a game registered by anyone gets a row under its namespace."""
    register("Elsewhere/Catalog-Demo-v0", "games.frozen_lake:FrozenLake", description="a | piped description")
    register_refusals(f"{__name__}:REFUSED_HERE")
    try:
        after = catalog_markdown(game_listing(), refusals())
    finally:
        unregister("Elsewhere/Catalog-Demo-v0")
        tsmg.registry._refusal_sources.remove(f"{__name__}:REFUSED_HERE")
    assert "## Elsewhere (1)\n\n| id | agents | turns | description | options |\n|---|---|---|---|---|\n" in after
    assert (
        "| `Elsewhere/Catalog-Demo-v0` | 1 | turn-based | a \\| piped description "
        "| [FrozenLakeConfig](#frozenlakeconfig) |" in after
    )
    assert "| `demo:unplayable` | it needs the network at run time |" in after


def test_every_option_of_every_config_has_a_row_and_every_id_links_to_its_table():
    """The options section lists each config's fields (a field added to a config gets a row), and each id its table."""
    from tsmg.apps.catalog import _config_name
    from tsmg.core import GameConfig
    from tsmg.loading import load

    page = PAGE.read_text(encoding="utf-8")
    options = page.split("## Options", 1)[1]
    items = [item for item in game_listing() if "config" in item]
    for reference in {item["config"] for item in items} | {"tsmg.core:GameConfig"}:
        name = _config_name(reference)
        table = options.split(f"\n### {name}\n", 1)[1].split("\n### ", 1)[0]
        own = [
            field
            for field in load(reference).model_fields
            if (field in GameConfig.model_fields) == (name == "GameConfig")
        ]
        assert own and all(f"| `{field}` |" in table for field in own), name
    for item in items:
        assert f"| `{item['id']}` |" in page and f"[{_config_name(item['config'])}](#" in page
    assert "| `size` | int | `4` | >= 2, <= 16 | Side of random maps. |" in options  # FrozenLakeConfig, bounds and all
    assert "| `env` | str | required |" in options  # TextArenaConfig: no default, each id registers its env
    # an id's registered values sit in its row
    assert "[FrozenLakeConfig](#frozenlakeconfig): map_name=4x4, max_steps=16 |" in page


def test_games_options_lists_what_make_takes_with_the_ids_values(capsys):
    """`tsmg games --options ID --json`: every config field, this id's value as default, which builds the same game.

    Over every id of tsmg's own games (and one OpenSpiel id where pyspiel is installed); mutations this catches: a
    field left out or listed twice, the class default shown where the id registers another, a default that
    `-o KEY=VALUE` would not take back.
    """
    from tsmg.apps.cli import main
    from tsmg.registry import make

    ids = [spec.id for spec in tsmg.specs() if "/" not in spec.id]
    try:
        import pyspiel  # noqa: F401

        ids.append("openspiel:goofspiel")
    except ImportError:
        pass
    assert len(ids) >= 30
    for game_id in ids:
        assert main(["games", "--options", game_id, "--json"]) == 0
        listed = json.loads(capsys.readouterr().out)
        config = make(game_id).config
        names = [option["name"] for option in listed["options"]]
        assert listed["id"] == game_id and sorted(names) == sorted(type(config).model_fields), game_id
        values = {option["name"]: option["default"] for option in listed["options"]}
        assert values == config.model_dump(mode="json"), game_id
        assert make(game_id, **values).config == config, game_id


def test_games_options_text_and_an_unknown_id(capsys):
    from tsmg.apps.cli import main

    assert main(["games", "--options", "FrozenLake-NoSlip-v0"]) == 0
    text = capsys.readouterr().out
    assert "this game's options:\n  map_name: '4x4' | '8x8' | 'random' = random\n" in text
    assert "  size: int = 4  (>= 2, <= 16)\n      Side of random maps.\n" in text
    assert (
        "options every game takes:\n  max_steps: int | None = 8  (>= 1)\n" in text
    )  # the id's 8, not the class's None
    assert main(["games", "--options", "CliffWalking-v0"]) == 0
    assert "this game's options:\n  (none)\n" in capsys.readouterr().out
    assert main(["games", "--options", "FrozenLak-v0"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: no game registered as 'FrozenLak-v0'. Did you mean: FrozenLake-v0?")
    assert error.count("\n") == 1
