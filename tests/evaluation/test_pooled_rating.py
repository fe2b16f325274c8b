"""The pooled Bradley-Terry rating (tsmg.apps.evaluation.pooled_rating) on results whose ratings are known.

Mutations tried on purpose (2026-12-05), each failing the tests named:

- sign: ``slope = wins - (wins + losses) * p_first`` (the gradient's sign) or ``gap = theta[second] -
  theta[first]`` -> test_win_rate_p_gives_the_elo_gap and six others.
- draw weight: in the fit, a draw counted as a loss (``weight * (score == 1.0)``) or a win (``score > 0``) ->
  test_a_draw_is_half_a_win; in ``seat_pairs``, a draw scored 0 or 1 -> test_end_to_end_from_eval_run_folders.
- game weight: ``game_weights`` returning ``multiplicity`` (every episode weighs the same) ->
  test_a_game_with_ten_times_the_episodes_does_not_dominate; every game weighing 1 in all (``1.0 / per_game``:
  the prior then dominates) -> test_win_rate_p_gives_the_elo_gap, test_all_wins_stay_finite.
- scale: ``SCALE = 400`` or ``400 / ln 10 / 2`` -> test_win_rate_p_gives_the_elo_gap, test_a_draw_is_half_a_win,
  test_three_models_are_transitive; ``CENTER = 0`` -> test_ratings_are_centred_at_1000.
- prior: none (``precision = 0``) -> test_all_wins_stay_finite; 100 times stronger ->
  test_win_rate_p_gives_the_elo_gap (shrinkage beyond its one-point bound).
- bootstrap: an unseeded generator -> test_bootstrap_is_seeded_and_covers; resampling all episodes together
  instead of within each run and game -> test_bootstrap_resamples_within_run_and_game.
- missing games: ``played`` read from ``results.a`` alone -> test_missing_games_are_flagged.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tsmg.apps.evaluation.pooled_rating import (
    PairwiseResults,
    PoolingRefused,
    lap_refusal,
    player_name,
    pooled_rating,
    pooled_rating_of_runs,
)

GAP_75 = 400 * math.log10(0.75 / 0.25)  # ≈ 190.85 rating points: win rate 3/4


def results(*blocks: tuple) -> PairwiseResults:
    """Results from ``(game, a, b, score, count[, run])`` blocks: ``count`` episodes, each one result of a against b.

    The bootstrap's strata are (run, game); ``run`` is 0 unless given.
    """
    players: dict[str, int] = {}
    games: dict[str, int] = {}
    strata_keys: dict[tuple[int, str], int] = {}
    columns: list[list[float]] = [[], [], [], [], []]
    strata: list[int] = []
    for game, first, second, score, count, *run in blocks:
        for _ in range(count):
            for column, value in zip(
                columns,
                (
                    players.setdefault(first, len(players)),
                    players.setdefault(second, len(players)),
                    score,
                    games.setdefault(game, len(games)),
                    len(strata),
                ),
                strict=True,
            ):
                column.append(value)
            strata.append(strata_keys.setdefault((run[0] if run else 0, game), len(strata_keys)))
    a, b, scores, game_index, episode = (np.asarray(column) for column in columns)
    return PairwiseResults(
        players=tuple(players),
        games=tuple(games),
        a=a.astype(np.int64),
        b=b.astype(np.int64),
        score=scores.astype(np.float64),
        game=game_index.astype(np.int64),
        episode=episode.astype(np.int64),
        stratum=np.asarray(strata, dtype=np.int64),
    )


def by_model(rows: list[dict]) -> dict[str, dict]:
    return {row["model"]: row for row in rows}


def test_win_rate_p_gives_the_elo_gap():
    """Two models, one game, x wins 3 of 4: x − y = 400·log10(3) up to the prior's small shrinkage."""
    data = results(("g", "x", "y", 1.0, 300), ("g", "x", "y", 0.0, 100))
    rated = by_model(pooled_rating(data, resamples=0))
    gap = rated["x"]["rating"] - rated["y"]["rating"]
    assert 0 < GAP_75 - gap < 1.0  # shrunk towards 0 by the prior, by under a point at 400 results
    loose = by_model(pooled_rating(data, resamples=0, prior_sd=1e4))
    assert loose["x"]["rating"] - loose["y"]["rating"] == pytest.approx(GAP_75, abs=1e-3)
    # another win rate, the other way round: y wins 9 of 10
    data = results(("g", "x", "y", 0.0, 900), ("g", "x", "y", 1.0, 100))
    rated = by_model(pooled_rating(data, resamples=0, prior_sd=1e4))
    assert rated["y"]["rating"] - rated["x"]["rating"] == pytest.approx(400 * math.log10(9), abs=1e-3)


def test_ratings_are_centred_at_1000():
    data = results(("g", "x", "y", 1.0, 30), ("g", "y", "z", 1.0, 20), ("g", "x", "z", 0.5, 10), ("g", "z", "y", 1, 5))
    rows = pooled_rating(data, resamples=0)
    assert sum(row["rating"] for row in rows) / len(rows) == pytest.approx(1000.0, abs=1e-9)
    assert [row["model"] for row in rows] == ["x", "y", "z"]  # best first


def test_all_wins_stay_finite():
    """The prior keeps a player that won every game finite, and a few dozen results decide its gap."""
    rated = by_model(pooled_rating(results(("g", "x", "y", 1.0, 20)), resamples=0))
    gap = rated["x"]["rating"] - rated["y"]["rating"]
    assert 500 < gap < 1500


def test_a_game_with_ten_times_the_episodes_does_not_dominate():
    """x wins 3 of 4 in game A (400 episodes) and 1 of 4 in game B (40): equal game weights cancel them out."""
    data = results(
        ("A", "x", "y", 1.0, 300), ("A", "x", "y", 0.0, 100), ("B", "x", "y", 1.0, 10), ("B", "x", "y", 0.0, 30)
    )
    rated = by_model(pooled_rating(data, resamples=0))
    assert abs(rated["x"]["rating"] - rated["y"]["rating"]) < 1e-6  # by episode count it would be ≈ +155


def test_a_draw_is_half_a_win():
    """30 wins, 10 losses, 40 draws: score 50 of 80, p = 5/8 (not 30/80 nor 70/80, nor 3/4 without the draws)."""
    data = results(("g", "x", "y", 1.0, 30), ("g", "x", "y", 0.0, 10), ("g", "x", "y", 0.5, 40))
    rated = by_model(pooled_rating(data, resamples=0, prior_sd=1e4))
    assert rated["x"]["rating"] - rated["y"]["rating"] == pytest.approx(400 * math.log10(5 / 3), abs=1e-3)


def test_three_models_are_transitive():
    """x beats y and y beats z 3 of 4, in two games; x never meets z: x − z is the sum of the gaps."""
    data = results(
        ("A", "x", "y", 1.0, 300), ("A", "x", "y", 0.0, 100), ("B", "y", "z", 1.0, 300), ("B", "y", "z", 0.0, 100)
    )
    rated = by_model(pooled_rating(data, resamples=0, prior_sd=1e4))
    x, y, z = (rated[name]["rating"] for name in "xyz")
    assert x - y == pytest.approx(GAP_75, abs=1e-3) and y - z == pytest.approx(GAP_75, abs=1e-3)
    assert x - z == pytest.approx(2 * GAP_75, abs=1e-3)


def test_bootstrap_is_seeded_and_covers():
    data = results(("g", "x", "y", 1.0, 60), ("g", "x", "y", 0.0, 20), ("g", "x", "y", 0.5, 20))
    first = by_model(pooled_rating(data, resamples=300, seed=7))
    assert first == by_model(pooled_rating(data, resamples=300, seed=7))
    # Two players in one game give few distinct resampled ratings (they depend on two counts), so another
    # seed may land on the same percentiles; three players in six blocks do not.
    three = results(
        ("g", "x", "y", 1.0, 30), ("g", "x", "y", 0.0, 10), ("g", "y", "z", 1.0, 25), ("g", "y", "z", 0.5, 15),
        ("g", "x", "z", 1.0, 15), ("g", "z", "x", 1.0, 5),
    )
    assert pooled_rating(three, resamples=300, seed=7) == pooled_rating(three, resamples=300, seed=7)
    assert pooled_rating(three, resamples=300, seed=7) != pooled_rating(three, resamples=300, seed=8)
    true_x = 1000 + 400 * math.log10(0.7 / 0.3) / 2  # the sample's own win rate: 70 of 100
    for name, row in first.items():
        low, high = row["ci95"]
        assert low < row["rating"] < high
        assert 20 < high - low < 200, name  # ±1.96 s.e. of a log-odds over 100 results: ≈ 70 points
    low, high = first["x"]["ci95"]
    assert low < true_x < high


def test_bootstrap_resamples_within_run_and_game():
    """One game in two runs: x won all 10 episodes of run 0, y all 10 of run 1.

    Resampled within each run, every resample holds 10 wins each: the interval has no width. Resampled across
    the runs' episodes together, the counts would vary and so would the ratings.
    """
    data = results(("g", "x", "y", 1.0, 10, 0), ("g", "x", "y", 0.0, 10, 1))
    for row in pooled_rating(data, resamples=100, seed=0):
        assert row["rating"] == pytest.approx(1000.0, abs=1e-6)
        assert row["ci95"] == pytest.approx([1000.0, 1000.0], abs=1e-6)


def test_missing_games_are_flagged():
    data = results(("A", "x", "y", 1.0, 10), ("A", "x", "y", 0.0, 10), ("B", "z", "y", 1.0, 5), ("B", "y", "z", 1, 5))
    rated = by_model(pooled_rating(data, resamples=0))
    assert (rated["x"]["games"], rated["x"]["missing_games"]) == (1, ["B"])
    assert (rated["y"]["games"], rated["y"]["missing_games"]) == (2, [])
    assert (rated["z"]["games"], rated["z"]["missing_games"]) == (1, ["A"])


def test_players_that_never_met_are_refused():
    data = results(("A", "x", "y", 1.0, 3), ("B", "u", "v", 1.0, 3))
    with pytest.raises(PoolingRefused, match=r"groups that never met \(x, y \| u, v\)"):
        pooled_rating(data, resamples=0)


def summary(models: list[str], **lap: object) -> dict:
    return {"config": {"models": models, "lap": {"temperature": 1.0, "max_tokens": 64, "seed": 0, **lap}}}


def test_runs_under_different_lap_settings_are_refused():
    refusal = lap_refusal([("a", summary(["smollm2", "random"])), ("b", summary(["smollm2"], temperature=0.0))])
    assert refusal is not None and refusal.count(".") == 1 and "a; b" in refusal
    assert "different LAP settings" in refusal
    # the run's seed is no LAP setting, and runs of bots alone read no prompt
    assert lap_refusal([("a", summary(["smollm2"])), ("b", summary(["smollm2"], seed=5))]) is None
    assert lap_refusal([("a", summary(["random", "oracle"])), ("b", summary(["smollm2"], temperature=0.0))]) is None
    # an opponent that is a language model makes a run a language-model run
    with_opponent = {**summary(["random"], temperature=0.0), "config": {**summary(["random"])["config"]}}
    with_opponent["config"]["opponent"] = "smollm2"
    with_opponent["config"]["lap"] = {"temperature": 0.0, "max_tokens": 64}
    assert lap_refusal([("a", with_opponent), ("b", summary(["smollm2"]))]) is not None


def test_refusal_reaches_the_pooled_rating_of_runs(tmp_path):
    from tsmg.apps.evaluation import EvalConfig, run_eval

    run = run_eval(EvalConfig(games=["TicTacToe-v0"], models=["random", "oracle"], episodes=2), tmp_path / "r")
    from tsmg.episode import read_episodes

    episodes = list(read_episodes(tmp_path / "r" / "episodes.jsonl"))
    # the same episodes, under the config of a language-model run with two LAP settings
    one, other = summary(["random", "oracle", "smollm2"]), summary(["random", "oracle", "smollm2"], max_tokens=8)
    with pytest.raises(PoolingRefused, match="different LAP settings"):
        pooled_rating_of_runs([("a", one, episodes), ("b", other, episodes)], resamples=0)
    assert pooled_rating_of_runs([("a", run.summary, episodes)], resamples=0)
    # a run of single-seat games gives no pairwise result, so its LAP does not matter
    alone = run_eval(EvalConfig(games=["FrozenLake-v0"], models=["random"], episodes=2), tmp_path / "s")
    single = list(read_episodes(tmp_path / "s" / "episodes.jsonl"))
    assert alone.ok and pooled_rating_of_runs([("a", one, episodes), ("s", other, single)], resamples=0)


def test_player_names_keep_a_bots_options():
    mcts = {"model_options": {"openspiel-mcts": {"simulations": 100}}}
    assert player_name("openspiel-mcts (opponent)", mcts) == "openspiel-mcts (simulations=100)"
    assert player_name("openspiel-mcts", {}) == "openspiel-mcts"
    assert player_name("random (opponent)", {}) == "random"


def test_end_to_end_from_eval_run_folders(tmp_path, capsys):
    """random and the oracle on tic-tac-toe and Kuhn poker, two run folders, 6 seeds each, through tsmg report."""
    from tsmg.apps.cli import main
    from tsmg.apps.evaluation import EvalConfig, run_eval
    from tsmg.apps.evaluation.metrics import seat_pairs
    from tsmg.apps.evaluation.pooled_rating import fit_strengths, game_weights, pairwise_results, ratings_of
    from tsmg.episode import read_episodes

    folders = []
    for game in ("TicTacToe-v0", "KuhnPoker-v0"):
        folder = tmp_path / game
        run_eval(EvalConfig(games=[game], models=["random", "oracle"], episodes=6), folder, write_report=False)
        folders.append(folder)
    assert main(["report", *map(str, folders), "--json"]) == 0
    merged = json.loads(capsys.readouterr().out)
    assert {row["game"] for row in merged["rows"]} == {"TicTacToe-v0", "KuhnPoker-v0"}
    rated = by_model(merged["pooled_rating"])
    assert set(rated) == {"random", "oracle"}
    for row in rated.values():
        assert row["games"] == 2 and row["missing_games"] == []
        low, high = row["ci95"]
        assert low <= row["rating"] <= high
    assert rated["oracle"]["rating"] > rated["random"]["rating"]

    # The same figure by hand: the seat pairs of each game, each game's results weighing the same.
    runs = [(json.loads((folder / "summary.json").read_text()), list(read_episodes(folder / "episodes.jsonl")))
            for folder in folders]
    scores: dict[str, list[float]] = {}
    for (_, episodes), folder in zip(runs, folders, strict=True):
        for episode in episodes:
            for first, second, score in seat_pairs(episode):
                if {first, second} == {"random", "oracle"}:
                    scores.setdefault(folder.name, []).append(score if first == "oracle" else 1 - score)
    assert 0.5 in scores["TicTacToe-v0"]  # tic-tac-toe gives draws: they count half
    data = pairwise_results(runs)
    weight = game_weights(data.game, np.ones(len(data.a)))
    assert [float(weight[data.game == g].sum()) for g in range(2)] == pytest.approx([len(data.a) / 2] * 2)
    theta = fit_strengths(data.a, data.b, data.score, weight, len(data.players))
    expected = dict(zip(data.players, ratings_of(theta).tolist(), strict=True))
    assert rated["oracle"]["rating"] == pytest.approx(expected["oracle"])

    assert main(["report", *map(str, folders)]) == 0
    printed = capsys.readouterr().out
    assert "## One rating across games" in printed
    assert f"| oracle | {rated['oracle']['rating']:.0f} | " in printed and "Elo-like scale" in printed

    # tsmg view's summary shows the same table below its model × game table
    assert main(["view", *map(str, folders), "--out", str(tmp_path / "view"), "--no-plots"]) == 0
    html = (tmp_path / "view" / "index.html").read_text()
    low, high = rated["oracle"]["ci95"]
    assert f"<tr><td>oracle</td><td>{rated['oracle']['rating']:.0f}</td><td>{low:.0f}–{high:.0f}</td>" in html
