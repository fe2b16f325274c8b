"""A game's own failure is never the model's: the referee names it, the rollout stops, the CLI says one sentence.

Also: the oracle policy on a game without an oracle, and a model server nobody answers at, are refused
before anything is played.
"""

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tsmg
from games.frozen_lake import FrozenLake
from tests.failing_games import OldSignatureLake
from tsmg import GameCodeError, Invalid
from tsmg.checker import GameCheckError, check_game
from tsmg.policies import OraclePolicy, RandomPolicy
from tsmg.rollout import GAME_ERRORS_FILE, record_game_error, rollout

REPO = Path(__file__).resolve().parents[1]
FAILING_GAMES = str(REPO / "tests" / "register_failing_games.py")


class BrokenRules(FrozenLake):
    """Frozen Lake whose rules or text layer raise, in the method ``BROKEN`` names, at seed ``AT_SEED`` (None: any)."""

    BROKEN = "transition"
    AT_SEED: int | None = None

    def _maybe_raise(self, method):
        if method == self.BROKEN and (self.AT_SEED is None or self.seed == self.AT_SEED):
            raise ZeroDivisionError(f"{method} of a buggy game")

    def transition(self, state, actions, rng):
        self._maybe_raise("transition")
        return super().transition(state, actions, rng)

    def render(self, state, agent):
        self._maybe_raise("render")
        return super().render(state, agent)

    def legal_moves(self, state, agent):
        self._maybe_raise("legal_moves")
        return super().legal_moves(state, agent)

    def is_terminal(self, state):
        self._maybe_raise("is_terminal")
        return super().is_terminal(state)


def broken(method, at_seed=None, game_id="test/Broken-v0"):
    game_class = type(f"Broken_{method}", (BrokenRules,), {"BROKEN": method, "AT_SEED": at_seed})
    game = game_class(map_name="4x4", is_slippery=False, max_steps=20)
    game.game_id = game_id
    return game


# ------------------------------------------------------------------------------ the referee
def test_an_old_parse_action_signature_is_a_game_error_naming_the_call_not_an_invalid_answer():
    game = OldSignatureLake(map_name="4x4")
    game.game_id = "test/OldSignatureLake-v0"
    game.reset(seed=7)
    with pytest.raises(GameCodeError) as raised:
        game.step({"player": "down"})
    error = raised.value
    assert (error.game_id, error.call, error.seed) == ("test/OldSignatureLake-v0", "parse_action", 7)
    assert isinstance(error.error, TypeError) and error.__cause__ is error.error
    assert "test/OldSignatureLake-v0 raised in parse_action" in str(error) and "not an invalid answer" in str(error)
    with pytest.raises(GameCodeError, match="parse_action"):
        game.parse("player", "down")
    assert game.rounds == 0 and game.episode_returns() == {"player": 0.0}  # no round played, no invalid answer charged


@pytest.mark.parametrize("method", ["transition", "render", "legal_moves", "is_terminal"])
def test_each_call_into_the_game_is_named_by_the_method_its_author_wrote(method):
    game = broken(method, at_seed=1)
    game.reset(seed=0)  # another seed: the game plays
    game.step({"player": "down"})
    with pytest.raises(GameCodeError) as raised:
        game.reset(seed=1)
        game.legal_actions("player")
        game.step({"player": "down"})
    assert raised.value.call == method and raised.value.seed == 1
    assert isinstance(raised.value.__cause__, ZeroDivisionError)


def test_bad_text_is_still_an_invalid_answer():
    game = FrozenLake(map_name="4x4")
    game.reset(seed=0)
    for text in ["", "jump", "\x00" * 50, "down down"]:
        assert isinstance(game.parse("player", text), Invalid)
    result = game.step({"player": "jump"})
    assert result.infos["player"]["valid"] is False and "jump" in result.infos["player"]["reason"]


def test_reset_options_the_game_refuses_stay_the_callers_error():
    game = FrozenLake(map_name="4x4")
    with pytest.raises(ValueError) as raised:
        game.reset(seed=0, options={"desc": ["SX", "FG"]})
    assert not isinstance(raised.value, GameCodeError)


# ------------------------------------------------------------------------------ the rollout engine
class IndependentRandom(RandomPolicy):
    prefers_independent_episodes = True


@pytest.mark.parametrize("policy", [RandomPolicy(seed=0), IndependentRandom(seed=0)], ids=["lockstep", "independent"])
def test_a_rollout_stops_at_the_game_failure_after_handing_on_the_finished_episodes(policy):
    finished = []
    with pytest.raises(GameCodeError) as raised:
        rollout(
            lambda: broken("transition", at_seed=3),
            policy,
            seeds=range(6),
            max_concurrent=1,
            on_episode=finished.append,
        )
    error = raised.value
    assert (error.call, error.seed, error.episode_id) == ("transition", 3, "game/s3/g0")
    assert [episode.seed for episode in finished] == [0, 1, 2]  # played before the failure, none after
    assert all(episode.error is None for episode in finished)


def test_the_failure_file_holds_the_game_the_seed_the_call_the_exception_and_its_traceback(tmp_path):
    with pytest.raises(GameCodeError) as raised:
        rollout(lambda: broken("render", at_seed=2, game_id="test/Render-v0"), RandomPolicy(seed=0), seeds=[2])
    path = record_game_error(tmp_path, raised.value)
    assert path == tmp_path / GAME_ERRORS_FILE and raised.value.written_to == str(path)
    (record,) = [json.loads(line) for line in path.read_text().splitlines()]
    assert {key: record[key] for key in ("game_id", "episode_id", "seed", "call")} == {
        "game_id": "test/Render-v0",
        "episode_id": "game/s2/g0",
        "seed": 2,
        "call": "render",
    }
    assert record["exception"] == "ZeroDivisionError: render of a buggy game"
    assert record["traceback"].startswith("Traceback") and "in render" in record["traceback"]


# ------------------------------------------------------------------------------ the checker
def test_the_checker_reports_a_raising_game_as_a_game_error_naming_the_call():
    with pytest.raises(GameCheckError, match=r"parse_action raised TypeError.*game error"):
        check_game(OldSignatureLake(map_name="4x4", max_steps=20), nonsense_seeds=0)
    with pytest.raises(GameCheckError, match=r"is_terminal raised ZeroDivisionError.*game error"):
        check_game(broken("is_terminal"), nonsense_seeds=0)


# ------------------------------------------------------------------------------ the command line
def tsmg_cli(*arguments, env=None, cwd=None):
    """Run ``tsmg`` as a user would, in a subprocess (the test games registered by --import)."""
    command = [sys.executable, "-m", "tsmg.apps.cli", "--import", FAILING_GAMES, *arguments]
    environment = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run(command, cwd=cwd or REPO, env=environment, capture_output=True, text=True, timeout=120)


def test_eval_of_a_game_whose_parse_action_raises_fails_loudly_and_keeps_the_finished_episodes(tmp_path):
    out = tmp_path / "run"
    games = ["--game", "FrozenLake-NoSlip-v0", "--game", "test/OldSignatureLake-v0"]
    done = tsmg_cli("eval", *games, "--model", "oracle", "--episodes", "3", "--out", str(out), "--no-progress")
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()  # one sentence, no traceback
    assert line.startswith("error: the game test/OldSignatureLake-v0 raised in parse_action") and "TypeError" in line
    assert f"traceback is in {out / GAME_ERRORS_FILE}" in line and "Traceback" not in done.stderr
    kept = [json.loads(text) for text in (out / "episodes.jsonl").read_text().splitlines()]
    assert [episode["game_id"] for episode in kept] == ["FrozenLake-NoSlip-v0"] * 3  # none charged as invalid answers
    (record,) = [json.loads(text) for text in (out / GAME_ERRORS_FILE).read_text().splitlines()]
    assert record["game_id"] == "test/OldSignatureLake-v0" and record["call"] == "parse_action"
    assert isinstance(record["seed"], int) and record["episode_id"].startswith("test/OldSignatureLake-v0")
    assert record["exception"].startswith("TypeError") and "parse_action" in record["traceback"]
    assert not (out / "summary.json").exists()


@pytest.mark.parametrize(
    "arguments",
    [
        ["eval", "--game", "test/NoOracleLake-v0", "--model", "oracle", "--episodes", "40", "--out", "runs/x"],
        ["rollout", "test/NoOracleLake-v0", "--policy", "oracle", "--episodes", "40", "--out", "runs/x"],
    ],
    ids=["eval", "rollout"],
)
def test_the_oracle_on_a_game_without_one_is_refused_before_anything_runs(arguments, tmp_path):
    done = tsmg_cli(*arguments, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert "test/NoOracleLake-v0 has none" in line and "Traceback" not in done.stderr
    assert done.stdout == "" and not (tmp_path / "runs").exists()


def test_an_openai_base_url_nobody_answers_at_is_one_sentence_before_the_progress_bar(tmp_path):
    with socket.socket() as closed:  # bound, never listening: connections to it are refused
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"
        began = time.monotonic()
        done = tsmg_cli(
            "eval", "--game", "FrozenLake-v0", "--model", "openai:gpt-4o-mini", "--episodes", "3",
            env={"OPENAI_BASE_URL": url, "OPENAI_API_KEY": "sk-test"},
            cwd=tmp_path,
        )  # fmt: skip
        took = time.monotonic() - began
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()  # no progress bar, no traceback, no table
    assert f"could not connect to the OpenAI-compatible server at {url}" in line and "OPENAI_BASE_URL" in line
    assert done.stdout == "" and not (tmp_path / "runs").exists()
    assert took < 30  # one refused connection, not the SDK's retries with backoff


def test_the_oracle_check_passes_a_game_with_an_oracle():
    OraclePolicy.check_game(tsmg.make("FrozenLake-v0"), seed=0)
