"""The kernel's registries that the layers above fill: namespaces of game ids and kinds of players (issue 39)."""

from __future__ import annotations

import pytest

import tsmg
from games.frozen_lake import FrozenLake
from tsmg import loading, policies, registry
from tsmg.model_spec import ModelSpecError


def test_the_source_trees_entry_points_are_read_when_the_installed_metadata_is_older():
    # The venv's editable install was made from another checkout; this tree's pyproject.toml is what runs.
    names = {entry.name: entry.reference for entry in loading.plugin_entries(registry.NAMESPACE_GROUP)}
    assert names["openspiel"] == "tsmg.adapters.openspiel:openspiel_spec"
    assert {"http", "https", "ws", "wss", "textarena"} <= set(names)
    groups = (policies.PLAYER_GROUP, policies.MODEL_GROUP)
    kinds = {entry.name for group in groups for entry in loading.plugin_entries(group)}
    assert {"openspiel-mcts", "openspiel-br", "hf", "smollm2", "openai", "vllm"} <= kinds


def test_a_namespace_registered_in_code_makes_its_ids():
    made = []

    def loader(id: str) -> registry.GameSpec:
        made.append(id)
        return registry.GameSpec(id=id, entry_point=FrozenLake, kwargs={"map_name": "4x4"})

    registry.register_namespace("test39:", loader)
    try:
        assert registry.namespace_of("test39:anything") == "test39:"
        game = tsmg.make("test39:anything")
        assert isinstance(game, FrozenLake) and game.game_id == "test39:anything" and made == ["test39:anything"]
        assert registry.namespace_of("FrozenLake-v0") is None
    finally:
        registry._namespaces.pop("test39:")


def test_a_namespace_whose_library_is_missing_says_so_in_one_sentence():
    def loader(id: str) -> registry.GameSpec:
        raise ModuleNotFoundError("No module named 'tsmg_no_such_lib'", name="tsmg_no_such_lib")

    registry.register_namespace("openspiel-test39:", loader)
    try:
        with pytest.raises(registry.GameModuleError, match="needs tsmg_no_such_lib, and it is not installed"):
            tsmg.make("openspiel-test39:x")
    finally:
        registry._namespaces.pop("openspiel-test39:")


def test_urls_are_the_remote_namespace():
    # The scheme is the namespace: the registry reaches the client of a served game only through the entry point.
    assert registry.namespace_of("http://127.0.0.1:1/FrozenLake-v0") == "http:"
    assert registry.namespace_of("https://x/y") == "https:"
    with pytest.raises(registry.UnknownGameError):
        tsmg.make("http://127.0.0.1:9/FrozenLake-v0")  # nothing serves there: the client says so


def test_kinds_of_players_come_from_their_registries(monkeypatch):
    assert policies._registered("hf") is not None  # the entry points read first, so that monkeypatch restores them
    made = []
    monkeypatch.setitem(policies._player_kinds, "openspiel-mcts", lambda seed, options: made.append((seed, options)))
    policies.policy_from_spec("openspiel-mcts", seed=3, model_options={"simulations": 2})
    assert made == [(3, {"simulations": 2})]
    monkeypatch.setitem(policies._model_kinds, "openai", "tsmg_no_such_backend:load")
    with pytest.raises(ModuleNotFoundError):  # a broken registration is not dressed as a missing library
        policies.policy_from_spec("openai:m")
    with pytest.raises(ModelSpecError, match="is a language model"):
        policies.policy_from_spec("hf:x", scripted_only=True)
