"""docs/catalog.md is the registry's listing (``tsmg games --markdown``), refused games apart with the reason."""

import json
import subprocess
import sys
from pathlib import Path

import tsmg
from tsmg.apps.cli import CATALOG_COMMAND, catalog_markdown, game_listing
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
    refused = page.split("## Refused", 1)[1]
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
    assert "## Elsewhere (1)\n\n| id | agents | turns | description |\n|---|---|---|---|\n" in after
    assert "| `Elsewhere/Catalog-Demo-v0` | 1 | turn-based | a \\| piped description |" in after
    assert "| `demo:unplayable` | it needs the network at run time |" in after
