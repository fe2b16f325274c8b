"""The text layer of adapted OpenSpiel games (tsmg.adapters.openspiel_views): readable, listed once, faithful.

Mutations that fail these tests: Leduc's view without its betting rounds (936 information
states give 576 prompts, as the raw view does); Kuhn's card read from the other seat's deal
(a seat's two information states merge, another splits); the LAP listing moves whatever the game
says (each move twice in the user turn); ``raw`` reformatted (its exact text changes); a golden
prompt edited.
"""

import os
import time
from pathlib import Path

import numpy as np
import pytest

import tsmg
from tsmg.adapters import openspiel_views
from tsmg.adapters.openspiel_infostates import sweep
from tsmg.decisions import DecisionRequest
from tsmg.lap import LAP, LAPConfig

pyspiel = pytest.importorskip("pyspiel")

SNAPSHOTS = Path(__file__).parent / "data" / "openspiel_views"
#: The hand-written views whose prompts are pinned, with the OpenSpiel game string they are made with.
GOLDEN = {
    "kuhn_poker": "OpenSpiel/kuhn_poker-v0",
    "leduc_poker": "OpenSpiel/leduc_poker-v0",
    "liars_dice": "OpenSpiel/liars_dice-v0",
    "goofspiel": "openspiel:goofspiel(num_cards=4)",
    "phantom_ttt": "OpenSpiel/phantom_ttt-v0",
    "dark_hex": "OpenSpiel/dark_hex-v0",
    "first_sealed_auction": "OpenSpiel/first_sealed_auction-v0",
    "blotto": "OpenSpiel/blotto-v0",
    "tic_tac_toe": "OpenSpiel/tic_tac_toe-v0",
    "connect_four": "OpenSpiel/connect_four-v0",
    "nim": "OpenSpiel/nim-v0",
    "dots_and_boxes": "OpenSpiel/dots_and_boxes-v0",
    "einstein_wurfelt_nicht": "OpenSpiel/einstein_wurfelt_nicht-v0",
    "pig": "openspiel:pig(winscore=20)",
    "bargaining": "OpenSpiel/bargaining-v0",
    "oh_hell": "OpenSpiel/oh_hell-v0",
    "clobber": "OpenSpiel/clobber-v0",
    "catch": "OpenSpiel/catch-v0",
}
#: Histories each two-player game's sweep visits in `make test` (depth first: one deal's subtree, deep lines).
CAPPED_HISTORIES = 60


def _user_turn(game, agent):
    request = DecisionRequest(game, agent, game.observe(agent), game.legal_actions(agent))
    [message] = [m["content"] for m in LAP(None, LAPConfig()).messages(request) if m["role"] == "user"]  # type: ignore[arg-type]
    return message


def test_raw_is_the_first_text_byte_for_byte():
    game = tsmg.make("OpenSpiel/kuhn_poker-v0", view="raw")
    observations, _ = game.reset(seed=0)
    first = "OpenSpiel game kuhn_poker. You are player_0 (2 players).\n111\nYour legal moves: Pass, Bet."
    assert observations["player_0"] == first
    assert not game.observation_lists_moves  # the LAP lists them too, as it always did under raw
    assert "Valid actions: Pass, Bet." in _user_turn(game, "player_0")


def test_kuhn_names_the_card_the_pot_the_betting_and_what_pass_means():
    game = tsmg.make("OpenSpiel/kuhn_poker-v0")
    observations, _ = game.reset(seed=0)
    first = observations["player_0"]
    assert "Your card: Queen." in first and "the first to act" in first and "Pot: 2 chips" in first
    assert "No bet to you: Pass checks" in first and "Betting so far: none." in first
    game.step({"player_0": "Bet"})
    second = game.observe("player_1")
    assert "Your card: Jack." in second and "Betting so far: player_0 Bet." in second
    assert "Your opponent has bet: Pass folds, Bet calls." in second and "Pot: 3 chips" in second
    assert second.count("Queen") == 1  # in the rules card only: the other seat's card stays hidden


@pytest.mark.parametrize("game_id", ["OpenSpiel/kuhn_poker-v0", "OpenSpiel/nim-v0", "OpenSpiel/bargaining-v0"])
def test_the_moves_are_listed_once_one_per_line(game_id):
    game = tsmg.make(game_id)
    observations, _ = game.reset(seed=0)
    agent = game.active_agents[0]
    legal = game.legal_actions(agent)
    message = _user_turn(game, agent)
    lines = message.splitlines()
    assert game.observation_lists_moves
    for move in legal:
        assert lines.count(move) == 1, move  # a line of its own, and only one
    assert "Valid actions" not in message


def test_compact_drops_the_rules_card_only():
    full, compact = tsmg.make("OpenSpiel/leduc_poker-v0"), tsmg.make("OpenSpiel/leduc_poker-v0", view="compact")
    text_full, text_compact = full.reset(seed=3)[0]["player_0"], compact.reset(seed=3)[0]["player_0"]
    assert "Rules: Leduc poker" in text_full and "Rules:" not in text_compact
    assert text_compact == "\n\n".join(part for part in text_full.split("\n\n") if not part.startswith("Rules:"))


def test_leduc_936_information_states_give_936_prompts_and_the_raw_text_576():
    readable, raw = sweep("leduc_poker"), sweep("leduc_poker", view="raw")
    assert readable.complete and readable.information_states == readable.prompts == 936 and readable.faithful
    assert raw.information_states == 936 and raw.prompts == 576 and raw.merged and not raw.faithful


@pytest.mark.parametrize("game", ["kuhn_poker", "liars_dice", "phantom_ttt", "dark_hex", "tic_tac_toe"])
def test_hand_written_views_are_faithful_on_a_capped_sweep(game):
    result = sweep(game, max_histories=None if game == "kuhn_poker" else 3000)
    assert result.decisions > 10 and result.faithful, (result.merged, result.split)


def _two_player_turn_based_ids():
    ids = []
    for spec in tsmg.specs():
        if not spec.id.startswith("OpenSpiel/"):
            continue
        game = tsmg.make(spec.id)
        game_type = game.game_type
        comparable = game_type.provides_information_state_string or game_type.information == (
            pyspiel.GameType.Information.PERFECT_INFORMATION
        )
        if game.turn_based and len(game.agents) == 2 and comparable:
            ids.append(game.config.game)
    return ids


def test_every_two_player_turn_based_game_is_faithful_on_its_first_histories():
    """Each game's sweep stops after CAPPED_HISTORIES histories (depth first); the bench sweeps whole trees."""
    start = time.perf_counter()
    games = _two_player_turn_based_ids()
    unfaithful = {}
    for game in games:
        result = sweep(game, max_histories=CAPPED_HISTORIES)
        if not result.faithful:
            unfaithful[game] = (result.merged, result.split)
    assert len(games) >= 40 and not unfaithful, unfaithful
    assert time.perf_counter() - start < 120  # a budget for `make test`, not a benchmark


def test_the_information_state_is_public():
    game = tsmg.make("OpenSpiel/leduc_poker-v0")
    game.reset(seed=0)
    assert game.information_state("player_0") == game.state.information_state_string(0)
    nim = tsmg.make("OpenSpiel/nim-v0")
    nim.reset(seed=0)
    assert nim.information_state("player_0") == nim.state.information_state_string(0)


def test_the_step_infos_carry_the_acting_seats_information_state():
    """Mutations that fail it: the other seat's string, the string before the step, perfect-information games too."""
    game = tsmg.make("OpenSpiel/leduc_poker-v0")
    _, infos = game.reset(seed=4)
    rng = np.random.default_rng(4)
    seen = 0
    while not game.done:
        for agent in game.agents:
            if agent in game.active_agents:
                expected = game.state.information_state_string(game.player(agent))
                assert infos[agent]["information_state"] == expected == game.information_state(agent)
                assert f"[Observer: {game.player(agent)}]" in expected
                seen += 1
            else:
                assert "information_state" not in infos[agent]
        [agent] = game.active_agents
        legal = game.legal_actions(agent)
        infos = game.step({agent: legal[int(rng.integers(len(legal)))]}).infos
    assert seen >= 2 and all("information_state" not in info for info in infos.values())
    # simultaneous moves hide the round's bids even where OpenSpiel says perfect information
    goofspiel = tsmg.make("openspiel:goofspiel(num_cards=3)")
    _, infos = goofspiel.reset(seed=0)
    assert infos["player_1"]["information_state"] == goofspiel.state.information_state_string(1)
    tic_tac_toe = tsmg.make("OpenSpiel/tic_tac_toe-v0")
    assert tic_tac_toe.reset(seed=0)[1] == {"player_0": {}, "player_1": {}}  # perfect information: nothing to add
    vs_bot = tsmg.make("OpenSpiel/kuhn_poker-v0", vs="random", learner_seat="player_1")
    _, infos = vs_bot.reset(seed=0)
    assert infos["player"]["information_state"] == vs_bot.inner.state.information_state_string(1)
    again = vs_bot.step({"player": "fold!"}).infos["player"]  # invalid: the learner answers the same decision again
    assert again["valid"] is False and again["information_state"] == infos["player"]["information_state"]


def test_board_texts_plug_in_when_their_module_exists(monkeypatch):
    import importlib.machinery
    import sys
    import types

    module = types.ModuleType("tsmg.adapters.openspiel_board_texts")
    module.__spec__ = importlib.machinery.ModuleSpec(module.__name__, None)
    module.BOARD_TEXTS = {"breakthrough": lambda state, player: {"role": f"You are seat {player} of breakthrough."}}  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tsmg.adapters.openspiel_board_texts", module)
    game = tsmg.make("openspiel:breakthrough(rows=6,columns=6)")
    text = game.reset(seed=0)[0]["player_0"]
    assert "You are seat 0 of breakthrough." in text and "Rules: Breakthrough (OpenSpiel's breakthrough)" in text


def _prompts(game_id: str) -> str:
    """The prompts of the first decisions of a seeded random game: the snapshot's text."""
    game = tsmg.make(game_id)
    game.reset(seed=0)
    rng = np.random.default_rng(0)
    shown = []
    for _ in range(3):
        if game.done:
            break
        actions = {}
        for agent in game.active_agents:
            shown.append(f"===== {agent}\n{game.observe(agent)}")
            legal = game.legal_actions(agent)
            actions[agent] = legal[int(rng.integers(len(legal)))]
        game.step(actions)
    return "\n".join(shown) + "\n"


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_prompts(name):
    """Rewrite with TSMG_UPDATE_SNAPSHOTS=1 after a deliberate change of a view, and read the diff."""
    path = SNAPSHOTS / f"{name}.txt"
    text = _prompts(GOLDEN[name])
    if os.environ.get("TSMG_UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no snapshot of {name}: run with TSMG_UPDATE_SNAPSHOTS=1 once"
    assert text == path.read_text(encoding="utf-8"), f"{name}'s prompt changed; if on purpose, rewrite the snapshot"


def test_every_hand_written_view_is_pinned():
    assert set(openspiel_views.PARTS) <= set(GOLDEN)


def test_a_game_has_one_hand_written_view():
    """A game in both modules would show this module's view and never the board texts' (Connect Four once did)."""
    from tsmg.adapters.openspiel_board_texts import BOARD_TEXTS

    assert not set(openspiel_views.PARTS) & set(BOARD_TEXTS)
    game = tsmg.make("OpenSpiel/connect_four-v0")
    assert "0 1 2 3 4 5 6" in game.reset(seed=0)[0]["player_0"]  # the board texts' column numbers


#: The games issue 41 names for hand-written views, each with one (here or in the board texts).
NAMED_IN_THE_ISSUE = (
    "kuhn_poker leduc_poker liars_dice goofspiel chess go hex othello breakthrough backgammon phantom_ttt dark_hex "
    "first_sealed_auction blotto tic_tac_toe connect_four nim dots_and_boxes einstein_wurfelt_nicht pig bargaining "
    "oh_hell clobber catch"
).split()


def test_every_game_the_issue_names_has_a_hand_written_view():
    assert [name for name in NAMED_IN_THE_ISSUE if openspiel_views.parts_function(name) is None] == []


def test_the_notation_example_ends_where_the_first_chance_outcome_never_does():
    """Crazy eights deals forever when chance always takes its first outcome: the example is drawn, and bounded.

    Mutation that fails it (by timing out or running out of memory): the example taken from the
    first chance outcomes again. The ending is also computed only where the view shows it.
    """
    game = tsmg.make("OpenSpiel/crazy_eights-v0", list_moves=False)
    game.reset(seed=0)
    [agent] = game.active_agents
    text = game.observe(agent)
    assert "Your legal moves are not listed" in text and "is one)." in text
    listed = tsmg.make("OpenSpiel/crazy_eights-v0")
    listed.reset(seed=0)
    assert "not listed" not in listed.observe(agent)
