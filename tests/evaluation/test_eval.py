"""The evaluation harness: identical starts, resume after kill -9, refusals, failures, reports."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pydantic
import pytest

from tsmg.apps.evaluation import ConfigMismatchError, EvalConfig, plan_evaluation, run_eval
from tsmg.apps.evaluation.cli import dry_run_text
from tsmg.apps.evaluation.metrics import wilson_interval
from tsmg.apps.evaluation.runner import build_policy
from tsmg.episode import read_episodes
from tsmg.policies import Decision

GAME = "FrozenLake-Slippery-v0"


def deterministic(summary):
    """The summary without wall-clock figures."""
    games = []
    for game in summary["games"]:
        rows = [{k: v for k, v in row.items() if k != "timing"} for row in game["rows"]]
        games.append({**game, "rows": rows})
    return {**summary, "games": games}


def test_every_model_meets_the_same_starts():
    plan = plan_evaluation(EvalConfig(games=[GAME, "FrozenLake-NoSlip-v0"], models=["random", "oracle"], episodes=5))
    seeds = {}
    for planned in plan:
        seeds.setdefault((planned.game_id, planned.matchup), []).append(planned.seed)
    assert seeds[(GAME, "random")] == seeds[(GAME, "oracle")]
    assert seeds[(GAME, "random")] != seeds[("FrozenLake-NoSlip-v0", "random")]
    assert len(set(p.episode_id for p in plan)) == len(plan) == 20


def test_run_writes_folder_and_statistics(tmp_path):
    result = run_eval(EvalConfig(games=[GAME], models=["random", "oracle"], episodes=40), tmp_path / "run")
    assert result.ok and result.completed == 80
    files = {path.name for path in (tmp_path / "run").iterdir()}
    assert {"config.json", "episodes.jsonl", "summary.json", "report.md", "success.png", "returns.png"} <= files
    random_row, oracle_row = result.summary["games"][0]["rows"]
    # The interval is Wilson's on the row's own counts, checked against known values (not just "contains the rate").
    successes = round(oracle_row["success_rate"] * 40)
    assert oracle_row["success_ci95"] == pytest.approx(wilson_interval(successes, 40))
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson_interval(40, 40) == pytest.approx((0.9124, 1.0), abs=1e-4)
    assert oracle_row["success_rate"] > random_row["success_rate"]
    assert "| FrozenLake-Slippery-v0 | oracle | 40 |" in (tmp_path / "run" / "report.md").read_text()


def test_rerun_plays_only_missing_episodes(tmp_path):
    config = EvalConfig(games=[GAME], models=["random"], episodes=10)
    run_eval(config, tmp_path, write_report=False)
    calls = []

    def counting_factory(spec, cfg):
        policy = build_policy(spec, cfg)
        inner = policy.act
        policy.act = lambda requests: calls.append(len(requests)) or inner(requests)
        return policy

    result = run_eval(config, tmp_path, policy_factory=counting_factory, write_report=False)
    assert result.completed == 10 and calls == []


def test_changed_configuration_is_refused(tmp_path):
    run_eval(EvalConfig(games=[GAME], models=["random"], episodes=3), tmp_path, write_report=False)
    with pytest.raises(ConfigMismatchError, match="changed: episodes"):
        run_eval(EvalConfig(games=[GAME], models=["random"], episodes=4), tmp_path, write_report=False)


def test_failed_episodes_are_recorded_reported_and_completed_on_rerun(tmp_path):
    class Flaky:
        name = "random"

        def act(self, requests):
            if any(request.episode_seed % 3 == 0 for request in requests):
                raise ConnectionError("server went away")
            return [Decision(action="left") for _ in requests]

    config = EvalConfig(games=[GAME], models=["random"], episodes=12)
    result = run_eval(config, tmp_path, policy_factory=lambda spec, cfg: Flaky(), concurrency=1, write_report=False)
    failed = {episode.episode_id for episode in result.failures}
    expected = {p.episode_id for p in plan_evaluation(config) if p.seed % 3 == 0}
    assert failed == expected and not result.ok
    assert "server went away" in (tmp_path / "failures.jsonl").read_text()
    assert result.completed == 12 - len(expected)
    rerun = run_eval(config, tmp_path, write_report=False)
    assert rerun.ok and rerun.completed == 12


def test_kill_9_then_rerun_gives_exactly_n_episodes_and_the_same_summary(tmp_path):
    episodes = 1500
    args = [sys.executable, "-m", "tsmg.apps.cli", "eval", "--game", GAME, "--model", "random", "--model", "oracle"]
    args += ["--episodes", str(episodes), "--concurrency", "4", "--no-progress"]
    interrupted = tmp_path / "interrupted"
    process = subprocess.Popen(args + ["--out", str(interrupted)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    path = interrupted / "episodes.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and (not path.exists() or path.stat().st_size < 200_000):
        time.sleep(0.005)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    written = path.read_bytes().count(b"\n")
    assert 0 < written < 2 * episodes, "the run finished before it could be killed: raise the episode count"

    rerun = subprocess.run(args + ["--out", str(interrupted)], capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    ids = [episode.episode_id for episode in read_episodes(path)]
    assert len(ids) == len(set(ids)) == 2 * episodes

    straight = run_eval(
        EvalConfig(games=[GAME], models=["random", "oracle"], episodes=episodes),
        tmp_path / "straight",
        write_report=False,
    )
    resumed = json.loads((interrupted / "summary.json").read_text())
    assert deterministic(resumed) == deterministic(json.loads(json.dumps(straight.summary)))


def test_dry_run_prints_the_plan_and_plays_nothing(tmp_path):
    text = dry_run_text(EvalConfig(games=[GAME], models=["random", "smollm2"], episodes=7))
    assert "14 episodes planned" in text and "random; smollm2" in text
    assert "estimated tokens at most:" in text and "at most: 0 in" not in text


def test_report_merges_runs(tmp_path):
    from tsmg.apps.cli import main

    run_eval(EvalConfig(games=[GAME], models=["random"], episodes=5), tmp_path / "a", write_report=False)
    run_eval(EvalConfig(games=[GAME], models=["oracle"], episodes=5), tmp_path / "b", write_report=False)
    assert main(["report", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "cmp")]) == 0
    comparison = (tmp_path / "cmp" / "comparison.md").read_text()
    assert (
        "| a | FrozenLake-Slippery-v0 | random |" in comparison
        and "| b | FrozenLake-Slippery-v0 | oracle |" in comparison
    )
    assert (tmp_path / "cmp" / "comparison-success.png").exists()


def test_unknown_model_spec_fails_before_playing(tmp_path):
    with pytest.raises(pydantic.ValidationError, match="unknown model spec 'gpt-nonsense'"):
        EvalConfig(games=[GAME], models=["gpt-nonsense"], episodes=2)
    from backends import BackendError

    with pytest.raises(BackendError, match="not a language model to load"):
        run_eval(EvalConfig(games=[GAME], models=["tiny"], episodes=2), tmp_path / "run", write_report=False)
    assert not (tmp_path / "run").exists()  # refused before the run folder was made


def test_nonsense_never_beats_play(tmp_path):
    """The issue's case: fixed:5 once drew 40 of 40 tic-tac-toe games against the oracle by stalling."""
    result = run_eval(EvalConfig(games=["TicTacToe-v0"], models=["random", "oracle", "fixed:5"], episodes=20), tmp_path)
    [game] = result.summary["games"]
    against_oracle = game["head_to_head"]["fixed:5"]["oracle"]
    assert against_oracle["W"] == against_oracle["D"] == 0 and against_oracle["L"] == 40
    assert game["ratings"]["fixed:5"]["mu"] < game["ratings"]["random"]["mu"]
    rows = {row["model"]: row for row in game["rows"]}
    # A win/draw/loss game reports W/D/L, not success: fixed:5 never won, and forfeited every game against the oracle.
    assert rows["fixed:5"]["success_rate"] is None and rows["fixed:5"]["outcomes"]["wins"] == 0
    assert rows["fixed:5"]["outcomes"]["forfeits"] >= 40
    assert rows["fixed:5"]["mean_return"] < rows["random"]["mean_return"]
    assert max(len(e.steps) for e in read_episodes(tmp_path / "episodes.jsonl")) <= 9 + 2 * 2  # stalls are short


def test_an_always_invalid_model_ends_every_game(tmp_path):
    """Blackjack sets no step limit; a model answering nonsense forfeits (once it played forever)."""
    result = run_eval(EvalConfig(games=["Blackjack-v0"], models=["fixed:xyzzy"], episodes=3), tmp_path)
    [row] = result.summary["games"][0]["rows"]
    assert result.ok and row["mean_turns"] == 3 and row["mean_return"] == -1.0 and row["success_rate"] is None
    # Blackjack is won, pushed or lost against the dealer: every hand here lost by forfeit.
    assert row["outcomes"] == {"wins": 0, "draws": 0, "losses": 3, "forfeits": 3, "wins_by_forfeit": 0}


def test_multi_agent_games_swap_seats_and_report_head_to_head_and_ratings(tmp_path):
    result = run_eval(EvalConfig(games=["TicTacToe-v0"], models=["random", "oracle"], episodes=30), tmp_path)
    assert result.ok and result.completed == 60  # both seatings
    [game] = result.summary["games"]
    oracle_vs_random = game["head_to_head"]["oracle"]["random"]
    assert oracle_vs_random["L"] == 0 and oracle_vs_random["W"] > 40
    ratings = game["ratings"]
    assert ratings["oracle"]["mu"] > ratings["random"]["mu"] and ratings["oracle"]["sigma"] > 0
    seats = {tuple(e.policies.values()) for e in read_episodes(tmp_path / "episodes.jsonl")}
    assert seats == {("random", "oracle"), ("oracle", "random")}
    assert "W/D/L" in (tmp_path / "report.md").read_text()


def test_eval_observation_last_lays_prompts_out_as_a_run_trained_with_it():
    from tsmg.apps.cli import _build_parser
    from tsmg.apps.evaluation.cli import config_from_args

    parser = _build_parser()
    base = ["eval", "--game", "FrozenLake-NoSlip-v0", "--model", "random"]
    assert not config_from_args(parser.parse_args(base)).lap.template.observation_last
    config = config_from_args(parser.parse_args([*base, "--observation-last", "--history", "last_k"]))
    assert config.lap.template.observation_last and config.lap.template.history == "last_k"


@pytest.mark.parametrize(
    ("game", "when"),
    [("TextArena/Battleship-v0-standard", "after 2 rounds"), ("TextArena/Taboo-v0", "at the start of an episode")],
)
def test_random_on_a_game_that_lists_no_moves_is_refused_before_anything_runs(tmp_path, game, when):
    """On main these played failing episodes and printed a `+nan ± nan` row (exit 1)."""
    pytest.importorskip("textarena")
    done = subprocess.run(
        [sys.executable, "-m", "tsmg.apps.cli", "eval", "--game", game, "--model", "random", "--episodes", "3"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: the random policy picks one of the moves a game lists, and ") and when in line
    assert "lists none for player_0" in line and "nan" not in done.stdout and not list(tmp_path.iterdir())
