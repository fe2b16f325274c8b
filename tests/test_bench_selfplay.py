"""bench/selfplay.py: the tic-tac-toe defence figure counts exactly the blocks a move owed; old runs still summarise."""

import pytest
from bench_modules import load_bench

import games  # noqa: F401  (registers the catalog)
from tsmg.policies import CallablePolicy
from tsmg.rollout import rollout

selfplay = load_bench("selfplay")


def played(moves):
    """A tic-tac-toe game with the given cells (1-9), X first."""
    queue = list(moves)
    policy = CallablePolicy(lambda request: queue.pop(0))
    [episode] = rollout("TicTacToe-v0", {"player_0": policy, "player_1": policy}, seeds=[0])
    assert episode.error is None and not queue
    return episode


def test_blocks_counts_the_moves_that_faced_a_line_of_two_and_no_win_of_their_own():
    # X 1, O 4, X 2 (X threatens 3), O 3 blocks; X 5 (threatens 8 and 9), O 9 blocks one; X 8 wins.
    episode = played(["1", "4", "2", "3", "5", "9", "8"])
    assert selfplay.blocks(episode, "player_1") == (2, 2)
    # X's last move faced O's 3-6-9 but had its own win: not a block it owed.
    assert selfplay.blocks(episode, "player_0") == (0, 0)
    missed = played(["1", "4", "2", "5", "3"])  # O 5 leaves 3 open; X 3 wins
    assert selfplay.blocks(missed, "player_1") == (1, 0)


def result(arm, seed, non_loss, blocked=None):
    random = {"win": non_loss, "draw": 0.0, "loss": 1 - non_loss, "return": 0.0}
    if blocked is not None:
        random["threats_blocked"] = blocked
    evaluation = {label: {"random": random, "strong": dict(random)} for label in ("greedy", "sampled")}
    return {"game": "tictactoe", "arm": arm, "seed": seed, "before": evaluation, "after": evaluation}


def test_runs_kept_from_before_the_defence_figure_still_summarise():
    rows = [result("self-play", seed, 0.6) for seed in range(3)]
    rows += [result("fixed-opponent", seed, 0.8, blocked=0.5 + seed / 10) for seed in range(3)]
    summary = selfplay.summarise(rows)["tictactoe"]
    blocked = summary["threats blocked vs random"]
    assert blocked["self-play"]["seeds"] == 0 and blocked["fixed-opponent"]["mean"] == pytest.approx(0.6)
    assert "vs_self_play" not in blocked["fixed-opponent"]  # no seed where both were measured
    assert summary["non-loss vs random"]["fixed-opponent"]["vs_self_play"]["better"] == 3


def test_the_warm_start_is_refused_for_a_game_without_its_transcripts(capsys):
    with pytest.raises(SystemExit):
        selfplay.main(["--games", "kuhn", "--warm-start"])
    assert "--warm-start learns from tic-tac-toe's minimax" in capsys.readouterr().err
