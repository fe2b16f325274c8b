"""Progress that tells the truth: decisions and an ETA from throughput in `tsmg eval`, and `tsmg check` game by game.

Mutations these tests were run against (each made one of them fail): the ETA dividing by the
episode rate instead of the decision rate; not subtracting the live episodes' decisions; no
floor of one decision per unfinished episode; the bound used after an episode has finished;
`check_games` letting KeyboardInterrupt through (nothing kept) or printing only at the end.
"""

import re

import pytest

from tsmg.apps import check as check_module
from tsmg.apps.check import check_games, result_line
from tsmg.apps.cli import main
from tsmg.apps.evaluation.config import EvalConfig
from tsmg.apps.evaluation.progress import EvalProgress, decisions_bound
from tsmg.apps.evaluation.runner import run_eval
from tsmg.episode import read_episodes
from tsmg.registry import make


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_episodes_that_finish_together_still_give_an_eta_from_the_decisions_played():
    """50 episodes decide in lockstep, one batch of 50 decisions every 10 s, each episode taking 8 decisions."""
    clock = Clock()
    progress = EvalProgress(episodes=50, decisions_bound=16, clock=clock)
    assert progress.eta() is None and "ETA" in progress.text()  # nothing measured yet
    for _ in range(3):  # three rounds: 150 decisions in 30 s, no episode done
        progress.asked()
        clock.now += 10
        progress.decided(50)
    seconds, bound = progress.eta()
    # Before any episode ends, each is taken to last its bound: 50 x 16 = 800 decisions, 150 played, 5 a second.
    assert bound and seconds == pytest.approx((800 - 150) / 5)
    assert "decisions 150 (5/s)" in progress.text() and "ETA ~2.2 min (to the step limit)" in progress.text()

    for _ in range(5):  # rounds 4 to 8: the episodes end together after their 8th decision
        progress.asked()
        clock.now += 10
        progress.decided(50)
    for _ in range(50):
        progress.finished(steps=8, failed=False, success=True)
    assert progress.eta() == (0.0, False) and "ETA" not in progress.text().split("success")[0]


def test_the_eta_counts_what_the_live_episodes_have_already_played():
    clock = Clock()
    progress = EvalProgress(episodes=10, decisions_bound=None, clock=clock)
    progress.asked()
    clock.now = 4.0
    progress.decided(8)
    assert progress.eta() is None and "ETA after the first episode" in progress.text()  # no bound, none finished
    for _ in range(2):
        progress.finished(steps=4, failed=False, success=False)  # 8 decisions, 2 episodes of 4
    clock.now = 6.0
    progress.decided(4)  # 12 in 6 s; 4 of them by live episodes
    seconds, bound = progress.eta()
    assert not bound and seconds == pytest.approx((8 * 4 - 4) / 2)
    progress.decided(100)  # live episodes far longer than the finished ones: at least one decision each is left
    seconds, _ = progress.eta()
    assert seconds == pytest.approx(8 / (112 / 6), abs=0.05)


def test_once_an_episode_has_finished_the_eta_uses_what_episodes_took_not_the_bound():
    clock = Clock()
    progress = EvalProgress(episodes=5, decisions_bound=100, clock=clock)
    progress.asked()
    clock.now = 2.0
    progress.decided(4)
    progress.finished(steps=4, failed=False, success=True)
    assert progress.eta() == (8.0, False)  # 4 episodes x 4 decisions at 2 a second
    assert "ETA ~8 s" in progress.text() and "success 100.0%" in progress.text()


def test_the_decisions_bound_is_the_step_limit_times_the_seats():
    assert decisions_bound(make("FrozenLake-v0")) == 16
    assert decisions_bound(make("TicTacToe-v0")) == 2 * make("TicTacToe-v0").config.max_steps


def test_a_real_eval_shows_its_decisions_on_the_progress_line(tmp_path, capsys):
    config = EvalConfig(games=["TicTacToe-v0"], models=["random"], episodes=6)
    result = run_eval(config, tmp_path / "run", progress=True)
    assert result.ok
    shown = capsys.readouterr().err
    steps = sum(len(episode.steps) for episode in read_episodes(tmp_path / "run" / "episodes.jsonl"))
    # Two seats of random play: the run asked for exactly one decision per step of its 12 seats' episodes.
    assert re.search(rf"decisions {steps} \(", shown), shown
    assert "6/6" in shown


def test_check_prints_each_game_as_it_finishes_and_the_whole_time(monkeypatch, capsys):
    seen_before_each = []
    real = check_module.check_one

    def check(game_id, seeds):
        seen_before_each.append(capsys.readouterr().out)  # what was printed before this game's check began
        return real(game_id, seeds)

    monkeypatch.setattr(check_module, "check_one", check)
    assert main(["check", "--game", "FrozenLake-v0", "--game", "TicTacToe-v0", "--nonsense-seeds", "5"]) == 0
    last = capsys.readouterr().out
    assert seen_before_each[0] == ""
    assert re.fullmatch(r"ok   FrozenLake-v0: \d+ episodes, \d+ steps, \d+ hostile answers \(\d+\.\d s\)  "
                        r"\[1/2, about \d+ s left\]\n", seen_before_each[1])  # fmt: skip
    assert re.match(r"ok   TicTacToe-v0: .* \[2/2\]\n2 games checked in \d+ s: 2 ok, 0 failed\n$", last), last


def test_ctrl_c_during_check_keeps_what_finished(capsys):
    calls = []

    def check(game_id, seeds):
        calls.append(game_id)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return {"id": game_id, "ok": game_id != "B", "error": "broken" if game_id == "B" else None,
                "episodes": 1, "steps": 2, "hostile_answers": 3}  # fmt: skip

    printed = []
    run = check_games(
        ["A", "B", "C", "D", "E"], 5, on_result=lambda r, run: printed.append(result_line(r, run)), check=check
    )
    assert run.interrupted and not run.ok and [result["id"] for result in run.results] == ["A", "B"]
    assert printed[0].startswith("ok   A: 1 episodes, 2 steps, 3 hostile answers (") and "[1/5, about" in printed[0]
    assert printed[1].startswith("FAIL B: broken (")
    assert re.fullmatch(r"interrupted after 2 of 5 games checked in \d+ s: 1 ok, 1 failed \(B\); not checked: 3",
                        run.summary_text())  # fmt: skip


def test_ctrl_c_during_check_all_exits_130_with_the_summary(monkeypatch, capsys):
    real = check_module.check_one
    count = []

    def check(game_id, seeds):
        count.append(game_id)
        if len(count) == 3:
            raise KeyboardInterrupt
        return real(game_id, seeds)

    monkeypatch.setattr(check_module, "check_one", check)
    assert main(["check", "--all", "--nonsense-seeds", "2"]) == 130
    captured = capsys.readouterr()
    assert [line.split(":")[0] for line in captured.out.splitlines()] == [f"ok   {game}" for game in count[:2]]
    assert re.match(r"interrupted after 2 of \d+ games checked in \d+ s: 2 ok, 0 failed; not checked: \d+$",
                    captured.err.strip().splitlines()[-1])  # fmt: skip


def estimate_row(model, plan_seconds):
    return {
        "game": "G", "model": model, "sampled": 1, "planned": 10, "tokens_in": 100.0, "tokens_out": 10.0,
        "thinking": None, "plan_tokens_in": 1000.0, "plan_tokens_out": 100.0, "plan_thinking": None,
        "seconds": plan_seconds / 10, "plan_seconds": plan_seconds,
        "plan_cost_usd": None if model.startswith("openai:") else 0.0,  # a local model is not billed per token
    }  # fmt: skip


def test_the_sampled_time_is_divided_by_concurrency_for_hosted_models_only():
    """An in-process model's batch of 64 turns is not 64 times faster than one turn (issue 43: 15x too short)."""
    from tsmg.apps.evaluation.estimate import SampledEstimate

    local = SampledEstimate(rows=[estimate_row("smollm2", 600.0)]).text(64).splitlines()
    assert local[-1].startswith("estimated time of the run: 10.0 min of model time one decision at a time (an in")
    assert "live at once" not in local[-1] and local[-2] == "estimated cost of the run: $0.0000"
    hosted = SampledEstimate(rows=[estimate_row("openai:m", 640.0)]).text(64).splitlines()[-1]
    assert hosted.endswith("; about 10 s with 64 episodes live at once")
    both = SampledEstimate(rows=[estimate_row("openai:m", 640.0), estimate_row("smollm2", 60.0)]).text(64)
    assert "about 1.2 min with 64 episodes live at once (the in-process models' part not divided" in both
