"""Training on two processes (torchrun over gloo, on the CPU) gives the run one process gives."""

import os
import socket
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file
from test_trainer import REPO, make_config

from training.config import TrainConfig
from training.run_log import METRICS_FILE, read_metrics
from training.trainer import base_model_source, train


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def launch(processes: int, config_file, timeout_s: float = 240) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={processes}",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        "-m",
        "tsmg.cli",
        "train",
        "--config",
        str(config_file),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout_s)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same three updates trained by one process in this test and by two under torchrun."""
    folder = tmp_path_factory.mktemp("distributed")
    model = base_model_source(
        TrainConfig(
            rollout={"game_id": "FrozenLake-v0"}, model={"spec": "tiny", "tiny": {"tokenizer_corpus": "prose"}}
        ),
        folder / "model",
    )

    def config(out):
        # micro-batches of 4 so that each rank's share of a step spans several of them
        return make_config(
            out,
            model,
            optim={"micro_batch_size": 4, "grad_accumulation": None},
            run={"updates": 3, "eval_every": 3, "eval_episodes": 8, "checkpoint_every": 1, "keep_last": 2},
        )

    single = train(config(folder / "one"))
    two = config(folder / "two")
    config_file = folder / "two.yaml"
    two.to_yaml(config_file)
    launched = launch(2, config_file)
    assert launched.returncode == 0, launched.stderr[-4000:]
    return single, folder / "two", launched


def numbers(row, prefix):
    return {key: value for key, value in row.items() if key.startswith(prefix)}


def test_two_processes_play_the_same_episodes(runs):
    single, two, _ = runs
    rows = read_metrics(two / METRICS_FILE)
    assert [row["step"] for row in rows] == [row["step"] for row in single.metrics] == [0, 1, 2, 3]
    for mine, reference in zip(rows, single.metrics, strict=True):
        assert numbers(mine, "rollout/") == numbers(reference, "rollout/")
        assert numbers(mine, "eval/") == numbers(reference, "eval/")
        assert numbers(mine, "sampler/") == numbers(reference, "sampler/")


def test_two_processes_make_the_same_update(runs):
    single, two, _ = runs
    for mine, reference in zip(read_metrics(two / METRICS_FILE), single.metrics, strict=True):
        losses = numbers(reference, "loss/")
        assert numbers(mine, "loss/").keys() == losses.keys()
        for key, value in losses.items():
            assert mine[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
        assert mine.get("optim/steps") == reference.get("optim/steps")
    weights = load_file(str(two / "final" / "model.safetensors"))
    expected = load_file(str(single.final_model / "model.safetensors"))
    assert weights.keys() == expected.keys()
    for name, tensor in expected.items():
        torch.testing.assert_close(weights[name], tensor, rtol=1e-4, atol=1e-5, msg=name)


def test_only_rank_0_writes_and_speaks(runs):
    _, two, launched = runs
    assert sorted(path.name for path in (two / "checkpoints").iterdir()) == ["step-2", "step-3"]
    assert launched.stdout.count("final model:") == 1
    assert launched.stdout.count("training hf:") == 1
