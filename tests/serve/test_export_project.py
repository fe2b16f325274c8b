"""``tsmg serve --export-project``: an OpenEnv project that OpenEnv's tooling validates and that serves.

Docker is absent here, so the project is "built" by starting its server directly with the
command its README documents (``python -m server.app``, a real process on loopback), and played
with OpenEnv's own client; ``openenv validate`` checks the folder and the running server, and
verifiers' ``vf-build``/``OpenEnvEnv`` code reads the project as it would before deploying it.
"""

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import tsmg
from tsmg.apps.serve.environment import ServeSettings
from tsmg.apps.serve.limits import OptionRules
from tsmg.apps.serve.project import export_project, read_project

ROOT = Path(__file__).resolve().parents[2]
OPENENV = Path(sys.executable).with_name("openenv")
USER_GAMES = ROOT / "tests" / "data" / "user-games" / "my_games.py.txt"


def _env(**extra):
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", **extra}


def _start(project, log, **env):
    """The README's command, from the project's folder; the URL it prints."""
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "server.app", "--port", "0"],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=_env(**env),
            cwd=project,
        )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()
        lines = [line for line in log.read_text().splitlines() if line.startswith("tsmg serve: ")]
        if lines:
            base = lines[0].split(" on ", 1)[1].split()[0]
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    return process, base
            except httpx.HTTPError:
                pass
        time.sleep(0.2)
    process.kill()
    raise AssertionError(f"the exported server did not start:\n{log.read_text()}")


def _stop(process):
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def test_a_users_game_exports_validates_starts_and_keeps_the_operators_limits(tmp_path, monkeypatch):
    from tsmg.apps.cli import main

    shutil.copyfile(USER_GAMES, tmp_path / "my_games.py")
    project = tmp_path / "guess-env"
    monkeypatch.chdir(tmp_path)
    try:  # the CLI in this process (its imports are loaded already); the game is registered for this test only
        assert main([
            "--import", "my_games.py", "serve", "--game", "my/GuessNumber-v0", "--client-options", "high",
            "--option-limit", "high=32", "--opponent", "oracle", "--export-project", str(project),
        ]) == 0  # fmt: skip
    finally:
        tsmg.registry.unregister("my/GuessNumber-v0")
    for name in ("openenv.yaml", "pyproject.toml", "README.md", "client.py", "models.py", "server/app.py",
                 "server/Dockerfile", "server/tsmg_serve.json", "vendor/tsmg/pyproject.toml",
                 "my_games.py"):  # fmt: skip
        assert (project / name).is_file(), name
    assert (project / "vendor/tsmg/tsmg/apps/serve/app.py").is_file()  # tsmg travels with it, for the image's uv sync
    settings = json.loads((project / "server/tsmg_serve.json").read_text())
    assert settings["entry_point"] == "my_games:GuessNumber" and settings["game_options"] == {"max_steps": 8}
    assert settings["client_options"] == ["high"] and settings["option_limits"] == {"high": 32.0}
    assert settings["opponent"] == "oracle" and settings["token_required"] is False

    validated = subprocess.run([str(OPENENV), "validate", str(project)], capture_output=True, text=True, timeout=300)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert "PASS  static.manifest" in validated.stdout

    process, base = _start(project, tmp_path / "server.log")
    try:
        with GenericEnvClient(base_url=base).sync() as env:  # the game at the root, as one environment per server
            result = env.reset(seed=3)
            assert result.observation["text"] == "Guess my number between 1 and 16."
            result = env.step({"text": "5"})
            assert result.observation["info"] == {"valid": True, "reason": None, "action": "5"}
            env.reset(seed=3, game_options={"high": 20})  # allowed, under the limit
            with pytest.raises(Exception, match="over this server's limit of 32"):
                env.reset(seed=3, game_options={"high": 64})
            with pytest.raises(Exception, match="does not let clients set it"):
                env.reset(seed=3, game_options={"max_steps": 99})
        # The project's own typed client (what TRL's and AutoEnv's OpenEnv routes import), loaded from its file.
        spec = importlib.util.spec_from_file_location("exported_client", project / "client.py")
        client = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(client)
        with client.MyGuessnumberV0Env(base_url=base).sync() as typed:
            result = typed.reset(seed=3)
            assert result.observation.legal_actions[:2] == ["1", "2"] and not result.done
        runtime = subprocess.run(
            [str(OPENENV), "validate", "--url", base, "--json"], capture_output=True, text=True, timeout=120
        )
        report = json.loads(runtime.stdout)
        assert report["passed"] and len(report["criteria"]) == 6, report

        # What verifiers would deploy: vf-build reads the app, port and contract off the folder, and
        # OpenEnvEnv's first calls on the started server (health, schema, contract) succeed.
        from verifiers.legacy.envs.integrations.openenv_env import OpenEnvEnv
        from verifiers.legacy.scripts import build

        assert build._read_project_app(project) == "server.app:app" and build._read_project_port(project) == 8000
        assert build._detect_contract(project, "server.app:app") == "gym"
        env = OpenEnvEnv(openenv_project=project, prompt_renderer=lambda observation, **_: [], num_eval_examples=0)
        assert env._check_health(base)[0]
        schema = httpx.get(f"{base}/schema", timeout=10).json()
        env._assert_contract_matches_schema("gym", schema["action"])
        with pytest.raises(Exception, match="vf-build"):
            env._read_build_manifest(project)  # the image is built and registered by vf-build, in Prime's cloud
    finally:
        _stop(process)


def test_a_token_set_at_export_is_required_where_the_project_runs(tmp_path, monkeypatch):
    settings = ServeSettings(opponent="oracle", option_rules=OptionRules(allowed=frozenset()))
    project = export_project(tmp_path / "ttt", "TicTacToe-v0", settings, require_token=True)
    assert sorted(path.name for path in project.glob("*.py")) == ["__init__.py", "client.py", "models.py"]
    assert "SECRET" not in (project / "server/tsmg_serve.json").read_text()
    # The reward range openenv.yaml declares: random play over 8 seeds both wins and loses tic-tac-toe.
    assert "  reward:\n    range: [-1.0, 1.0]\n" in (project / "openenv.yaml").read_text()
    monkeypatch.delenv("TSMG_SERVE_TOKEN", raising=False)
    with pytest.raises(ValueError, match="exported to require a token: set TSMG_SERVE_TOKEN"):
        read_project(project / "server/tsmg_serve.json")
    monkeypatch.setenv("TSMG_SERVE_TOKEN", "SECRET")
    served = read_project(project / "server/tsmg_serve.json")
    assert served.settings.token == "SECRET" and served.settings.option_rules.allowed == frozenset()


def test_bad_exports_are_refused_in_one_sentence(tmp_path, capsys):
    from tsmg.apps.cli import main

    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    for arguments, expected in (
        (["--game", "TicTacToe-v0", "--export-project", str(tmp_path / "full")], "is not an empty directory"),
        (
            ["--game", "TicTacToe-v0", "--game", "FrozenLake-v0", "--export-project", str(tmp_path / "two")],
            "give exactly one --game",
        ),  # fmt: skip
        (
            ["--game", "http://127.0.0.1:9/TicTacToe-v0", "--export-project", str(tmp_path / "url")],
            "is served elsewhere already",
        ),  # fmt: skip
    ):
        assert main(["serve", *arguments]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and expected in err, err
    assert not (tmp_path / "two").exists() and not (tmp_path / "url").exists()


def exported_distributions(project):
    """The distributions the project's ``uv sync`` installs from tsmg: its pyproject's ``tsmg[EXTRAS]`` resolved
    through the vendored tsmg's own extras (``tsmg[hf]`` inside ``train`` included)."""
    dependencies = tomllib.loads((project / "pyproject.toml").read_text())["project"]["dependencies"]
    vendored = tomllib.loads((project / "vendor/tsmg/pyproject.toml").read_text())["project"]
    pending, names = list(dependencies), set()
    while pending:
        requirement = Requirement(pending.pop())
        if requirement.name != "tsmg":
            names.add(canonicalize_name(requirement.name))
            continue
        pending += vendored["dependencies"]
        for extra in requirement.extras:
            pending += vendored["optional-dependencies"][extra]
    return names


LANGUAGE_MODEL_STACK = {"torch", "transformers", "peft", "accelerate"}


@pytest.mark.parametrize(
    ("game_id", "settings", "extras", "needed", "not_needed"),
    [
        ("TicTacToe-v0", ServeSettings(), "serve", {"openenv", "uvicorn"}, LANGUAGE_MODEL_STACK | {"textarena"}),
        ("TextArena/TicTacToe-v0", ServeSettings(), "serve,textarena", {"textarena"}, LANGUAGE_MODEL_STACK),
        (
            "OpenSpiel/tic_tac_toe-v0",
            ServeSettings(opponent="openspiel-mcts", opponent_models=("openspiel-mcts",)),
            "openspiel,serve",
            {"open-spiel"},
            LANGUAGE_MODEL_STACK | {"openai"},
        ),
        (
            "TicTacToe-v0",
            ServeSettings(opponent_models=("hf:/models/tiny",)),
            "hf,serve",
            {"torch", "transformers", "peft"},
            {"textarena", "open-spiel", "openai"},
        ),
    ],
    ids=["catalog", "textarena", "openspiel-mcts", "hf-opponent"],
)
def test_the_exported_dependencies_are_what_the_game_and_its_opponents_need(
    tmp_path, game_id, settings, extras, needed, not_needed
):
    """Was: a TextArena game exported tsmg[serve] (the image could not make the game) and OpenSpiel's MCTS
    tsmg[hf,openspiel,serve] (torch, transformers and peft for a bot that uses none of them)."""
    adapted_from = {"TextArena": "textarena", "OpenSpiel": "pyspiel"}.get(game_id.split("/")[0])
    if adapted_from is not None:
        pytest.importorskip(adapted_from)
    project = export_project(tmp_path / "env", game_id, settings)
    dependencies = tomllib.loads((project / "pyproject.toml").read_text())["project"]["dependencies"]
    assert dependencies[0] == f"tsmg[{extras}]"
    installed = exported_distributions(project)
    assert needed <= installed and not installed & not_needed, sorted(installed)
