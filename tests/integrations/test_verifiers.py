"""tsmg games as verifiers environments: ``vf-eval`` (verifiers' own entry point) against a loopback server.

One ``vf-eval`` run evaluates a catalog game (two seats) and a game from a user's script, with
its answers from an OpenAI-compatible stub server on loopback (tests/backends/fault_server.py);
each of its episodes is then replayed in-process from its seed and answers, and must give the
same messages and the same per-seat returns.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verifiers", reason="the verifiers integration needs: pip install 'tsmg[verifiers]'")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends"))
from fault_server import FaultServer, request_key  # noqa: E402

from tsmg.apps.integrations.seat import SeatEpisode  # noqa: E402
from tsmg.apps.integrations.verifiers import LAPParser, load_environment  # noqa: E402
from tsmg.registry import import_game_modules  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
USER_GAMES = ROOT / "tests" / "data" / "user-games" / "my_games.py.txt"


def stub_answer(body):
    """The k-th valid move of the last observation, k the number of answers given so far (a varied, fixed play)."""
    found = re.findall(r"Valid actions: (.*?)\.?$", request_key(body), re.M)
    if not found:
        return "I do not know."
    moves = found[-1].split(", ")
    answered = sum(message.get("role") == "assistant" for message in body["messages"])
    return f"<think>move {answered}</think><action>{moves[answered % len(moves)]}</action>"


def user_script(tmp_path):
    script = tmp_path / "my_games.py"
    shutil.copyfile(USER_GAMES, script)
    return script


def test_vf_eval_plays_a_catalog_game_and_a_users_game_and_the_seeds_replay(tmp_path):
    script = user_script(tmp_path)
    with FaultServer(reply=stub_answer) as server:
        config = tmp_path / "eval.toml"
        config.write_text(
            f'model = "stub"\napi_base_url = "{server.base_url}"\napi_key_var = "STUB_KEY"\n'
            f'output_dir = "{tmp_path / "out"}"\nrollouts_per_example = 1\nmax_concurrent = 2\n'
            '[[eval]]\nenv_id = "tsmg.apps.integrations.verifiers"\nnum_examples = 4\n'
            '[eval.args]\ngame = "TicTacToe-v0"\neval_seeds = [7, 8]\n'
            '[[eval]]\nenv_id = "tsmg.apps.integrations.verifiers"\nnum_examples = 3\n'
            f'[eval.args]\ngame = "my/GuessNumber-v0"\neval_seeds = [0, 1, 2]\nimports = ["{script}"]\n'
        )
        env = {**os.environ, "PYTHONPATH": str(ROOT), "STUB_KEY": "none", "OMP_NUM_THREADS": "1"}
        completed = subprocess.run(
            [sys.executable, "-m", "verifiers.legacy.scripts.eval", str(config), "--disable-tui", "--save-results"],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=540,
        )
        assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
        asked = [request_key(body) for body in server.bodies]
    rows = [json.loads(line) for path in sorted((tmp_path / "out").rglob("results.jsonl")) for line in path.open()]
    by_game = {}
    for row in rows:
        game = "my/GuessNumber-v0" if "Guess my number" in row["prompt"][-1]["content"] else "TicTacToe-v0"
        by_game.setdefault(game, []).append(row)
    # The dataset: a seed per row and, for a two-seat game, each seed once per seat.
    assert sorted((r["info"]["seed"], r["info"]["agent"]) for r in by_game["TicTacToe-v0"]) == [
        (7, "player_0"),
        (7, "player_1"),
        (8, "player_0"),
        (8, "player_1"),
    ]
    assert sorted(r["info"]["seed"] for r in by_game["my/GuessNumber-v0"]) == [0, 1, 2]
    import_game_modules([str(script)])
    outcomes = set()
    for game, game_rows in by_game.items():
        for row in game_rows:
            # The prompt is the LAP's: its system message, then the observation with the move format.
            assert row["prompt"][0]["role"] == "system" and "<action>" in row["prompt"][-1]["content"]
            seat = SeatEpisode(game, seed=row["info"]["seed"], agent=row["info"]["agent"])
            assert seat.start() == row["prompt"]  # the seed replays the episode's start
            answers = [m["content"] for m in row["completion"] if m["role"] == "assistant"]
            env_messages = [m["content"] for m in row["completion"] if m["role"] == "user"]
            replayed = []
            for answer in answers:
                turn = seat.play(answer)
                replayed += [message["content"] for message in turn.messages]
            assert seat.done
            assert replayed == env_messages[:-1]  # every observation between the answers, the same text
            assert env_messages[-1].startswith("The game is over")
            # The rubric: the seat's return as the reward, and every seat's return as a metric.
            assert row["reward"] == row["episode_return"] == seat.episode_return
            for agent, value in seat.returns.items():
                assert row[f"return_{agent}"] == value
            assert row["success"] == float(bool(seat.success()))
            outcomes.add((game, row["reward"]))
    assert len({reward for game, reward in outcomes if game == "TicTacToe-v0"}) > 1  # a win and a loss at least
    assert all(key in asked for row in rows for key in [row["prompt"][-1]["content"]])  # the server saw each prompt


def test_the_parser_reads_answers_by_the_laps_strict_rules():
    env = load_environment("FrozenLake-v0", seeds=[0], eval_seeds=[1])
    parser = env.parser
    assert isinstance(parser, LAPParser)
    assert parser.parse("<think>right is a hole</think><action>down</action>") == "down"
    assert parser.parse("down") is None  # no <action> tag: no move
    assert parser.parse("<think>down<action>down</action>") is None  # still thinking when it stopped
    completion = [{"role": "assistant", "content": "<action>left</action>"}]
    assert parser.parse_answer(completion) == "left"


def test_one_seat_and_bad_settings():
    env = load_environment("TicTacToe-v0", seeds=[3], eval_seeds=[4, 5], agent="player_1", opponent="oracle")
    assert [row["info"] for row in env.eval_dataset] == [
        {"seed": 4, "agent": "player_1"},
        {"seed": 5, "agent": "player_1"},
    ]
    assert "X" in env.eval_dataset[0]["prompt"][-1]["content"]  # the oracle (X) has moved before the first turn
    with pytest.raises(ValueError, match="has no seat 'nobody'"):
        load_environment("TicTacToe-v0", agent="nobody")
    with pytest.raises(ValueError, match="needs tsmg's own sampler"):
        load_environment("TicTacToe-v0", action_format="choice")


def test_every_seats_return_is_the_rollout_engines():
    # The per-seat rewards the rubric reports: the model's seat answered by an oracle written as a model would,
    # the other by the oracle opponent, against tsmg's own rollout of the same seeds with the oracle in both seats.
    from tsmg.policies import OraclePolicy
    from tsmg.rollout import rollout

    oracle = OraclePolicy()
    for seed, episode in zip(range(6), rollout("KuhnPoker-v0", OraclePolicy(), seeds=list(range(6))), strict=True):
        seat = SeatEpisode("KuhnPoker-v0", seed=seed, agent="player_1", opponent="oracle")
        seat.start()
        while not seat.done:
            seat.play(f"<think>by the book</think><action>{oracle.act([seat.request()])[0].action}</action>")
        assert seat.returns == episode.returns and seat.episode_return == episode.returns["player_1"]


def test_a_winning_seat_of_a_textarena_game_scores_success_1_in_the_rubric():
    """On main the rubric's success was 0 for every seat of TextArena's Kuhn poker (no winner, None read as 0)."""
    import asyncio

    import verifiers as vf

    pytest.importorskip("textarena")
    env = load_environment("TextArena/KuhnPoker-v0", seeds=[0], eval_seeds=range(6), agent="player_0")
    scores = {}
    for row in env.eval_dataset:  # the model's seat always bets or calls; the opponent plays at random
        state = asyncio.run(env.setup_state({"info": row["info"], "prompt": row["prompt"]}))
        while not state["tsmg"]["done"]:
            legal = state["tsmg_seat"].request().legal_actions
            move = "[bet]" if "[bet]" in legal else "[call]" if "[call]" in legal else legal[0]
            asyncio.run(env.env_response([vf.AssistantMessage(content=f"<action>{move}</action>")], state))
        scores[row["info"]["seed"]] = (
            asyncio.run(env.episode_return(state)),
            asyncio.run(env.success(state)),
        )
    assert {1.0, -1.0} <= {episode_return for episode_return, _ in scores.values()}  # won some hands, lost some
    assert all(success == float(episode_return > 0) for episode_return, success in scores.values()), scores
