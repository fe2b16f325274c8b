import numpy as np
import pytest

import tsmg
from games import minesweeper_rules as rules
from games.minesweeper import Minesweeper, MinesweeperState
from tsmg.core import Invalid


def test_neighbours():
    assert rules.neighbours(0, 4, 3) == (1, 4, 5)
    assert len(rules.neighbours(5, 4, 3)) == 8
    assert rules.neighbours(11, 4, 3) == (6, 7, 10)


def test_flood_fill_stops_at_numbers():
    # 5x4 grid, one mine at (4, 0): revealing (0, 3) opens everything except the mine.
    mines = frozenset({4})
    opened = rules.reveal(frozenset(), mines, 15, 5, 4)
    assert opened == frozenset(range(20)) - mines
    # A mine wall in column 2 keeps the fill on the left side.
    wall = frozenset({2, 7, 12, 17})
    opened = rules.reveal(frozenset(), wall, 0, 5, 4)
    assert opened == frozenset({0, 1, 5, 6, 10, 11, 15, 16})
    assert rules.adjacent_mines(wall, 1, 5, 4) == 2
    # Revealing a numbered cell opens only that cell.
    assert rules.reveal(frozenset(), wall, 3, 5, 4) == frozenset({3})


def test_first_reveal_is_always_safe_and_opens_an_area():
    game = Minesweeper()
    for seed in range(40):
        game.reset(seed=seed)
        x, y = seed % 6, (seed * 7) % 6
        result = game.step({"player": f"reveal {x} {y}"})
        assert result.rewards["player"] >= 0 and not game.state.exploded
        cell = y * 6 + x
        assert not ({cell, *rules.neighbours(cell, 6, 6)} & game.state.mines)
        assert len(game.state.mines) == 5 and len(game.state.revealed) > 1


def test_crowded_board_still_safe_first():
    game = Minesweeper(width=3, height=3, mines=8)
    game.reset(seed=1)
    result = game.step({"player": "reveal 1 1"})
    assert result.done and result.rewards == {"player": 1.0} and game.is_success("player")


def _state(mines, revealed=(), width=4, height=4):
    return MinesweeperState(
        width, height, len(mines), tuple(range(width * height)), frozenset(mines), frozenset(revealed)
    )


def test_loss_and_win_rewards():
    game = Minesweeper(width=4, height=4, mines=1)
    rng = np.random.default_rng(0)
    state = _state({15})
    lost, reward = game.transition(state, {"player": ("reveal", 15)}, rng)
    assert reward == {"player": -1.0} and game.is_terminal(lost) and not game.success(lost, "player")
    assert "X" in game.render(lost, "player") and "Game over" in game.render(lost, "player")
    won, reward = game.transition(state, {"player": ("reveal", 0)}, rng)
    assert reward == {"player": 1.0} and game.is_terminal(won) and game.success(won, "player")


def test_solver_deductions():
    # A 4x1 strip with a mine at 0: "1" at cell 1 and "0" at cell 2 make 0 a mine and 3 safe.
    mines = frozenset({0})
    numbers = {c: rules.adjacent_mines(mines, c, 4, 1) for c in (1, 2)}
    assert numbers == {1: 1, 2: 0}
    assert rules.solver_move(4, 1, 1, numbers) == 3
    # Subset rule on a 3x2 grid (mine at 0): D=1 sees {0, 1}, E=1 sees {0, 1, 2, 5}, so 2 and 5 are safe.
    numbers = {c: rules.adjacent_mines(mines, c, 3, 2) for c in (3, 4)}
    assert numbers == {3: 1, 4: 1}
    assert rules.solver_move(3, 2, 1, numbers) == 2
    # Without deductions it guesses the least risky cell: here every unconstrained cell beats the 1-of-2 pair.
    assert rules.solver_move(4, 1, 1, {1: 1}) == 3
    assert rules.solver_move(5, 5, 3, {}) == 12  # opens the centre first


def test_parse_and_state_checks():
    game = Minesweeper()
    named = {"reveal 1 2": ("reveal", 13), "Reveal  0 0.": ("reveal", 0), "`reveal 5 5`": ("reveal", 35)}
    for text, move in named.items():
        assert game.parse("player", text) == move
    for text in ["(1, 2)", "1 2", "open 0 0", "r 1 2", "reveal (5,5)", "x=1, y=2", "reveal 01 2"]:
        assert isinstance(game.parse("player", text), Invalid), text  # not the move's name
    for text, reason in [
        ("flag 1 1", "flags are not used"),
        ("reveal 6 0", "off the grid"),
        ("", "expected reveal x y"),
        ("reveal 99999999 1", "expected"),
        ("reveal １ 2", "expected"),
        ("\x00" * 300, "expected"),
    ]:
        parsed = game.parse("player", text)
        assert isinstance(parsed, Invalid) and reason in parsed.reason, (text, parsed)
    game.reset(seed=0)
    game.step({"player": "reveal 2 2"})
    parsed = game.parse("player", "reveal 2 2")
    assert isinstance(parsed, Invalid) and "already revealed" in parsed.reason
    assert "reveal 2 2" not in game.legal_actions("player")


def test_flags_toggle():
    game = tsmg.make("Minesweeper-Beginner-v0")
    game.reset(seed=0)
    game.step({"player": "FLAG 0 0"})
    assert game.state.flagged == {0} and "F" in game.observe("player")
    game.step({"player": "flag 0 0"})
    assert game.state.flagged == frozenset()
    assert "flag 0 0" in game.legal_actions("player")


def test_solver_beats_random():
    game = tsmg.make("Minesweeper-v0")
    rng = np.random.default_rng(0)
    results = {"oracle": 0, "random": 0}
    for policy in results:
        for seed in range(60):
            game.reset(seed=seed)
            while not game.done:
                legal = game.legal_actions("player")
                answer = game.oracle_action("player") if policy == "oracle" else legal[int(rng.integers(len(legal)))]
                assert answer in legal
                game.step({"player": answer})
            results[policy] += bool(game.is_success("player"))
    assert results["oracle"] >= 0.85 * 60
    assert results["random"] <= 0.1 * 60


@pytest.mark.parametrize("options", [{"mines": 36}, {"width": 1}])
def test_bad_options(options):
    with pytest.raises(tsmg.GameOptionsError):
        tsmg.make("Minesweeper-v0", **options)
