"""What a served game answers when its own code fails, when a client sends what no client should, and which
opponents it offers: the same sentence over HTTP and the WebSocket, never a 5xx.

A real ``tsmg serve`` on loopback, played with OpenEnv's own client, plain HTTP and a raw WebSocket.
"""

import json
import re

import httpx
import numpy as np
import pytest
from conftest import serve_process
from openenv.core.generic_client import GenericEnvClient
from websockets.sync.client import connect as ws_connect

BROKEN = "test/SecondParseFails-v0"  # its parse_action raises on its second call (tests/serve/flawed_games.py)
NO_ORACLE = "test/NoOracleTicTacToe-v0"
FROZEN = "FrozenLake-v0"
TOO_DEEP = "the request is nested too deeply: at most 64 levels of objects and lists"


@pytest.fixture(scope="module")
def flawed(tmp_path_factory):
    with serve_process(
        tmp_path_factory.mktemp("flawed"), "--import", "tests.serve.flawed_games", BROKEN, NO_ORACLE, FROZEN
    ) as server:
        yield server


def websocket(url):
    return ws_connect(url.replace("http", "ws", 1) + "/ws", max_size=None)


def frame_reply(socket, message):
    socket.send(message)
    return json.loads(socket.recv(timeout=30))


# ------------------------------------------------------------------ the game's own failure
def test_a_game_that_raises_is_a_424_naming_the_game_and_the_call_on_both_transports_and_one_log_line(flawed):
    """Was: /reset, /step, /step answered 200, 200, 500 with a traceback in the log, while the WebSocket
    got the bare GameCodeError text."""
    url = flawed.url(BROKEN)
    session = httpx.post(f"{url}/reset", json={"seed": 0}).json()["session_id"]
    steps = [httpx.post(f"{url}/step", json={"session_id": session, "action": {"text": "left"}}) for _ in range(2)]
    assert [step.status_code for step in steps] == [200, 424], steps[-1].text
    over_http = steps[-1].json()["detail"]
    assert over_http.startswith(
        f"the game {BROKEN} raised in parse_action (seed 0): KeyError: 'a bug on the second parse'; a bug in the game"
    )
    assert over_http.endswith(
        "this episode is over (reset starts a new one), and the server's operator has the error in its log"
    )
    after = httpx.post(f"{url}/step", json={"session_id": session, "action": {"text": "left"}})
    assert after.status_code == 409 and "no episode in progress" in after.json()["detail"]
    assert httpx.post(f"{url}/reset", json={"session_id": session, "seed": 0}).status_code == 200  # the session goes on

    with GenericEnvClient(base_url=url).sync() as env:  # OpenEnv's own client, over the WebSocket
        env.reset(seed=0)
        env.step({"text": "left"})
        with pytest.raises(RuntimeError) as raised:
            env.step({"text": "left"})
        assert over_http in str(raised.value)  # the same sentence
        assert env.reset(seed=0).observation["legal_actions"]  # and the session goes on

    log = flawed.log_text()
    failures = [line for line in log.splitlines() if "raised in parse_action" in line]
    assert len(failures) == 2 and all(line.startswith("ERROR:") for line in failures), log[-3000:]
    assert "TSMG_DEBUG=1 logs its traceback" in failures[0]
    assert "Traceback" not in log and "424 Failed Dependency" in log


# ------------------------------------------------------------------ hostile messages
def nested(depth):
    value = 1
    for _ in range(depth):
        value = {"x": [value]}
    return value


def test_deep_nesting_gets_the_same_sentence_over_http_and_the_websocket_and_the_session_goes_on(flawed):
    """Was: HTTP 500 (a game option's size recursing) at 250 levels, "the body is nested too deeply" at 100,000;
    the WebSocket "maximum recursion depth exceeded..." and the end of the session."""
    url = flawed.url(FROZEN)
    options = {"seed": 0, "options": {"desc": nested(250)}}
    over_http = httpx.post(f"{url}/reset", json=options)
    assert over_http.status_code == 400 and over_http.json()["detail"] == TOO_DEEP
    raw = b'{"seed": 0, "options": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert httpx.post(f"{url}/reset", content=raw).json()["detail"] == TOO_DEEP
    with GenericEnvClient(base_url=url).sync() as env:
        with pytest.raises(RuntimeError, match=TOO_DEEP):
            env.reset(**options)
        assert env.reset(seed=0).observation["legal_actions"]
    with websocket(url) as socket:
        message = '{"type": "reset", "data": {"seed": 0, "options": ' + "[" * 100_000 + "]" * 100_000 + "}}"
        reply = frame_reply(socket, message)
        assert reply["type"] == "error" and reply["data"]["message"] == TOO_DEEP
        assert frame_reply(socket, json.dumps({"type": "reset", "data": {"seed": 0}}))["type"] == "observation"
    assert "Traceback" not in flawed.log_text()


BAD_MESSAGES = [
    # (raw message, the words of the sentence both transports answer with)
    ("[1, 2]", "the request must be a JSON object, got list"),
    ('"reset"', "the request must be a JSON object, got str"),
    ("null", "the request must be a JSON object, got NoneType"),
    ('{"type": "reset", "data": {"seed": NaN}}', "NaN is not a JSON number"),
    ('{"type": "reset", "data": {"seed": 1e999}}', "the number 1e999 is out of range"),
    ('{"type": "step", "data": {"text": "\\ud800"}}', "not valid Unicode (a lone surrogate)"),
    ("{not json", "the request is not valid JSON"),
]


@pytest.mark.parametrize(("message", "words"), BAD_MESSAGES)
def test_a_message_that_is_no_json_object_within_bounds_gets_the_http_sentence_over_the_websocket(
    flawed, message, words
):
    """Was: the first three ended the WebSocket session with "'list' object has no attribute 'get'" (and the like),
    NaN and 1e999 were read as numbers, and the WebSocket had its own words for each of the others."""
    url = flawed.url(FROZEN)
    over_http = httpx.post(f"{url}/reset", content=message.encode())
    assert over_http.status_code == 400 and words in over_http.json()["detail"]
    with websocket(url) as socket:
        reply = frame_reply(socket, message)
        assert reply == {"type": "error", "data": {"message": over_http.json()["detail"], "code": "INVALID_JSON"}}
        assert frame_reply(socket, json.dumps({"type": "reset", "data": {"seed": 0}}))["type"] == "observation"


def test_a_stranger_s_requests_are_never_a_5xx(flawed):
    """Client-named models and paths, binary frames, huge and nested bodies, OpenEnv's other routes.

    Was: OpenEnv's task API (``/GAME/GAME/tasks`` and its kin) answered 501 Not Implemented.
    """
    base, url = flawed.base, flawed.url(FROZEN)
    rng = np.random.default_rng(0)
    requests = [
        ("POST", "/reset", {"seed": 0, "agent": "player", "opponent": "hf:../../etc/passwd"}),
        ("POST", "/reset", {"seed": 0, "game_options": {"map_name": "../../etc/passwd"}}),
        ("POST", "/reset", {"seed": 10**400}),
        ("POST", "/reset", {"seed": 0, "options": {"desc": 5}}),
        ("POST", "/reset", {"episode_id": ["x"], "state_keys": "yes"}),
        ("POST", "/step", {"session_id": ["x"], "action": {"text": "left"}}),
        ("POST", "/close", {"session_id": "../../x"}),
        ("POST", f"/{FROZEN}/tasks", {"split": "train"}),
        ("GET", f"/{FROZEN}/splits", None),
        ("POST", f"/{FROZEN}/task", {"split": "train", "index": 0}),
        ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}}),
        ("GET", "/state?session_id=" + "a" * 5000, None),
    ]
    statuses = []
    for method, path, body in requests:
        response = httpx.request(method, url + path, json=body, timeout=30)
        statuses.append(response.status_code)
        assert response.status_code < 500 and len(response.content) < 2000, (path, response.text)
    assert statuses[7:10] == [404, 404, 404]  # the task API: not offered, in one sentence
    for path in ("/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/" + "x" * 5000):
        assert httpx.get(base + path).status_code == 404
    assert httpx.post(f"{url}/reset", content=rng.bytes(2000)).status_code == 400
    assert httpx.post(f"{url}/reset", content=b"x" * (5 * 1024 * 1024)).status_code == 413
    with websocket(url) as socket:
        for frame in [rng.bytes(100), json.dumps({"type": "reset", "data": {"seed": 0, "opponent": "smollm2"}})]:
            assert frame_reply(socket, frame)["type"] == "error"
        assert frame_reply(socket, json.dumps({"type": "reset", "data": {"seed": 0}}))["type"] == "observation"
    log = flawed.log_text()
    assert "Traceback" not in log and re.search(r'HTTP/1\.1" 5\d\d', log) is None


# ------------------------------------------------------------------ the opponents offered
def test_a_game_without_an_oracle_is_not_offered_one(flawed):
    """Was: /info and the 422 listed oracle on every game; naming it then failed when the oracle had to move."""
    url = flawed.url(NO_ORACLE)
    info = httpx.get(f"{url}/info").json()
    assert info["opponents"] == ["random", "fixed:TEXT"]
    refused = httpx.post(f"{url}/reset", json={"seed": 0, "agent": "player_1", "opponent": "oracle"})
    assert refused.status_code == 422
    assert refused.json()["detail"] == (
        "opponent 'oracle' is not offered by this server; choose one of: random, fixed:TEXT "
        "(the served game has no oracle)"
    )
    with GenericEnvClient(base_url=url).sync() as env:
        with pytest.raises(RuntimeError, match=r"choose one of: random, fixed:TEXT \(the served game has no oracle\)"):
            env.reset(seed=0, agent="player_1", opponent="oracle")
        result = env.reset(seed=0, agent="player_1", opponent="random")  # what is offered plays
        assert result.observation["round"] == 1 and result.observation["agent"] == "player_1"
    assert httpx.get(f"{flawed.url(FROZEN)}/info").json()["opponents"] == ["random", "oracle", "fixed:TEXT"]
