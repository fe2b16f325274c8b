"""What `tsmg eval`, `tsmg train` and `tsmg rollout` say at their start and end, and on Ctrl-C: real runs.

Each command ends with the run folder and the `tsmg view` command; a rerun of an eval says how
many planned episodes it found; a resumed training says the update it resumes from before it
trains; an interrupt (SIGINT, in a subprocess) prints the exact command that resumes, and running
that command resumes the same folder.
"""

import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tsmg.apps.cli import main
from tsmg.run_folder import EPISODES_FILE

REPO = Path(__file__).resolve().parents[1]

#: A one-move game whose move takes 20 ms, so that an evaluation is still running when SIGINT arrives.
SLOW_GAME = textwrap.dedent(
    """
    import time

    import tsmg
    from tsmg import RulesGame
    from tsmg.answers import MoveNames


    class SlowCoin(RulesGame):
        def initial_state(self, rng, options):
            return (str(rng.choice(["heads", "tails"])), None)

        def has_random_start(self):
            return True

        def transition(self, state, actions, rng):
            time.sleep(0.02)
            guess = actions["player"]
            return (state[0], guess), {"player": 1.0 if guess == state[0] else 0.0}

        def is_terminal(self, state):
            return state[1] is not None

        def legal_moves(self, state, agent):
            return ["heads", "tails"]

        def render(self, state, agent):
            return f"The coin shows {state[0]}. Answer heads or tails."

        def parse_action(self, agent, text, state):
            return MoveNames({"heads": "heads", "tails": "tails"}).read(text)

        def action_text(self, agent, action):
            return action


    tsmg.register("slow/Coin-v0", SlowCoin, max_steps=1)
    """
)


def lines_of(path):
    return path.read_text().splitlines() if path.exists() else []


def test_eval_names_its_folder_and_the_view_command_and_a_rerun_says_what_it_found(tmp_path, capsys):
    out = tmp_path / "eval-fl"
    command = ["eval", "--game", "FrozenLake-v0", "--model", "random", "--episodes", "6", "--out", str(out)]
    assert main([*command, "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "resuming" not in printed  # a fresh folder
    assert printed.splitlines()[-2:] == [f"run folder: {out}", f"see it: tsmg view {out}"]

    # An interrupted run: four of the six episodes are in the folder; the rerun says so first and plays the rest.
    (out / EPISODES_FILE).write_text("\n".join(lines_of(out / EPISODES_FILE)[:4]) + "\n")
    assert main([*command, "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[0] == f"resuming: 4 of 6 episodes present in {out}; playing the 2 missing"
    assert len(lines_of(out / EPISODES_FILE)) == 6
    assert main([*command, "--no-progress"]) == 0
    assert (
        capsys.readouterr().out.splitlines()[0] == f"resuming: 6 of 6 episodes present in {out}; nothing left to play"
    )


def test_rollout_with_out_names_the_view_command(tmp_path, capsys):
    out = tmp_path / "rollout"
    assert main(["rollout", "FrozenLake-v0", "--episodes", "3", "--out", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"see it: tsmg view {out}"


def test_an_interrupted_eval_prints_the_command_that_resumes_it(tmp_path, capsys, monkeypatch):
    (tmp_path / "slow_games.py").write_text(SLOW_GAME)
    out = tmp_path / "runs" / "slow"
    typed = ["--import", "slow_games", "eval", "--game", "slow/Coin-v0", "--model", "random", "--episodes", "300"]
    typed += ["--concurrency", "1", "--no-progress", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen(
        [sys.executable, "-m", "tsmg.apps.cli", *typed],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None and len(lines_of(out / EPISODES_FILE)) < 3:
        time.sleep(0.02)
    assert process.poll() is None, process.communicate()
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stdout + stderr
    expected = f"interrupted; resume with: tsmg {shlex.join(typed)}"
    assert stderr.strip().splitlines()[-1] == expected, stderr
    kept = len(lines_of(out / EPISODES_FILE))
    assert 3 <= kept < 300 and "episodes completed" not in stdout

    # The printed command, run as printed (from the same folder: --import names a module there), resumes.
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(shlex.split(expected.removeprefix("interrupted; resume with: tsmg "))) == 0
    printed = capsys.readouterr().out
    assert (
        printed.splitlines()[0]
        == f"resuming: {kept} of 300 episodes present in {out}; playing the {300 - kept} missing"
    )
    episodes = [json.loads(line)["episode_id"] for line in lines_of(out / EPISODES_FILE)]
    assert len(episodes) == len(set(episodes)) == 300


def train_config(tmp_path, model_dir, out, updates, tensorboard=False):
    """A config file for a few quick updates of the small lake (every update carries signal)."""
    import yaml

    from tests.small_lake import small_lake_data

    config = small_lake_data(
        out,
        model_dir,
        rollout={"groups_per_update": 2},
        optim={"micro_batch_size": 8},
        run={"updates": updates, "tensorboard": tensorboard, "checkpoint_every": 1},
    )
    path = tmp_path / f"{out.name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_train_names_its_folder_tensorboard_and_a_resume_says_its_update_first(tiny_model, tmp_path, capsys):
    out = tmp_path / "fl"
    config = train_config(tmp_path, tiny_model, out, updates=2, tensorboard=True)
    assert main(["train", "--config", str(config), "--quiet"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[-3:] == [
        f"run folder: {out}",
        f"see it: tsmg view {out}",
        f"live curves: tensorboard --logdir {out / 'tensorboard'}",
    ]
    assert any((out / "tensorboard").iterdir())  # the events the line points at

    assert main(["train", "--resume", "--out", str(out), "--updates", "3"]) == 0
    printed = capsys.readouterr().out.splitlines()
    resumed = f"resumed from update 2 (checkpoint {out / 'checkpoints' / 'step-2'})"
    assert printed[1] == resumed, printed  # right after the "training ..." line, before any update
    assert printed.index(resumed) < next(i for i, line in enumerate(printed) if line.startswith("update 3/3"))


def test_an_interrupted_train_prints_the_command_that_resumes_it(tiny_model, tmp_path, capsys):
    out = tmp_path / "long"
    config = train_config(tmp_path, tiny_model, out, updates=1000)
    typed = ["train", "--config", str(config), "--quiet"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen(
        [sys.executable, "-m", "tsmg.apps.cli", *typed], cwd=REPO, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and process.poll() is None and not (out / "checkpoints" / "step-1").is_dir():
        time.sleep(0.05)
    assert process.poll() is None, process.communicate()
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stdout + stderr
    command = f"tsmg {shlex.join([*typed, '--out', str(out), '--resume'])}"
    lines = stderr.strip().splitlines()
    assert lines[-2] == f"interrupted; resume with: {command}", stderr
    saved = max(int(path.name.split("-")[1]) for path in (out / "checkpoints").iterdir())
    assert lines[-1].startswith(f"a resume starts from update {saved} (checkpoint ")

    # The printed command resumes the run (here for one more update than was saved).
    assert main([*shlex.split(command)[1:], "--updates", str(saved + 1)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[1].startswith(f"resumed from update {saved} (checkpoint "), printed
    rows = [json.loads(line)["step"] for line in lines_of(out / "metrics.jsonl")]
    assert rows[-1] == saved + 1
