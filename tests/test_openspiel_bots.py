"""OpenSpiel's bots against a learner (tsmg.adapters.openspiel_bots): the exact best response, vs=BOT, and
exploitability of simultaneous games in OpenSpiel's turn-based form."""

from __future__ import annotations

import json

import numpy as np
import pytest

pyspiel = pytest.importorskip("pyspiel")

import tsmg  # noqa: E402
from tsmg.adapters.openspiel_bots import BestResponsePolicy, OpenSpielVsBot, count_histories  # noqa: E402
from tsmg.adapters.openspiel_tabular import openspiel_exploitability  # noqa: E402
from tsmg.apps.cli import main  # noqa: E402
from tsmg.checker import check_game  # noqa: E402
from tsmg.policies import FixedPolicy, RandomPolicy, policy_from_spec  # noqa: E402
from tsmg.registry import GameOptionsError  # noqa: E402
from tsmg.rollout import rollout  # noqa: E402

GOOFSPIEL = "openspiel:goofspiel(num_cards=4,imp_info=True,points_order=descending)"


def kuhn_value(rows_0, rows_1) -> float:
    """Player 0's exact expected return in Kuhn poker when each seat plays its table (OpenSpiel's own evaluator)."""
    from open_spiel.python import policy as policy_lib
    from open_spiel.python.algorithms.expected_game_score import policy_value

    game = pyspiel.load_game("kuhn_poker")
    tables = []
    for rows in (rows_0, rows_1):
        table = policy_lib.TabularPolicy(game)
        for key, probabilities in rows.items():
            table.policy_for_key(key)[:] = [probabilities["Pass"], probabilities["Bet"]]
        tables.append(table)
    joint = policy_lib.merge_tabular_policies(tables, game)
    return float(policy_value(game.new_initial_state(), [joint, joint])[0])


# ------------------------------------------------------------------------------ openspiel-br
def test_the_best_response_earns_exactly_the_best_response_value_against_random_play():
    """openspiel-br's moves, read at every information state, are worth the exploitability's best responses."""
    from games.kuhn_poker_exploitability import kuhn_exploitability

    br = policy_from_spec("openspiel-br")
    assert isinstance(br, BestResponsePolicy)
    strategy = openspiel_exploitability(br, "openspiel:kuhn_poker").strategy
    uniform = {key: {"Pass": 0.5, "Bet": 0.5} for key in strategy}
    seat_0 = {key: value for key, value in strategy.items() if len(key) % 2 == 1}  # "0", "0pb": player 0 decides
    seat_1 = {key: value for key, value in strategy.items() if len(key) % 2 == 0}
    expected = kuhn_exploitability(RandomPolicy()).best_response  # the hand-written solver: (1/2, 5/12)
    assert kuhn_value({**uniform, **seat_0}, uniform) == pytest.approx(expected[0], abs=1e-9)
    assert -kuhn_value(uniform, {**uniform, **seat_1}) == pytest.approx(expected[1], abs=1e-9)


def test_the_best_response_answers_the_strategy_named_by_against():
    """Against always-bet, the best response is worth the hand-written rules' best response to that strategy."""
    from games import kuhn_poker_rules as rules

    br = policy_from_spec("openspiel-br", model_options={"against": "fixed:Bet"})
    strategy = openspiel_exploitability(br, "openspiel:kuhn_poker").strategy
    always_bet = {key: {"Pass": 0.0, "Bet": 1.0} for key in strategy}
    aggressive = {(card, history): (0.0, 1.0) for card, history in rules.information_sets()}
    for card, history in rules.information_sets():
        if rules.facing_bet(history):
            aggressive[(card, history)] = (1.0, 0.0)
    seat_0 = {key: value for key, value in strategy.items() if len(key) % 2 == 1}
    seat_1 = {key: value for key, value in strategy.items() if len(key) % 2 == 0}
    assert kuhn_value({**always_bet, **seat_0}, always_bet) == pytest.approx(
        rules.best_response_value(aggressive, 0), abs=1e-9
    )
    assert -kuhn_value(always_bet, {**always_bet, **seat_1}) == pytest.approx(
        rules.best_response_value(aggressive, 1), abs=1e-9
    )
    with pytest.raises(ValueError, match="openspiel-br has no model option depth"):
        policy_from_spec("openspiel-br", model_options={"depth": 2})


def test_games_too_large_or_simultaneous_are_refused_in_one_sentence(capsys, monkeypatch):
    assert count_histories(pyspiel.load_game("kuhn_poker")) == 58  # root, 3 + 6 deals, 9 histories a deal
    assert count_histories(pyspiel.load_game("kuhn_poker"), limit=57) is None
    with pytest.raises(GameOptionsError, match="openspiel-br cannot play openspiel:tic_tac_toe: it has more than"):
        tsmg.make("OpenSpiel/tic_tac_toe-v0", vs="br")  # 549,946 histories
    with pytest.raises(GameOptionsError, match="its moves are simultaneous"):
        tsmg.make(GOOFSPIEL, vs="br")
    monkeypatch.setattr("tsmg.adapters.openspiel_bots.MAX_HISTORIES", 1000)  # Leduc stands for a large game here
    assert main(["play", "--game", "OpenSpiel/leduc_poker-v0", "-o", "vs=br", "--model", "random"]) == 2
    error = capsys.readouterr().err
    assert "more than 1,000 histories, too many to solve exactly" in error
    assert "Traceback" not in error and error.count("\n") == 1


# ------------------------------------------------------------------------------ vs=BOT
def test_vs_makes_a_two_player_game_single_agent_seated_by_the_seed_or_the_option():
    game = tsmg.make("OpenSpiel/tic_tac_toe-v0", vs="mcts", simulations=10)
    assert isinstance(game, OpenSpielVsBot) and game.agents == ("player",)
    seats = {game.reset(seed=seed)[1]["player"]["seat"] for seed in range(8)}
    assert seats == {"player_0", "player_1"}  # drawn from the seed
    observations, infos = game.reset(seed=3)
    again = tsmg.make("OpenSpiel/tic_tac_toe-v0", vs="mcts", simulations=10)
    assert again.reset(seed=3) == (observations, infos)  # same seed, same seat and the same opening
    fixed = tsmg.make("OpenSpiel/tic_tac_toe-v0", vs="mcts", simulations=10, learner_seat="player_1")
    for seed in range(3):
        observations, infos = fixed.reset(seed=seed)
        board = str(fixed.inner.state)  # the board itself: the readable prompt names x elsewhere too
        assert infos["player"]["seat"] == "player_1" and board.count("x") == 1  # MCTS opened
        assert "player_0 is played by OpenSpiel's MCTS bot (10 simulations per move)" in observations["player"]
    with pytest.raises(GameOptionsError, match="vs=random makes a two-player game single-agent; .* has 4 players"):
        tsmg.make("OpenSpiel/bridge-v0", vs="random")
    with pytest.raises(GameOptionsError, match="vs: Input should be 'random', 'mcts' or 'br'"):
        tsmg.make("OpenSpiel/tic_tac_toe-v0", vs="alphazero")


def test_random_play_against_the_bots_loses_what_it_should():
    """Against the best response, random play loses its exact value seat by seat; MCTS beats it at tic-tac-toe."""
    for seat, value in (("player_0", -5 / 12), ("player_1", -1 / 2)):  # the best responses' values, negated
        episodes = rollout(
            "OpenSpiel/kuhn_poker-v0", RandomPolicy(), seeds=range(600), game_options={"vs": "br", "learner_seat": seat}
        )
        returns = [episode.returns["player"] for episode in episodes]
        assert np.mean(returns) == pytest.approx(value, abs=4 * np.std(returns) / np.sqrt(len(returns)))
    episodes = rollout("OpenSpiel/tic_tac_toe-v0", RandomPolicy(), seeds=range(12), game_options={"vs": "mcts"})
    assert sum(episode.returns["player"] for episode in episodes) <= -8


@pytest.mark.parametrize(
    "game_id, options",
    [
        ("OpenSpiel/kuhn_poker-v0", {"vs": "br"}),
        ("OpenSpiel/tic_tac_toe-v0", {"vs": "mcts", "simulations": 5}),
        ("OpenSpiel/goofspiel-v0", {"vs": "random"}),  # simultaneous: the bot moves with the learner
        ("openspiel:leduc_poker", {"vs": "mcts", "simulations": 5, "learner_seat": "player_1"}),
    ],
)
def test_the_checker_passes_on_games_against_a_bot_and_they_fork(game_id, options):
    check_game(tsmg.make(game_id, **options), seeds=(0, 1, 2), nonsense_seeds=10)
    game = tsmg.make(game_id, **options)
    game.reset(seed=5)
    game.step({"player": game.legal_actions("player")[0]})
    if game.done:
        return
    twin = game.fork()
    for copy in (game, twin):
        while not copy.done:
            copy.step({"player": copy.legal_actions("player")[-1]})
    assert twin.episode_returns() == game.episode_returns() and twin.observe("player") == game.observe("player")


def test_tsmg_eval_takes_the_vs_option_from_the_command_line(tmp_path, capsys):
    code = main([
        "eval", "--game", "OpenSpiel/tic_tac_toe-v0", "-o", "vs=mcts", "-o", "simulations=20", "--model", "random",
        "--episodes", "4", "--out", str(tmp_path / "run"), "--no-progress",
    ])  # fmt: skip
    assert code == 0 and "4/4 episodes completed" in capsys.readouterr().out
    assert main(["eval", "--game", "OpenSpiel/goofspiel-v0", "-o", "vs=mcts", "--model", "random"]) == 2
    error = capsys.readouterr().err
    assert "vs=mcts: openspiel-mcts cannot play" in error and "simultaneous" in error and "Traceback" not in error


# ------------------------------------------------------------------------------ exploitability, simultaneous moves
class HighCard:
    """Bids its highest card with probability 0.7, the others evenly (reads only the seat's own legal moves)."""

    name = "high-card"

    def move_probabilities(self, request):
        legal = request.legal_actions
        if len(legal) == 1:
            return {legal[0]: 1.0}
        return {move: 0.7 if move == legal[-1] else 0.3 / (len(legal) - 1) for move in legal}

    def act(self, requests):  # pragma: no cover - only its probabilities are read
        raise NotImplementedError


def test_goofspiels_exploitability_is_openspiels_on_its_turn_based_form(capsys):
    """The strategy read at the simultaneous game's states is OpenSpiel's exploitability of the same strategy."""
    from open_spiel.python import policy as policy_lib
    from open_spiel.python.algorithms import exploitability

    turn_based = pyspiel.convert_to_turn_based(pyspiel.load_game(GOOFSPIEL.removeprefix("openspiel:")))
    table = policy_lib.TabularPolicy(turn_based)
    for index, state in enumerate(table.states):
        legal = state.legal_actions()
        row = table.action_probability_array[index]
        row[:] = 0.0
        for action in legal:  # the hand's cards, lowest first: 0.7 on the highest
            row[action] = 1.0 if len(legal) == 1 else (0.7 if action == max(legal) else 0.3 / (len(legal) - 1))
    expected = exploitability.exploitability(turn_based, table)
    report = openspiel_exploitability(HighCard(), GOOFSPIEL)
    assert report.exploitability == pytest.approx(expected, abs=1e-9) and expected > 0.1
    assert main(["exploitability", "--game", GOOFSPIEL, "--model", "random", "--json"]) == 0
    [random_play] = json.loads(capsys.readouterr().out)
    assert random_play["exploitability"] == pytest.approx(17 / 24, abs=1e-9)
    assert random_play["exploitability"] == pytest.approx(
        exploitability.exploitability(turn_based, policy_lib.TabularPolicy(turn_based)), abs=1e-9
    )


def test_a_fixed_answer_is_no_strategy_of_a_game_it_cannot_always_play():
    with pytest.raises(ValueError, match="names no legal move of player_0"):
        openspiel_exploitability(FixedPolicy("[P0]Bid: 4"), GOOFSPIEL)


# ------------------------------------------------------------------------------ training against a bot
def test_tsmg_train_against_mcts_and_the_checkpoints_exploitability_is_the_hand_written_solvers(tmp_path, capsys):
    """``tsmg train --game OpenSpiel/kuhn_poker-v0 --model tiny`` with vs=mcts as the opponent, from the CLI; the
    trained checkpoint's strategy, read exactly, has the same exploitability under OpenSpiel and the Kuhn solver."""
    from games import kuhn_poker_rules as rules
    from tsmg.lap import LAPConfig

    run = tmp_path / "run"
    code = main([
        "train", "--game", "OpenSpiel/kuhn_poker-v0", "--model", "tiny", "--updates", "1", "--out", str(run),
        "--set", "rollout.group_size=2", "--set", "rollout.groups_per_update=2", "--max-tokens", "8",
        "--set", "rollout.game_options={vs: mcts, simulations: 5}", "--quiet",
    ])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    [update] = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert update["step"] == 1 and update["rollout/episodes"] == 4
    lap = LAPConfig.model_validate({"action_format": {"kind": "choice"}})
    report = openspiel_exploitability(policy_from_spec(f"hf:{run}/final", lap=lap), "openspiel:kuhn_poker")
    strategy = {}
    for text, probabilities in report.strategy.items():
        card, history = int(text[0]), text[1:].replace("p", "k")
        bet_first = rules.facing_bet(history)  # (call, fold) facing a bet, else (check, bet)
        strategy[(card, history)] = (
            (probabilities["Bet"], probabilities["Pass"])
            if bet_first
            else (probabilities["Pass"], probabilities["Bet"])
        )
    assert len(strategy) == 12 and len({pair for pair in strategy.values()}) > 1  # a strategy, not a constant
    assert report.exploitability == pytest.approx(rules.exploitability(strategy), abs=1e-9)
    assert report.best_response == pytest.approx(
        (rules.best_response_value(strategy, 0), rules.best_response_value(strategy, 1)), abs=1e-9
    )


# ------------------------------------------------------------------------------ bad input, every command
@pytest.mark.parametrize(
    "command",
    [
        ["eval", "--model", "random", "--episodes", "1"],
        ["exploitability", "--model", "random"],
        ["train", "--model", "tiny", "--updates", "1"],
        ["serve", "--port", "0"],
    ],
)
def test_every_command_tells_a_bad_openspiel_game_in_one_line(command, tmp_path, capsys):
    """A close match for a misspelt name, OpenSpiel's own message for bad parameters, the reason for a refused
    game and for a bot that cannot play: one line, exit 2, never a traceback, from every command that takes a game."""
    out = ["--out", str(tmp_path / "run")] if command[0] in ("eval", "train") else []
    for game, options, expected in (
        ("openspiel:leduc_pokr", [], "OpenSpiel has no game 'leduc_pokr'. Did you mean: leduc_poker"),
        ("openspiel:goofspiel(num_cards=9x)", [], "Wrong type for parameter num_cards. Expected type: kInt"),
        ("openspiel:tarok", [], "tarok cannot be played as a tsmg game: its chance is sampled inside OpenSpiel"),
        ("OpenSpiel/goofspiel-v0", ["vs=mcts"], "vs=mcts: openspiel-mcts cannot play openspiel:goofspiel: its moves"),
    ):
        if options and command[0] != "eval":
            continue  # game options on the command line: eval's -o (train's are in its config, serve's the client's)
        arguments = [*command, "--game", game, *out, *(f"-o={option}" for option in options)]
        assert main(arguments) == 2, arguments
        error = capsys.readouterr().err
        assert expected in error and "Traceback" not in error, error
        assert [line for line in error.splitlines() if line.startswith("error:")] == [error.splitlines()[-1]]
