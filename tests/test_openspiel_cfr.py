"""OpenSpiel's CFR as a player (``openspiel-cfr:N``), measured through tsmg's exploitability path.

Mutations that fail these tests: the player reading the other seat's information state (the
strategy table is another game's: the exploitability differs), one CFR iteration more or fewer
than asked (the figure moves off OpenSpiel's), the target ``:N`` ignored (the default 1000 plays),
moves drawn without the decision's generator (two runs differ), a simultaneous game accepted.
"""

import json

import pytest

import tsmg
from tsmg.model_spec import parse_model_spec
from tsmg.policies import DecisionRequest, policy_from_spec

pyspiel = pytest.importorskip("pyspiel")

from tsmg.adapters.openspiel_cfr import CFRPolicy  # noqa: E402  (needs pyspiel)
from tsmg.adapters.openspiel_tabular import openspiel_exploitability  # noqa: E402


def _openspiels_own(game_string: str, iterations: int) -> float:
    """OpenSpiel's exploitability of its CFR average policy, computed without tsmg."""
    game = pyspiel.load_game(game_string)
    solver = pyspiel.CFRSolver(game)
    for _ in range(iterations):
        solver.evaluate_and_update_policy()
    return float(pyspiel.exploitability(game, solver.tabular_average_policy()))


@pytest.mark.parametrize(("game", "iterations"), [("kuhn_poker", 1000), ("leduc_poker", 60)])
def test_cfr_measured_through_tsmg_equals_openspiels_own_exploitability(game, iterations):
    """Leduc at 60 iterations keeps `make test` short; docs/openspiel.md gives 1000 with its command."""
    report = openspiel_exploitability(policy_from_spec(f"openspiel-cfr:{iterations}"), f"openspiel:{game}")
    own = _openspiels_own(game, iterations)
    assert report.exploitability == pytest.approx(own, abs=1e-6)
    assert 0 < own < (0.01 if game == "kuhn_poker" else 0.5)  # a solver that has converged some way


def test_the_spec_names_the_iterations():
    assert str(parse_model_spec("openspiel-cfr:1000")) == "openspiel-cfr:1000"
    assert str(parse_model_spec("openspiel-cfr")) == "openspiel-cfr"
    assert policy_from_spec("openspiel-cfr").iterations == 1000
    assert policy_from_spec("openspiel-cfr:25").name == "openspiel-cfr:25"
    assert policy_from_spec("openspiel-cfr", model_options={"iterations": 7}).iterations == 7
    with pytest.raises(ValueError, match="whole number"):
        policy_from_spec("openspiel-cfr:ten")
    with pytest.raises(ValueError, match="two iteration counts"):
        policy_from_spec("openspiel-cfr:5", model_options={"iterations": 6})
    with pytest.raises(ValueError, match="no model option"):
        policy_from_spec("openspiel-cfr", model_options={"simulations": 6})
    with pytest.raises(ValueError, match="takes nothing after a colon"):
        parse_model_spec("openspiel-mcts:5")  # only the kinds that take a target do


def test_moves_are_drawn_from_the_average_policy_with_the_decisions_generator():
    game = tsmg.make("OpenSpiel/kuhn_poker-v0")
    cfr = CFRPolicy(seed=3, iterations=200)
    drawn = []
    for seed in range(12):
        observations, _ = game.reset(seed=seed)
        request = DecisionRequest(game, "player_0", observations["player_0"], game.legal_actions("player_0"))
        probabilities = cfr.move_probabilities(request)
        [first] = cfr.act([request])
        [again] = cfr.act([request])
        assert first.action == again.action and probabilities[first.action] > 0
        drawn.append(first.action)
    assert sum(probabilities.values()) == pytest.approx(1)
    assert len(set(drawn)) == 2  # a mixed strategy: both moves appear over the deals


def test_a_game_cfr_cannot_solve_here_is_refused_in_one_sentence():
    game = tsmg.make("openspiel:goofspiel(num_cards=3)")
    observations, _ = game.reset(seed=0)
    request = DecisionRequest(game, "player_0", observations["player_0"], game.legal_actions("player_0"))
    with pytest.raises(ValueError, match="cannot play .*simultaneous"):
        CFRPolicy(iterations=1).move_probabilities(request)
    with pytest.raises(ValueError, match="1 to"):
        CFRPolicy(iterations=0)


def test_tsmg_exploitability_asks_at_the_prompt_the_model_plays_with(monkeypatch, capsys):
    """The game options (--option view=..., or a training run's) reach the game the model is asked on.

    A stand-in player bets exactly when its prompt is the raw text: under view=raw it always bets
    (Kuhn's always-bet, exploitability 1/3), under the default view it always passes. Mutation: the
    command measuring on the game without its options (both rows read the same).
    """
    from tsmg.apps.cli import main

    class RawReader:
        name = "raw-reader"

        def move_probabilities(self, request):
            bet = request.observation.startswith("OpenSpiel game kuhn_poker")
            return {move: float((move == "Bet") == bet) for move in request.legal_actions}

    monkeypatch.setattr("tsmg.apps.evaluation.runner.trained_policy", lambda spec, lap, model_options=None: RawReader())
    figures = []
    for options in (["--option", "view=raw"], []):
        assert main(["exploitability", "--game", "openspiel:kuhn_poker", "--model", "random", "--json", *options]) == 0
        [row] = json.loads(capsys.readouterr().out)
        figures.append(row["exploitability"])
    assert figures[0] == pytest.approx(1 / 3, abs=1e-9) and figures[1] != pytest.approx(1 / 3, abs=1e-3)
