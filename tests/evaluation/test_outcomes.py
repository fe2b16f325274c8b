"""Outcomes that say what happened: wins, draws, losses and forfeits of win/draw/loss games.

A two-player game, or a single-agent game against a built-in opponent, declares its outcome
(``Game.outcome``); its rows report W/D/L per seat instead of a success rate that counts draws
and wins by forfeit as failures. Run folders written before outcomes were counted stay readable
(``tests/data/eval-before-outcomes``, written by `tsmg eval` before this change).
"""

import json
import shutil
from pathlib import Path

import pytest

import tsmg
from tsmg.apps.cli import main
from tsmg.apps.evaluation import EvalConfig, run_eval
from tsmg.apps.evaluation.config import EvalConfig as Config
from tsmg.apps.evaluation.metrics import summarize_eval
from tsmg.apps.view import build_report
from tsmg.episode import Episode, StepRecord, read_episodes
from tsmg.summary import summarize, summary_line

LEGACY = Path(__file__).resolve().parents[1] / "data" / "eval-before-outcomes"


def test_every_catalog_game_with_opponents_declares_win_draw_loss():
    """The audit: every multi-agent game and every single-agent game against an opponent."""
    from tsmg.summary import outcome_kind

    win_draw_loss = {
        "TicTacToe-v0", "TicTacToe-vsMinimax-v0", "TicTacToe-PZ-v0", "ConnectFour-v0", "ConnectFour-vsMinimax-v0",
        "KuhnPoker-v0", "KuhnPoker-vsNash-v0", "RockPaperScissors-v0", "RockPaperScissors-vsCounter-v0",
        "Blackjack-v0", "SnakeArena-2p-v0", "SnakeArena-4p-v0",
    }  # fmt: skip
    specs = tsmg.registry.specs()
    catalog = [spec.id for spec in specs if isinstance(spec.entry_point, str) and spec.entry_point.startswith("games.")]
    assert win_draw_loss < set(catalog)
    for game_id in catalog:
        game = tsmg.make(game_id)
        record = Episode(episode_id="e", game_id=game_id, agents=list(game.agents), policies={})
        if game_id in win_draw_loss:
            assert type(game).outcome is not None, f"{game_id} must declare its outcome"
            assert outcome_kind(record) != "goal", game_id
        else:
            assert game.num_agents == 1 and outcome_kind(record) == "goal", game_id
        game.close()


def test_tictactoe_rows_report_wins_draws_and_losses_per_seat_not_success(tmp_path):
    """The issue's case: the oracle's draws were failures, so its success hid that it never lost."""
    result = run_eval(EvalConfig(games=["TicTacToe-v0"], models=["random", "oracle"], episodes=12), tmp_path)
    [game] = result.summary["games"]
    rows = {row["model"]: row for row in game["rows"]}
    episodes = list(read_episodes(tmp_path / "episodes.jsonl"))
    oracle_won = drawn = 0
    for episode in episodes:  # counted here from the returns, seat by seat
        [oracle] = [agent for agent, model in episode.policies.items() if model == "oracle"]
        [other] = [agent for agent in episode.agents if agent != oracle]
        oracle_won += episode.returns[oracle] > episode.returns[other]
        drawn += episode.returns[oracle] == episode.returns[other]
    assert drawn > 0  # a draw happens in 24 games (it is what the old success rate miscounted)
    oracle = rows["oracle"]
    assert game["outcome"] == oracle["outcome"] == "win_draw_loss"
    assert oracle["success_rate"] is None and oracle["success_ci95"] is None
    assert oracle["outcomes"] == {"wins": oracle_won, "draws": drawn, "losses": 24 - oracle_won - drawn,
                                  "forfeits": 0, "wins_by_forfeit": 0}  # fmt: skip
    assert oracle["outcomes"]["losses"] == 0
    assert rows["random"]["outcomes"]["wins"] == oracle["outcomes"]["losses"]
    assert rows["random"]["outcomes"]["losses"] == oracle["outcomes"]["wins"]
    by_seat = oracle["outcomes_by_seat"]
    assert set(by_seat) == {"player_0", "player_1"}
    assert all(sum(by_seat[seat][key] for seat in by_seat) == oracle["outcomes"][key] for key in ("wins", "draws"))
    assert by_seat["player_0"]["wins"] + by_seat["player_0"]["draws"] == 12  # as X, 12 games, none lost
    report = (tmp_path / "report.md").read_text()
    assert f"W/D/L {oracle_won}/{drawn}/0" in report and "oracle | 24 | W/D/L" in report
    assert "| oracle | " in report.split("ordinal (μ − 3σ) | W/D/L |")[1]  # the ratings carry W/D/L too


def test_a_vs_variant_counts_draws_against_its_built_in_opponent(tmp_path, capsys):
    """TicTacToe-vsMinimax: perfect play draws every game, once shown as 0 % success."""
    assert main(["eval", "--game", "TicTacToe-vsMinimax-v0", "--model", "oracle", "--episodes", "4",
                 "--out", str(tmp_path), "--no-progress"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "| TicTacToe-vsMinimax-v0 | oracle | 4 | W/D/L 0/4/0 |" in out and "0.0% (" not in out
    [row] = json.loads((tmp_path / "summary.json").read_text())["games"][0]["rows"]
    assert row["outcomes_by_seat"] == {"player": row["outcomes"]} and row["outcomes"]["draws"] == 4


def test_forfeits_are_labelled_losses_and_the_opponent_wins_by_forfeit(tmp_path):
    """fixed:5 forfeits once cell 5 is taken: a loss for it, a win (not a failure) for the oracle."""
    result = run_eval(EvalConfig(games=["TicTacToe-v0"], models=["oracle", "fixed:5"], episodes=3), tmp_path)
    rows = {row["model"]: row for row in result.summary["games"][0]["rows"]}
    assert rows["fixed:5"]["outcomes"] == {"wins": 0, "draws": 0, "losses": 6, "forfeits": 6, "wins_by_forfeit": 0}
    assert rows["oracle"]["outcomes"] == {"wins": 6, "draws": 0, "losses": 0, "forfeits": 0, "wins_by_forfeit": 6}
    episodes = list(read_episodes(tmp_path / "episodes.jsonl"))
    assert all(not any(episode.success.values()) for episode in episodes)  # nobody reached three in a row
    line = summary_line("TicTacToe-v0", "oracle", summarize(episodes, agent=None))
    assert "W/D/L" in line and "success" not in line
    assert "(6 won by forfeit; player_0 3/0/0, player_1 3/0/0)" in (tmp_path / "report.md").read_text()


def _step(index, round, agent, valid=True):
    return StepRecord(index=index, round=round, agent=agent, observation="", valid=valid)


def _episode(game_id, agents, returns, steps, success=None, options=None, terminated=True):
    return Episode(
        episode_id="e", game_id=game_id, agents=agents, policies=dict.fromkeys(agents, "m"), returns=returns,
        success=success or {}, steps=steps, terminated=terminated, num_rounds=steps[-1].round + 1 if steps else 0,
        game_options=options or {},
    )  # fmt: skip


def test_a_forfeit_is_read_from_the_record_under_the_games_own_rule():
    from tsmg.summary import forfeits, seat_outcomes, standings

    a, b = "player_0", "player_1"
    stalled = [_step(0, 0, a), _step(1, 1, b, False), _step(2, 2, b, False), _step(3, 3, b, False)]
    episode = _episode("TicTacToe-v0", [a, b], {a: 0.0, b: -1.0}, stalled)
    assert forfeits(episode) == (b,)  # three invalid answers in a row (forfeit_after=3)
    assert seat_outcomes(episode) == {a: "win", b: "loss"}
    # Two in a row is no forfeit under the default; under forfeit_after=2 it is.
    short = _episode("TicTacToe-v0", [a, b], {a: 0.0, b: -1.0}, stalled[:3])
    assert forfeits(short) == ()
    assert forfeits(short.model_copy(update={"game_options": {"forfeit_after": 2}})) == (b,)
    assert forfeits(short.model_copy(update={"game_options": {"on_invalid": "terminate"}})) == (b,)
    assert forfeits(episode.model_copy(update={"terminated": False, "truncated": True})) == ()
    won = _episode("TicTacToe-v0", [a, b], {a: 1.0, b: -1.0}, [_step(0, 0, a), _step(1, 1, b, False), _step(2, 2, b)])
    assert forfeits(won.model_copy(update={"game_options": {"on_invalid": "terminate"}})) == ()  # ended by a move
    # A seat that led and then forfeited still loses, and ranks last (head to head, ratings).
    led = _episode(
        "RockPaperScissors-v0", [a, b], {a: -2.0, b: 2.0},
        [_step(i, i // 2, (a, b)[i % 2], valid=i < 4 or i % 2 == 0) for i in range(10)],
    )  # fmt: skip
    assert forfeits(led) == (b,) and seat_outcomes(led) == {a: "win", b: "loss"}
    assert standings(led)[b] < standings(led)[a]
    from tsmg.apps.evaluation.metrics import head_to_head

    played = led.model_copy(update={"policies": {a: "steady", b: "leader"}})
    assert head_to_head([played])["steady"]["leader"] == {"W": 1, "D": 0, "L": 0}
    # A snake without a valid answer keeps its direction and may die of it: no forfeit there.
    arena = _episode(
        "SnakeArena-2p-v0", ["snake_0", "snake_1"], {"snake_0": 3.0, "snake_1": 0.0},
        [_step(i, i // 2, f"snake_{i % 2}", valid=i % 2 == 0) for i in range(10)],
        success={"snake_0": False, "snake_1": True},
    )  # fmt: skip
    assert forfeits(arena) == ()
    # The arena's winner is the game's (the surviving snake), though the dead one scored more.
    assert seat_outcomes(arena) == {"snake_0": "loss", "snake_1": "win"}
    assert standings(arena) == {"snake_0": 0.0, "snake_1": 1.0}
    # A lone seat against a built-in opponent loses by forfeiting, whatever its return says.
    stalled_alone = [_step(i, i, "player", False) for i in range(3)]
    alone = _episode("TicTacToe-vsMinimax-v0", ["player"], {"player": 0.0}, stalled_alone)
    assert forfeits(alone) == ("player",) and seat_outcomes(alone) == {"player": "loss"}
    # Two seats that forfeit in the same round both lose.
    both = _episode(
        "RockPaperScissors-v0", [a, b], {a: 0.0, b: 0.0}, [_step(i, i // 2, (a, b)[i % 2], False) for i in range(6)]
    )
    assert forfeits(both) == (a, b) and seat_outcomes(both) == {a: "loss", b: "loss"}
    # A seat whose invalid streak ended rounds before the episode did is no forfeit.
    earlier = [_step(0, 0, a, False), _step(1, 0, b), _step(2, 1, a, False), _step(3, 1, b), _step(4, 2, a, False)]
    earlier += [_step(5, 2, b), _step(6, 3, b)]
    assert forfeits(_episode("RockPaperScissors-v0", [a, b], {a: 0.0, b: 0.0}, earlier)) == ()


def test_win_draw_loss_by_returns_and_by_success_tie_and_rank_as_documented():
    from tsmg.summary import seat_outcomes

    four = ["snake_0", "snake_1", "snake_2", "snake_3"]
    tie = _episode("SnakeArena-4p-v0", four, dict.fromkeys(four, 0.0), [_step(0, 0, "snake_0")],
                   success={"snake_0": True, "snake_1": True, "snake_2": False, "snake_3": False})  # fmt: skip
    assert seat_outcomes(tie) == {"snake_0": "draw", "snake_1": "draw", "snake_2": "loss", "snake_3": "loss"}
    nobody = tie.model_copy(update={"success": dict.fromkeys(four, False)})
    assert set(seat_outcomes(nobody).values()) == {"draw"}
    a, b = "player_0", "player_1"
    for returns, expected in [((1.0, -1.0), ("win", "loss")), ((0.0, 0.0), ("draw", "draw")),
                              ((-2.0, 2.0), ("loss", "win"))]:  # fmt: skip
        episode = _episode("KuhnPoker-v0", [a, b], dict(zip((a, b), returns, strict=True)), [_step(0, 0, a)])
        assert tuple(seat_outcomes(episode).values()) == expected
    for value, expected in [(4.0, "win"), (0.0, "draw"), (-1.0, "loss")]:
        single = _episode("TicTacToe-vsMinimax-v0", ["player"], {"player": value}, [_step(0, 0, "player")])
        assert seat_outcomes(single) == {"player": expected}
    goal = _episode("FrozenLake-v0", ["player"], {"player": 1.0}, [_step(0, 0, "player")])
    with pytest.raises(ValueError, match="goal game"):
        seat_outcomes(goal)


def test_a_run_folder_written_before_outcomes_is_read_by_report_view_and_summary(tmp_path, capsys):
    """tests/data/eval-before-outcomes: `tsmg eval` of the day before (oracle and fixed:5, Kuhn and vsMinimax)."""
    summary = json.loads((LEGACY / "summary.json").read_text())
    assert all("outcome" not in row for game in summary["games"] for row in game["rows"])  # as written then
    # The summary, recomputed from its episodes with today's statistics.
    episodes = list(read_episodes(LEGACY / "episodes.jsonl"))
    by_game = {game: [e for e in episodes if e.game_id == game] for game in ("KuhnPoker-v0", "TicTacToe-vsMinimax-v0")}
    recounted = summarize_eval(Config.model_validate(summary["config"]), by_game)
    rows = {(row["game"], row["model"]): row["outcomes"] for game in recounted["games"] for row in game["rows"]}
    assert rows[("KuhnPoker-v0", "oracle")] == {"wins": 2, "draws": 0, "losses": 0, "forfeits": 0,
                                                "wins_by_forfeit": 2}  # fmt: skip
    assert rows[("KuhnPoker-v0", "fixed:5")]["forfeits"] == 2
    assert rows[("TicTacToe-vsMinimax-v0", "oracle")]["draws"] == 1
    # tsmg report recounts what the old summary showed as 0 % success (and n/a).
    assert main(["report", str(LEGACY)]) == 0
    out = capsys.readouterr().out
    assert "| KuhnPoker-v0 | oracle | 2 | W/D/L 2/0/0 (2 won by forfeit; player_0 1/0/0, player_1 1/0/0) |" in out
    assert "| TicTacToe-vsMinimax-v0 | oracle | 1 | W/D/L 0/1/0 |" in out and "n/a" not in out
    # tsmg view builds its page from it (the folder copied: the view only reads it, but stays out of tests/).
    run = tmp_path / "run"
    shutil.copytree(LEGACY, run)
    report = build_report([run], tmp_path / "view", plots=False)
    page = report.index_html.read_text()
    assert "W/D/L 0/0/2 (2 forfeited; player_0 0/0/1, player_1 0/0/1)" in page
    assert "recounted from episodes.jsonl" in page and report.problems[run.name] == []
    data = (tmp_path / "view" / "data" / "e-00000.js").read_text()
    shown = {e["episode_id"]: e.get("outcomes") for e in json.loads(data[data.index("[") : data.rindex("]") + 1])}
    assert shown["KuhnPoker-v0|oracle vs fixed:5|0"] == {"player_0": "win (by forfeit)", "player_1": "loss (forfeited)"}
    assert shown["TicTacToe-vsMinimax-v0|oracle|0"] == {"player": "draw"}
