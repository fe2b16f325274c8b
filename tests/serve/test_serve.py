"""``tsmg serve`` on loopback, driven by OpenEnv's own client, by HTTP, and by ``tsmg.make(URL)``."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import httpx
import numpy as np
import pytest
from conftest import ROOT, serve_process
from openenv.core.generic_client import GenericEnvClient
from websockets.sync.client import connect as ws_connect

import tsmg
from tsmg.apps.cli import main
from tsmg.apps.remote import RemoteGameError, UnreachableGameError
from tsmg.apps.serve.client import GameEnvClient
from tsmg.apps.serve.models import GameAction
from tsmg.checker import check_game
from tsmg.core import GameError
from tsmg.episode import read_episodes
from tsmg.policies import RandomPolicy
from tsmg.rollout import rollout

FROZEN = "FrozenLake-NoSlip-v0"


def play_in_process(game_id, seed, choose):
    """An episode in-process, choosing each move with ``choose(legal, rng)``: (texts, rewards, moves)."""
    game = tsmg.make(game_id)
    observations, _ = game.reset(seed=seed)
    texts, rewards, moves = [observations["player"]], [], []
    rng = np.random.default_rng(seed)
    while not game.done:
        move = choose(game.legal_actions("player"), rng)
        result = game.step({"player": move})
        texts.append(result.observations["player"])
        rewards.append(result.rewards["player"])
        moves.append(move)
    return texts, rewards, moves


def random_move(legal, rng):
    return legal[int(rng.integers(len(legal)))]


def comparable(episode):
    """An Episode record without what differs between runs or places (id, timings, where the game ran)."""
    record = episode.model_dump()
    for key in ("game_id", "episode_id", "latency_s"):
        record.pop(key, None)
    # An in-process record names the text view the game was played with, even at its default; a
    # remote game's client sees no config, so its record leaves it out (the texts are compared).
    record["game_options"].pop("view", None)
    for step in record["steps"]:
        step.pop("latency_s", None)
    return record


# ------------------------------------------------------------------ OpenEnv's own clients
def test_openenv_generic_client_replays_the_in_process_episode(served):
    """OpenEnv's GenericEnvClient (no tsmg code on the client side) gets the in-process episode for a seed."""
    for seed in (0, 7, 123):
        texts, rewards, moves = play_in_process(FROZEN, seed, random_move)
        with GenericEnvClient(base_url=served.url(FROZEN)).sync() as env:
            result = env.reset(seed=seed)
            assert result.observation["text"] == texts[0]
            assert result.observation["legal_actions"] == ["left", "down", "right", "up"]
            for move, text, reward in zip(moves, texts[1:], rewards, strict=True):
                result = env.step({"text": move})
                assert result.observation["text"] == text
                assert result.reward == reward
            assert result.done
            assert env.state()["seed"] == seed


def test_schema_and_health_are_openenv_s(served):
    schema = httpx.get(f"{served.url(FROZEN)}/schema").json()
    assert {"text", "agent", "answers", "invalid", "query"} <= set(schema["action"]["properties"])
    assert {"text", "agent", "legal_actions", "reward", "done", "truncated", "info"} <= set(
        schema["observation"]["properties"]
    )
    assert httpx.get(f"{served.url(FROZEN)}/health").json()["status"] == "healthy"
    assert httpx.get(f"{served.base}/health").json()["games"][:3] == [FROZEN, "TicTacToe-v0", "SnakeArena-2p-v0"]


def test_32_concurrent_sessions_do_not_interfere(served):
    """32 OpenEnv clients step in lock-step, each on its own seed; each gets its in-process episode."""
    seeds = list(range(100, 132))
    expected = {seed: play_in_process(FROZEN, seed, random_move) for seed in seeds}
    barrier = threading.Barrier(len(seeds))
    seen: dict[int, list[str]] = {}
    errors = []

    def play(seed):
        try:
            _, _, moves = expected[seed]
            with GameEnvClient(base_url=served.url(FROZEN)).sync() as env:
                texts = [env.reset(seed=seed).observation.text]
                for step in range(8):
                    barrier.wait(timeout=60)  # every session steps in the same round
                    if step < len(moves):
                        texts.append(env.step(GameAction(text=moves[step])).observation.text)
                seen[seed] = texts
        except Exception as error:  # reported below, with the seed
            errors.append((seed, repr(error)))
            barrier.abort()

    threads = [threading.Thread(target=play, args=(seed,)) for seed in seeds]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors
    assert {seed: seen[seed] for seed in seeds} == {seed: expected[seed][0] for seed in seeds}
    assert served.sessions(FROZEN) == 0  # every closed client freed its session


def test_one_seat_session_against_the_server_side_oracle(served):
    """A session plays O (player_1); the server plays X with the oracle, which a random O never beats."""
    outcomes = []
    for seed in range(6):
        rng = np.random.default_rng(seed)
        with GameEnvClient(base_url=served.url("TicTacToe-v0")).sync() as env:
            result = env.reset(seed=seed, agent="player_1", opponent="oracle")
            assert result.observation.agent == "player_1" and "X" in result.observation.text  # X has moved
            while not result.done:
                legal = result.observation.legal_actions
                result = env.step(GameAction(text=legal[int(rng.integers(len(legal)))]))
            outcomes.append(result.observation.returns["player_1"])
            assert env.state().opponent == "oracle"
    assert all(value <= 0 for value in outcomes) and min(outcomes) < 0


# ------------------------------------------------------------------ tsmg.make("http://…")
@pytest.mark.parametrize("game_id", [FROZEN, "TicTacToe-v0", "SnakeArena-2p-v0"])
def test_remote_game_reproduces_in_process_transcripts(served, game_id):
    """The same seeds and policy give the same episode records over the wire as in-process."""
    remote = rollout(served.url(game_id), RandomPolicy(seed=3), seeds=range(12))
    local = rollout(game_id, RandomPolicy(seed=3), seeds=range(12))
    assert not any(episode.error for episode in remote)
    assert [comparable(e) for e in remote] == [comparable(e) for e in local]
    assert all(step.state_key for episode in remote for step in episode.steps)


@pytest.mark.parametrize("game_id", [FROZEN, "TicTacToe-v0", "SnakeArena-2p-v0"])
def test_checker_passes_over_the_wire(served, game_id):
    report = check_game(served.url(game_id), nonsense_seeds=20)
    assert report.legal_actions_checked > 0 and report.hostile_answers_checked > 0
    assert report.nonsense  # the always-invalid seat was played against random over the wire


def test_remote_game_oracle_invalid_answers_and_options(served):
    # penalize: an invalid answer plays nothing (the id's own default_action would play "left")
    game = tsmg.make(served.url(FROZEN), max_steps=3, on_invalid="penalize")
    local = tsmg.make(FROZEN, max_steps=3, on_invalid="penalize")
    game.reset(seed=5)
    local.reset(seed=5)
    assert game.oracle_action("player") == local.oracle_action("player")
    assert game.parse("player", "  RIGHT ") == "right"
    assert game.parse("player", "fly").reason == local.parse("player", "fly").reason
    result = game.step({"player": tsmg.Invalid("no <action> tag")})
    assert result.infos["player"] == {"valid": False, "reason": "no <action> tag", "action": None}
    game.step({"player": "down"})
    assert game.step({"player": "down"}).truncated == {"player": True}  # the session's max_steps=3
    with pytest.raises(tsmg.GameError):
        game.step({"player": "down"})
    game.close()


# The CLI runs in process here (its main and its error report): the server is the subprocess under test.
def test_unknown_or_unreachable_game_is_a_clear_error(served, capsys):
    with pytest.raises(tsmg.UnknownGameError, match="serves /FrozenLake-NoSlip-v0"):
        tsmg.make(served.url("Nope-v0"))
    with pytest.raises(UnreachableGameError, match="cannot reach"):
        tsmg.make("http://127.0.0.1:9/FrozenLake-v0")
    capsys.readouterr()
    returncode, stderr = main(["check", "http://127.0.0.1:9/FrozenLake-v0"]), capsys.readouterr().err
    assert returncode == 2 and stderr.startswith("error: cannot reach") and "Traceback" not in stderr


def test_tsmg_check_and_eval_on_a_served_game(served, tmp_path, capsys):
    url = served.url(FROZEN)
    returncode, check = main(["check", url]), capsys.readouterr()
    assert returncode == 0 and check.out.startswith(f"ok   {url}"), check.err
    out = tmp_path / "eval"
    command = ["eval", "--game", url, "--model", "random", "--model", "oracle", "--episodes", "6", "--out", str(out)]
    returncode, run = main([*command, "--no-progress"]), capsys.readouterr()
    assert returncode == 0, run.out + run.err
    episodes = list(read_episodes(out / "episodes.jsonl"))
    assert len(episodes) == 12 and not any(e.error for e in episodes)
    oracle = [e for e in episodes if e.policies["player"] == "oracle"]
    assert all(e.success["player"] for e in oracle)  # every NoSlip start the oracle can reach in 8 steps


# ------------------------------------------------------------------ sessions over HTTP
def test_http_sessions_keep_their_episode(served):
    base = served.url(FROZEN)
    texts, rewards, moves = play_in_process(FROZEN, 11, random_move)
    opened = httpx.post(f"{base}/reset", json={"seed": 11}).json()
    session = opened["session_id"]
    assert opened["observation"]["text"] == texts[0]
    for move, text, reward in zip(moves, texts[1:], rewards, strict=True):
        answer = httpx.post(f"{base}/step", json={"session_id": session, "action": {"text": move}})
        assert answer.status_code == 200
        assert answer.json()["observation"]["text"] == text and answer.json()["reward"] == reward
    state = httpx.get(f"{base}/state", params={"session_id": session}).json()
    assert state["done"] and state["step_count"] == len(moves) and state["seed"] == 11
    again = httpx.post(f"{base}/step", json={"session_id": session, "action": {"text": "left"}})
    assert again.status_code == 409 and "episode is over" in again.json()["detail"]
    reopened = httpx.post(f"{base}/reset", json={"session_id": session, "seed": 11}).json()
    assert reopened["observation"]["text"] == texts[0]
    assert httpx.post(f"{base}/close", json={"session_id": session}).status_code == 200
    closed = httpx.post(f"{base}/step", json={"session_id": session, "action": {"text": "left"}})
    assert closed.status_code == 410 and "expired" in closed.json()["detail"]


BAD_REQUESTS = [
    # (path, raw body, status, words of the reason)
    ("step", b"{bad json", 400, "not valid JSON"),
    ("step", b"", 400, "body is empty"),
    ("step", b"[1, 2]", 400, "must be a JSON object"),
    ("step", b'{"action": {"text": NaN}}', 400, "NaN is not a JSON number"),
    ("step", b'{"action": {"text": 1e999}}', 400, "out of range"),
    ("step", b'{"action": {"text": "\\ud800"}}', 400, "not valid Unicode"),
    ("step", b"[" * 50_000 + b"]" * 50_000, 400, "nested too deeply"),
    ("step", b"\xff\xfe", 400, "not valid JSON"),
    ("step", b'{"action": {"text": "left"}}', 400, "no session_id"),
    ("step", b'{"session_id": "nope", "action": {"text": "left"}}', 404, "no session 'nope'"),
    ("state", None, 400, "no session_id"),
    ("reset", b'{"seed": -3}', 400, "non-negative integer"),
    ("reset", b'{"seed": 1, "colour": "red"}', 400, "unknown reset field(s) ['colour']"),
    ("reset", b'{"self": 1}', 400, "unknown reset field(s) ['self']"),
    ("reset", b'{"agent": "player_9"}', 400, "no seat 'player_9'"),
    ("reset", b'{"game_options": {"max_stepz": 3}}', 400, "max_stepz: unknown option"),
]


@pytest.mark.parametrize(("path", "body", "status", "reason"), BAD_REQUESTS)
def test_bad_requests_get_a_4xx_with_the_reason_and_others_keep_playing(served, path, body, status, reason):
    base = served.url(FROZEN)
    with GameEnvClient(base_url=base).sync() as bystander:
        bystander.reset(seed=1)
        if body is None:
            response = httpx.get(f"{base}/{path}")
        else:
            response = httpx.post(f"{base}/{path}", content=body, headers={"content-type": "application/json"})
        assert response.status_code == status, response.text
        assert reason in response.json()["detail"]
        assert len(response.content) < 1000  # the reason, never the input echoed back
        assert bystander.step(GameAction(text="right")).observation.info["valid"]  # the other session goes on


def test_wrong_action_shape_is_422_without_echo(served):
    base = served.url(FROZEN)
    session = httpx.post(f"{base}/reset", json={"seed": 0}).json()["session_id"]
    response = httpx.post(f"{base}/step", json={"session_id": session, "action": {"text": 5, "colour": "x" * 5000}})
    assert response.status_code == 422
    assert "action.text: Input should be a valid string" in response.json()["detail"]
    assert "xxxx" not in response.text
    httpx.post(f"{base}/close", json={"session_id": session})


def test_unknown_game_path_is_404_listing_the_served_games(served):
    response = httpx.post(f"{served.base}/Nope-v0/reset", json={})
    assert response.status_code == 404
    assert "serves /FrozenLake-NoSlip-v0, /TicTacToe-v0, /SnakeArena-2p-v0" in response.json()["detail"]


def test_docs_examples_run_against_the_server(served, capsys):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "serve.md").read_text(), re.DOTALL)
    for needle in ("GenericEnvClient", 'rollout("http://'):
        block = next(b for b in blocks if needle in b).replace("http://127.0.0.1:8000", served.base)
        namespace = {"__name__": "docs"}
        exec(compile(block, "docs/serve.md", "exec"), namespace)
    out = capsys.readouterr().out
    assert "{'valid': True, 'reason': None, 'action': 'right'}" in out
    assert " X " in out  # the server's oracle has played X before O's first turn
    assert len(namespace["episodes"]) == 10 and not any(e.error for e in namespace["episodes"])


def test_a_10_mb_answer_is_refused_and_the_session_goes_on(served):
    base = served.url(FROZEN)
    huge = "x" * (10 * 1024 * 1024)
    over_http = httpx.post(f"{base}/step", json={"session_id": "any", "action": {"text": huge}}, timeout=60)
    assert over_http.status_code == 413 and "at most 4194304" in over_http.json()["detail"]
    with GameEnvClient(base_url=base).sync() as env:
        env.reset(seed=2)
        with pytest.raises(RuntimeError, match="this server accepts at most 262144"):
            env.step(GameAction(text=huge))
        assert env.step(GameAction(text="right")).observation.info["valid"]  # the same session goes on


def test_websocket_garbage_gets_error_frames_and_the_session_goes_on(served):
    with ws_connect(served.url(FROZEN).replace("http", "ws") + "/ws") as socket:
        frames = []
        for message in ["{not json", json.dumps({"type": "step", "data": {"text": "left"}}), '{"type": "dance"}']:
            socket.send(message)
            frames.append(json.loads(socket.recv(timeout=10)))
        socket.send(json.dumps({"type": "reset", "data": {"seed": 4}}))
        assert json.loads(socket.recv(timeout=10))["type"] == "observation"
        socket.send(json.dumps({"type": "step", "data": {"text": "down"}}))
        assert json.loads(socket.recv(timeout=10))["data"]["observation"]["info"]["valid"]
    assert [frame["type"] for frame in frames] == ["error"] * 3
    assert "no episode in progress" in frames[1]["data"]["message"]


# ------------------------------------------------------------------ capacity, reaping, logs
@pytest.fixture(scope="module")
def small_server(tmp_path_factory):
    """Room for 3 sessions, closed after 1 s idle (OpenEnv's reaper looks every 5 s)."""
    with serve_process(
        tmp_path_factory.mktemp("small"), FROZEN, "--max-sessions", "3", "--idle-timeout", "1"
    ) as server:
        yield server


def wait_for(condition, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


def test_too_many_sessions_is_429_and_a_killed_client_frees_its_session(small_server):
    base = small_server.url(FROZEN)
    assert wait_for(lambda: small_server.sessions(FROZEN) == 0)
    client_code = (
        "import sys, time\n"
        "from tsmg.apps.serve.client import GameEnvClient\n"
        f"env = GameEnvClient(base_url={base!r}).sync()\n"
        "env.reset(seed=0)\n"
        "print('ready', flush=True)\n"
        "time.sleep(600)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    clients = [
        subprocess.Popen([sys.executable, "-c", client_code], stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(3)
    ]
    try:
        for client in clients:
            assert client.stdout.readline().strip() == "ready"
        assert small_server.sessions(FROZEN) == 3
        refused = httpx.post(f"{base}/reset", json={"seed": 0})
        assert refused.status_code == 429 and "at capacity (3 of 3 sessions)" in refused.json()["detail"]
        clients[0].send_signal(signal.SIGKILL)  # mid-episode, no goodbye
        clients[0].wait()
        assert wait_for(lambda: small_server.sessions(FROZEN) == 2, timeout=10)
        assert httpx.post(f"{base}/reset", json={"seed": 0}).status_code == 200
    finally:
        for client in clients:
            client.kill()
            client.wait()


def test_idle_http_session_is_reaped_and_then_reported_expired(small_server):
    base = small_server.url(FROZEN)
    assert wait_for(lambda: small_server.sessions(FROZEN) == 0)
    session = httpx.post(f"{base}/reset", json={"seed": 0}).json()["session_id"]
    assert small_server.sessions(FROZEN) == 1
    assert wait_for(lambda: small_server.sessions(FROZEN) == 0, timeout=15)
    response = httpx.post(f"{base}/step", json={"session_id": session, "action": {"text": "left"}})
    assert response.status_code == 410 and "idle for more than 1 s" in response.json()["detail"]


def test_the_server_logs_no_credentials(served):
    secret = "sk-tsmg-SECRET-4c1d"
    headers = {"Authorization": f"Bearer {secret}", "X-Api-Key": secret, "Cookie": f"token={secret}"}
    base = served.url(FROZEN)
    httpx.post(f"{base}/reset", params={"api_key": secret}, json={"seed": 0}, headers=headers)
    httpx.post(f"{base}/step", params={"token": secret}, content=b"{broken", headers=headers)
    httpx.get(f"{base}/state", params={"session_id": secret}, headers=headers)
    with GameEnvClient(base_url=base, headers=headers).sync() as env:
        env.reset(seed=0)
    with ws_connect(base.replace("http", "ws") + f"/ws?token={secret}", additional_headers=headers) as socket:
        socket.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
        socket.recv(timeout=10)
    time.sleep(0.5)
    log = served.log_text()
    assert "POST /FrozenLake-NoSlip-v0/reset?[redacted]" in log  # requests are logged, queries cut
    assert secret not in log


def test_import_tsmg_and_its_cli_loads_no_server_library():
    code = (
        "import sys, tsmg, tsmg.apps.cli, tsmg.apps.serve.cli, tsmg.apps.remote;"
        "print([m for m in ('openenv', 'fastapi', 'uvicorn', 'websockets', 'httpx') if m in sys.modules])"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert output.stdout.strip() == "[]"


def test_remote_game_reopens_a_session_the_server_reaped(small_server):
    game = tsmg.make(small_server.url(FROZEN))
    first, _ = game.reset(seed=0)
    assert wait_for(lambda: small_server.sessions(FROZEN) == 0, timeout=15)  # idle: reaped
    with pytest.raises(RemoteGameError, match="this session was closed"):
        game.step({"player": "right"})
    assert game.reset(seed=0)[0] == first  # a new session, the same start
    assert game.step({"player": "right"}).infos["player"]["valid"]
    game.close()


@pytest.mark.parametrize("game_id", ["FrozenLake-v0", "SnakeArena-2p-v0"])
def test_a_remote_game_forks_by_replay_and_continues_as_the_original(served, game_id):
    from tests.test_fork import answers_for, play_on, view

    game = tsmg.make(served.url(game_id), max_steps=12)
    assert game.fork_mode == "replay"
    game.reset(seed=3)
    rng = np.random.default_rng(0)
    answers = []
    while not game.done:
        answers.append(answers_for(game, rng))
        game.step(answers[-1])
    fork_round = len(answers) // 2
    game.reset(seed=3)
    play_on(game, answers[:fork_round])
    twin = game.fork()  # a session of its own, replayed to the same round
    assert view(twin) == view(game)
    assert play_on(twin, answers[fork_round:]) == play_on(game, answers[fork_round:])
    twin.close()
    game.reset()  # no seed: nothing to replay from
    with pytest.raises(GameError, match="without one"):
        game.fork()
    game.close()
