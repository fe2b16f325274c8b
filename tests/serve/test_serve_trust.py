"""What a client of ``tsmg serve`` cannot do: name a model, ask for more than the operator allows, play
without the token; and what it is told: whose move a result describes, why a binary frame is refused."""

import json
import os
import re
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest
from conftest import ROOT, serve_process
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.types import ConcurrencyConfig
from openenv.core.generic_client import GenericEnvClient
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect

import tsmg
from tsmg.apps.remote import RemoteGameError, UnknownGameError
from tsmg.apps.serve.app import OPENENV_SESSION_API, check_openenv
from tsmg.apps.serve.client import GameEnvClient
from tsmg.apps.serve.environment import GameEnvironment, ServeSettings
from tsmg.apps.serve.models import GameAction, GameObservation, GameState

TICTACTOE = "TicTacToe-v0"
FROZEN = "FrozenLake-NoSlip-v0"
#: What a server that loads no model must never import, whatever its clients send.
BACKEND_MODULES = ("torch", "transformers", "vllm", "openai", "backends")
REPORT_IMPORTS = (
    "import atexit, sys\n"
    f"atexit.register(lambda: print('IMPORTED', sorted(m for m in {BACKEND_MODULES!r} if m in sys.modules), "
    "flush=True))"
)
#: Opponents no client may name: every kind of model spec, the bots the operator did not enable, and what is
#: no spec at all.
HOSTILE_OPPONENTS = [
    "smollm2",
    "openai:gpt-4o",
    "hf:/etc",
    "hf:HuggingFaceTB/SmolLM2-135M-Instruct",
    "vllm:/models/x",
    "tiny",
    "openspiel-mcts",  # OpenSpiel's bots search or solve: offered only where the operator names them
    "openspiel-br",
    "hf:",
    "fixed",
    "random:1",
    "nonsense",
    "",
    "x" * 5000,
    5,
    True,
    ["random"],
    {"kind": "hf", "target": "/etc"},
]
SCRIPTED_OFFER = "random, oracle, fixed:TEXT"


# ------------------------------------------------------------------ opponents
def test_hostile_opponents_are_422_naming_the_offer_and_import_no_backend(tmp_path):
    """OpenEnv's own client (WebSocket) and plain HTTP, one-seat and every-seat sessions: each hostile
    opponent is refused at once, naming what is offered; the allowed ones play; no backend is imported."""
    timings = []
    with serve_process(tmp_path, TICTACTOE, FROZEN, prelude=REPORT_IMPORTS) as server:
        url = server.url(TICTACTOE)
        assert httpx.get(f"{url}/info").json()["opponents"] == ["random", "oracle", "fixed:TEXT"]
        with GenericEnvClient(base_url=url).sync() as env:
            for spec in HOSTILE_OPPONENTS:
                for seats in ({"agent": "player_1"}, {}):
                    started = time.perf_counter()
                    with pytest.raises(RuntimeError) as refused:
                        env.reset(seed=0, opponent=spec, **seats)
                    timings.append(time.perf_counter() - started)
                    message = str(refused.value)
                    assert SCRIPTED_OFFER in message and ("not offered" in message or "must be text" in message)
                    assert "x" * 100 not in message  # never the input echoed back
            result = env.reset(seed=0, agent="player_1", opponent="oracle")  # the same session goes on
            assert "X" in result.observation["text"]
        for spec in HOSTILE_OPPONENTS:
            response = httpx.post(f"{url}/reset", json={"seed": 0, "agent": "player_1", "opponent": spec})
            assert response.status_code == 422, (spec, response.text)
            assert SCRIPTED_OFFER in response.json()["detail"] and len(response.content) < 1000
        assert server.sessions(TICTACTOE) == 0  # a refused first reset holds no session
        for spec in ("random", "oracle", "fixed:5", " oracle"):
            with GameEnvClient(base_url=url).sync() as env:
                result = env.reset(seed=1, agent="player_1", opponent=spec)
                assert result.observation.agent == "player_1" and "X" in result.observation.text
                assert env.state().opponent == spec.strip()
    assert max(timings) < 2.0, timings
    assert "IMPORTED []" in server.log_text(), server.log_text()[-2000:]


def run_cli(*arguments, env=None, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "tsmg.apps.cli", *arguments],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        timeout=timeout,
    )


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        (["--opponent", "smollm2"], "opponent 'smollm2' is not offered by this server"),
        (["--opponent", "hf:/etc", "--opponent-model", "hf:/tmp/other"], "choose one of: random, oracle, fixed:TEXT"),
        (["--host", "0.0.0.0"], "--host 0.0.0.0 lets other machines connect: give --token TOKEN"),
        (["--option-limit", "max_steps"], "--option-limit takes NAME=MAX"),
    ],
)
def test_serve_refuses_a_model_it_was_not_given_and_an_open_host_without_token(arguments, words):
    """One sentence, exit 2, before any model is loaded or any port is opened."""
    started = time.perf_counter()
    run = run_cli("serve", TICTACTOE, "--port", "0", *arguments, env={"TSMG_SERVE_TOKEN": ""})
    assert run.returncode == 2 and run.stdout == "", run.stdout + run.stderr
    assert run.stderr.startswith("error: ") and words in run.stderr and run.stderr.count("\n") == 1, run.stderr
    assert time.perf_counter() - started < 30


def test_an_opponent_model_given_at_start_plays_and_no_other_model_does(tmp_path):
    """``--opponent-model hf:DIR`` (a tiny real model) is offered, loaded at start and plays X; no other model is."""
    pytest.importorskip("torch")
    from backends.tiny import build_tiny_model

    model = f"hf:{build_tiny_model(tmp_path / 'tiny', seed=1)}"
    with serve_process(tmp_path, TICTACTOE, "--opponent-model", model, "--opponent", model) as server:
        url = server.url(TICTACTOE)
        info = httpx.get(f"{url}/info").json()
        assert info["opponents"] == ["random", "oracle", "fixed:TEXT", model] and info["default_opponent"] == model
        with GameEnvClient(base_url=url).sync() as env:
            result = env.reset(seed=0, agent="player_1", opponent=model)
            assert result.observation.agent == "player_1" and result.observation.round >= 1  # X has answered
            assert env.state().opponent == model
        for spec in ("hf:/etc", f"{model}/..", "smollm2"):
            response = httpx.post(f"{url}/reset", json={"agent": "player_1", "opponent": spec})
            assert response.status_code == 422 and model in response.json()["detail"]


# ------------------------------------------------------------------ option limits and the token
TOKEN = "tsmg-test-token-8f2e"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """FrozenLake where clients may set max_steps and a map (up to 16 cells), and must present a token;
    and the two dice races whose declared random start is wrong."""
    with serve_process(
        tmp_path_factory.mktemp("guarded"),
        "FrozenLake-v0",
        "--import",
        "tests.serve.dice_race",
        "test/DiceRace-v0",
        "test/FixedStartRace-v0",
        "--client-options",
        "max_steps",
        "--option-limit",
        "desc=16",
        "--token",
        TOKEN,
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as server:
        yield server


def test_client_options_are_bounded_by_the_operator(guarded):
    url = guarded.url("FrozenLake-v0")
    game = tsmg.make(url, token=TOKEN, max_steps=3)  # under the served game's own 16
    game.reset(seed=0, options={"desc": ["SFFF", "FHFH", "FFFH", "HFFG"]})  # 16 cells: at the limit
    for _ in range(3):
        result = game.step({"player": "left"})
    assert result.truncated == {"player": True}
    game.close()
    refusals = [
        ({"game_options": {"max_steps": 10_000}}, "game_options.max_steps: 10000 is over this server's limit of 16"),
        ({"game_options": {"on_invalid": "terminate"}}, "does not let clients set it (they may set: desc, max_steps"),
        ({"game_options": {"size": 400}}, "does not let clients set it"),
        ({"options": {"desc": ["SFFFFFFF"] * 8}}, "options.desc: 64 in size (characters and items) is over this "
         "server's limit of 16 (tsmg serve --option-limit desc=N)"),
    ]  # fmt: skip
    headers = {"Authorization": f"Bearer {TOKEN}"}
    for body, words in refusals:
        response = httpx.post(f"{url}/reset", json={"seed": 0, **body}, headers=headers)
        assert response.status_code == 422 and words in response.json()["detail"], response.text
        with GameEnvClient(base_url=url, token=TOKEN).sync() as env:
            with pytest.raises(RuntimeError, match=re.escape(words[:40])):
                env.reset(seed=0, **body)


def test_default_bounds_are_the_served_game_s_own_values(served):
    """Without flags a client may shrink what the server plays, never grow it."""
    url = served.url("FrozenLake-v0")
    game = tsmg.make(url, max_steps=5, on_invalid="terminate", p_frozen=0.9, desc=["SF", "FG"])
    small_map = {"desc": ["SFF", "FHF", "FFG"]}
    assert "3x3 board" in game.reset(seed=0, options=small_map)[0]["player"]  # small maps are fine
    for options, words in (
        ({"game_options": {"max_steps": 17}}, "max_steps: 17 is over this server's limit of 16"),
        ({"game_options": {"size": 64}}, "size: 64 is over this server's limit of 4"),
        ({"options": {"desc": ["S" + "F" * 19] * 19 + ["F" * 19 + "G"]}}, "options.desc: a value of size 400"),
    ):
        response = httpx.post(f"{url}/reset", json=options)
        assert response.status_code == 422 and words in response.json()["detail"], response.text
    with pytest.raises(RemoteGameError, match="max_steps: 10000 is over this server's limit of 16"):
        tsmg.make(url, max_steps=10_000).reset(seed=0)  # the server's own sentence, through tsmg's client


def test_the_token_is_required_over_http_and_websocket(guarded, monkeypatch):
    url = guarded.url("FrozenLake-v0")
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        response = httpx.post(f"{url}/reset", json={"seed": 0}, headers=headers)
        assert response.status_code == 401 and "needs a token" in response.json()["detail"]
        assert httpx.get(f"{guarded.base}/health", headers=headers).status_code == 401
        with pytest.raises(InvalidStatus, match="403"):
            ws_connect(url.replace("http", "ws") + "/ws", additional_headers=headers)
    monkeypatch.delenv("TSMG_SERVE_TOKEN", raising=False)
    with pytest.raises((RemoteGameError, UnknownGameError), match="needs a token"):
        tsmg.make(url)
    with GameEnvClient(base_url=url, token=TOKEN).sync() as env:
        assert env.reset(seed=0).observation.legal_actions
    monkeypatch.setenv("TSMG_SERVE_TOKEN", TOKEN)
    with GameEnvClient(base_url=url).sync() as env:  # the token from the environment
        assert env.reset(seed=0).observation.legal_actions
    response = httpx.post(f"{url}/reset", json={"seed": 0}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200


# ------------------------------------------------------------------ whose result it is
def test_top_level_fields_describe_the_seat_that_just_answered(served):
    """A session playing both seats: X wins on the top row; each result's top level is the mover's."""
    moves = [("player_0", "1"), ("player_1", "4"), ("player_0", "2"), ("player_1", "5"), ("player_0", "3")]
    with GenericEnvClient(base_url=served.url(TICTACTOE)).sync() as env:
        result = env.reset(seed=0)
        assert result.observation["agent"] == "player_0" and result.observation["legal_actions"]  # the seat to move
        for index, (seat, move) in enumerate(moves):
            result = env.step({"text": move})
            top = result.observation
            assert top["agent"] == seat and top["info"]["action"] == move and top["info"]["valid"]
            assert top["active_agents"] == ([] if result.done else [moves[index + 1][0]])
            assert result.reward == top["seats"][seat]["reward"]
        assert result.done and result.reward == 1.0 and top["success"] is True  # the winner's, not the loser's
        assert top["seats"]["player_1"]["reward"] == -1.0


def test_a_simultaneous_round_has_no_top_level_reward(served):
    with GameEnvClient(base_url=served.url("SnakeArena-2p-v0")).sync() as env:
        result = env.reset(seed=0)
        seats = result.observation.active_agents
        answers = {seat: result.observation.seats[seat].legal_actions[0] for seat in seats}
        result = env.step(GameAction(answers=answers))
        assert result.reward is None and result.observation.agent is None
        assert {seat: view.info["action"] for seat, view in result.observation.seats.items()} == answers
        one_seat = env.reset(seed=0, agent=seats[0])  # one seat: it alone answered
        move = one_seat.observation.legal_actions[0]
        result = env.step(GameAction(text=move))
        assert result.observation.agent == seats[0] and isinstance(result.reward, float)


# ------------------------------------------------------------------ binary frames
def test_binary_websocket_frames_get_a_readable_error_and_the_session_goes_on(served):
    rng = np.random.default_rng(0)
    frames = [rng.bytes(int(size)) for size in rng.integers(1, 300, size=40)]
    frames += [b"", json.dumps({"type": "reset", "data": {"seed": 4}}).encode()]  # even JSON must come as text
    with ws_connect(served.url(FROZEN).replace("http", "ws") + "/ws") as socket:
        socket.send(json.dumps({"type": "reset", "data": {"seed": 4}}))
        assert json.loads(socket.recv(timeout=10))["type"] == "observation"
        for frame in frames:
            socket.send(frame)
            reply = json.loads(socket.recv(timeout=10))
            assert reply["type"] == "error" and "binary WebSocket frames are not accepted" in reply["data"]["message"]
        socket.send(json.dumps({"type": "step", "data": {"text": "down"}}))
        assert json.loads(socket.recv(timeout=10))["data"]["observation"]["info"]["valid"]  # the same session


# ------------------------------------------------------------------ /info's random start, as checked
def test_info_reports_the_random_start_the_seeds_show(guarded):
    from tests.serve.race_games import DiceRace, FixedStartRace

    races = {"test/DiceRace-v0": DiceRace, "test/FixedStartRace-v0": FixedStartRace}
    for game_id, game in races.items():  # in this process too, for what each declares
        tsmg.register(game_id, game)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    try:
        for game_id, declared, shown in (("test/DiceRace-v0", False, True), ("test/FixedStartRace-v0", True, False)):
            assert tsmg.make(game_id).has_random_start is declared
            assert httpx.get(f"{guarded.url(game_id)}/info", headers=headers).json()["has_random_start"] is shown
            assert tsmg.make(guarded.url(game_id), token=TOKEN).has_random_start is shown
    finally:
        for game_id in races:
            tsmg.registry.unregister(game_id)


# ------------------------------------------------------------------ OpenEnv's private session table
def test_the_openenv_private_members_the_sessions_use_are_there_and_a_moved_one_is_named():
    """Run on the newest openenv 0.10.x: the members exist with the shapes used; a missing one is named."""
    factory = lambda: GameEnvironment(FROZEN, {}, ServeSettings())  # noqa: E731
    config = ConcurrencyConfig(max_concurrent_envs=2, session_timeout=None)

    def server():
        return HTTPEnvServer(factory, GameAction, GameObservation, concurrency_config=config, state_cls=GameState)

    check_openenv(server())
    for name in OPENENV_SESSION_API:
        moved = server()
        setattr(moved, name, None)
        with pytest.raises(RuntimeError, match=f"HTTPEnvServer.{name} is missing or has changed"):
            check_openenv(moved)
