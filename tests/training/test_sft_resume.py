"""`tsmg sft` checkpoints and `--resume`: a killed fine-tune continues exactly, its CPU budget counts each session."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import games  # noqa: F401  (registers the catalog)
from backends.tiny import build_tiny_model
from training.sft import SFTConfig, run_sft
from training.sft_checkpoints import TRAINER_STATE_FILE, RunCost, latest_checkpoint
from tsmg.apps.cli import main
from tsmg.episode import write_episodes
from tsmg.policies import OraclePolicy
from tsmg.rollout import rollout
from tsmg.run_folder import read_metrics

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=1)


def transcripts(path: Path, game: str = "FrozenLake-v0") -> Path:
    """Oracle transcripts of one map (the standard one: six decisions)."""
    write_episodes(path, rollout(game, OraclePolicy(), seeds=[0]))
    return path


def flags(episodes: Path, model: Path, out: Path, *, steps: int, every: int) -> list[str]:
    """``tsmg sft`` arguments: a LoRA fine-tune of the tiny model, two samples a step (three steps an epoch)."""
    return ["sft", "--episodes", str(episodes), "--model", f"hf:{model}", "--finetune", "lora", "--dtype", "float32",
            "--lr", "1e-2", "--max-steps", str(steps), "--batch-size", "2", "--threads", "1", "--out", str(out),
            "--checkpoint-every", str(every), "--set", "run.logging_steps=1"]  # fmt: skip


def config_of(arguments: list[str]) -> SFTConfig:
    from tsmg.apps.cli import _build_parser
    from tsmg.apps.train.sft_cli import sft_config_from_args

    return sft_config_from_args(_build_parser().parse_args(arguments))


def losses(run: Path) -> list[tuple[int, float]]:
    return [(row["step"], row["loss"]) for row in read_metrics(run / "metrics.jsonl") if "loss" in row]


def weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(run / "final" / "model.safetensors")


def kill_after_first_checkpoint(arguments: list[str], out: Path) -> None:
    """Run ``tsmg sft`` in a process and ``kill -9`` it once a checkpoint exists and a later step is logged."""
    environment = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "tsmg.apps.cli", *arguments]
    process = subprocess.Popen(command, cwd=REPO, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and process.poll() is None:
            checkpoint = latest_checkpoint(out / "checkpoints")
            steps = [row["step"] for row in read_metrics(out / "metrics.jsonl")]
            if checkpoint is not None and steps and steps[-1] > int(checkpoint.name.split("-")[1]):
                os.kill(process.pid, signal.SIGKILL)
                break
            time.sleep(0.005)
        process.wait(timeout=60)
        assert process.returncode == -signal.SIGKILL, process.stderr.read().decode()[-3000:] if process.stderr else ""
    finally:
        process.kill()
        process.wait()


def test_a_killed_fine_tune_resumes_to_the_weights_of_an_uninterrupted_one(tiny_model, tmp_path, capsys):
    episodes = transcripts(tmp_path / "oracle.jsonl")
    steps = 30
    whole = run_sft(config_of(flags(episodes, tiny_model, tmp_path / "whole", steps=steps, every=4)))
    assert whole.steps == steps and whole.resumed_from is None

    killed = tmp_path / "killed"
    arguments = flags(episodes, tiny_model, killed, steps=steps, every=4)
    kill_after_first_checkpoint(arguments, killed)
    # The killed run's folder: its newest checkpoint only (and at most a save cut short), usually rows past it.
    checkpoint = latest_checkpoint(killed / "checkpoints")
    assert checkpoint is not None and not (killed / "final").exists()
    complete = [path for path in (killed / "checkpoints").glob("checkpoint-*") if (path / TRAINER_STATE_FILE).is_file()]
    assert complete == [checkpoint] and len(list((killed / "checkpoints").glob("checkpoint-*"))) <= 2
    saved = int(checkpoint.name.split("-")[1])
    assert saved % 4 == 0 and saved < steps and losses(killed)[-1][0] >= saved
    carried, _ = RunCost.carried(checkpoint)
    assert carried > 0

    capsys.readouterr()
    began = time.process_time()
    assert main(["sft", "--resume", "--out", str(killed)]) == 0  # the run folder's own config
    second_session = time.process_time() - began
    assert f"resumed from the checkpoint of step {saved}" in capsys.readouterr().out

    # Exactly the uninterrupted run: every weight, every step's loss, each step logged once.
    expected, resumed = weights(tmp_path / "whole"), weights(killed)
    assert expected.keys() == resumed.keys()
    assert all(torch.equal(expected[name], resumed[name]) for name in expected)
    assert losses(killed) == losses(tmp_path / "whole")
    assert [step for step, _ in losses(killed)] == list(range(1, steps + 1))
    rows = read_metrics(killed / "metrics.jsonl")
    costs = [row for row in rows if "time/cpu_s" in row]
    assert costs == [rows[-1]] and rows[-1]["step"] == steps
    assert sum("train_runtime" in row for row in rows) == 1
    # The whole run's CPU: the first session's (up to its checkpoint) and the second's.
    assert rows[-1]["time/cpu_s"] > second_session
    assert rows[-1]["time/cpu_s"] == pytest.approx(carried + second_session, abs=0.5 * carried)
    assert sorted(path.name for path in killed.iterdir()) == [
        "adapter", "config.yaml", "dataset.jsonl", "final", "metrics.jsonl"
    ]  # fmt: skip
    with pytest.raises(FileExistsError, match="already holds a fine-tuned model"):
        run_sft(config_of(arguments), resume=True)


def interrupted(config: SFTConfig, at_step: int) -> None:
    """Run ``config`` and stop it with Ctrl-C (KeyboardInterrupt) once step ``at_step`` is logged."""

    def interrupt(row: dict) -> None:
        if row["step"] == at_step:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sft(config, on_log=interrupt)


def test_a_resumed_run_counts_the_sessions_before_against_its_cpu_budget(tiny_model, tmp_path):
    episodes = transcripts(tmp_path / "oracle.jsonl")
    config = config_of(flags(episodes, tiny_model, tmp_path / "run", steps=40, every=10))
    interrupted(config, at_step=12)
    checkpoint = latest_checkpoint(tmp_path / "run" / "checkpoints")
    assert checkpoint is not None and checkpoint.name == "checkpoint-10"
    carried, _ = RunCost.carried(checkpoint)
    # A save that a kill cut short (the Trainer writes trainer_state.json last) is not resumed from.
    shutil.copytree(
        checkpoint, checkpoint.with_name("checkpoint-20"), ignore=shutil.ignore_patterns(TRAINER_STATE_FILE)
    )
    # A budget the first session already spent: the resumed run stops after one step (as tsmg train does).
    budget = config.run.model_copy(update={"max_cpu_seconds": 0.9 * carried})
    result = run_sft(config.model_copy(update={"run": budget}), resume=True)
    assert result.resumed_from == 10 and result.steps == 11
    assert result.cpu_seconds > carried
    assert [step for step, _ in losses(tmp_path / "run")] == list(range(1, 12))
    assert read_metrics(tmp_path / "run" / "metrics.jsonl")[-1]["time/cpu_s"] == result.cpu_seconds
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_run_killed_before_its_first_checkpoint_starts_afresh_on_resume(tiny_model, tmp_path):
    episodes = transcripts(tmp_path / "oracle.jsonl")
    config = config_of(flags(episodes, tiny_model, tmp_path / "run", steps=3, every=10))
    interrupted(config, at_step=2)
    assert latest_checkpoint(tmp_path / "run" / "checkpoints") is None
    result = run_sft(config, resume=True)
    assert result.resumed_from is None and result.steps == 3
    assert [step for step, _ in losses(tmp_path / "run")] == [1, 2, 3]


def test_a_started_folder_needs_resume_and_a_resumed_run_its_config_and_dataset(tiny_model, tmp_path, capsys):
    episodes = transcripts(tmp_path / "oracle.jsonl")
    run = tmp_path / "run"
    arguments = flags(episodes, tiny_model, run, steps=20, every=4)
    interrupted(config_of(arguments), at_step=5)
    metrics = (run / "metrics.jsonl").read_text()

    def refused(command: list[str]) -> str:
        capsys.readouterr()
        assert main(command) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
        assert (run / "metrics.jsonl").read_text() == metrics and not (run / "final").exists()
        return err

    assert "already holds a started fine-tune: pass --resume, or choose another --out" in refused(arguments)
    changed = refused(["sft", "--resume", "--out", str(run), "--lr", "0.5", "--set", "run.logging_steps=2"])
    assert "another configuration (changed: optim.lr, run.logging_steps)" in changed
    # How long and how fast may change; the transcripts may not.
    transcripts(episodes, game="FrozenLake-NoSlip-v0")
    assert "was fine-tuned on other samples" in refused([*arguments, "--resume", "--max-cpu-seconds", "100"])
