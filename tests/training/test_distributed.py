"""Several training processes (torchrun over gloo, on the CPU): FSDP2 and DDP give the one-process run.

The launches are the slowest tests of the suite, so each serves several assertions:

* ``bench/fsdp_memory.py`` trains the same three updates by one process and by two under FSDP2
  (its run folders and its JSON line): episodes, losses, final weights, the memory each process
  holds, the sharded checkpoints;
* a LoRA run with a KL term and the rollout-wide entropy bonus under FSDP2 against one process;
* the FSDP run launched again and one rank killed with SIGKILL mid-run, then ``--resume``: it must
  continue exactly as the one-process run (the other rank must not hang);
* a DDP run where every process is killed, then ``--resume``;
* a rank that hangs in a collective: the others stop after ``distributed.timeout_s`` with a message.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.small_lake import REPO
from training.checkpoint import latest_checkpoint
from training.config import DistributedConfig, TrainConfig
from training.distributed import (
    DistributedSetupError,
    World,
    check_world_divides_groups,
    fsdp_settings,
    resolve_strategy,
)
from training.run_log import METRICS_FILE, read_metrics
from training.trainer import train
from tsmg.episode import read_episodes


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def torchrun(processes: int, *arguments: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={processes}",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        *arguments,
    ]


ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}


def launch(processes: int, config_file: Path, *flags: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    command = torchrun(processes, "-m", "tsmg.apps.cli", "train", "--config", str(config_file), *flags)
    return subprocess.run(command, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=timeout_s)


def with_out(config: TrainConfig, out: Path, **run: object) -> TrainConfig:
    return config.model_copy(update={"run": config.run.model_copy(update={"out_dir": str(out), **run})})


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    """bench/fsdp_memory.py: three updates by one process and by two under FSDP2."""
    out = tmp_path_factory.mktemp("fsdp-bench")
    command = [sys.executable, "bench/fsdp_memory.py", "--processes", "2", "--updates", "3", "--out", str(out)]
    done = subprocess.run(command, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return out, figures


def numbers(row, prefix):
    return {key: value for key, value in row.items() if key.startswith(prefix)}


def without_latency(value):
    if isinstance(value, dict):
        return {key: without_latency(item) for key, item in value.items() if key != "latency_s"}
    if isinstance(value, list):
        return [without_latency(item) for item in value]
    return value


def assert_same_weights(found: Path, expected: Path) -> None:
    weights, reference = load_file(str(found)), load_file(str(expected))
    assert weights.keys() == reference.keys()
    # atol: AdamW divides by the root of the second moment, so an element whose gradients are near 0
    # turns a last-bit difference of the ranks' summation order into up to a few 1e-5 after 3 updates
    # (seen: one element of 4,096 at 1.2e-5, every other within 1.5e-6); a wrong gradient moves all.
    for name, tensor in reference.items():
        torch.testing.assert_close(weights[name], tensor, rtol=1e-4, atol=5e-5, msg=name)


def assert_same_losses(rows, reference_rows) -> None:
    assert [row["step"] for row in rows] == [row["step"] for row in reference_rows]
    for mine, reference in zip(rows, reference_rows, strict=True):
        for prefix in ("rollout/", "eval/", "sampler/", "credit/"):
            assert numbers(mine, prefix) == numbers(reference, prefix), (mine["step"], prefix)
        losses = numbers(reference, "loss/")
        assert numbers(mine, "loss/").keys() == losses.keys()
        for key, value in losses.items():
            assert mine[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
        assert mine.get("optim/steps") == reference.get("optim/steps")
        if reference["step"] > 0:  # step 0 is the evaluation before training
            # The norm before clipping: AdamW would hide gradients averaged instead of summed, the norm does not.
            assert mine["optim/grad_norm"] == pytest.approx(reference["optim/grad_norm"], rel=1e-4)


# --------------------------------------------------------------------------- FSDP2 = one process
def test_fsdp_plays_the_episodes_of_one_process(bench):
    out, _ = bench
    one, two = (list(read_episodes(out / arm / "episodes.jsonl")) for arm in ("one", "fsdp"))
    assert len(one) == len(two) == 3 * 16
    for mine, reference in zip(two, one, strict=True):
        mine_record = without_latency(json.loads(mine.to_json()))
        reference_record = without_latency(json.loads(reference.to_json()))
        for step_mine, step_reference in zip(mine_record.pop("steps"), reference_record.pop("steps"), strict=True):
            assert step_mine.pop("logprobs") == pytest.approx(step_reference.pop("logprobs"), abs=1e-5)
            step_mine["policy"] = step_reference["policy"] = None
            assert step_mine == step_reference
        mine_record["policies"] = reference_record["policies"] = None
        assert mine_record == reference_record


def test_fsdp_makes_the_update_of_one_process(bench):
    out, _ = bench
    assert_same_losses(read_metrics(out / "fsdp" / METRICS_FILE), read_metrics(out / "one" / METRICS_FILE))
    assert_same_weights(out / "fsdp" / "final" / "model.safetensors", out / "one" / "final" / "model.safetensors")


def test_fsdp_holds_half_the_parameters_and_optimizer_state_per_process(bench):
    _, figures = bench
    one = figures["one"][0]
    for held in figures["fsdp"]:
        assert held["optimizer"] > 0  # the optimizer has stepped: its moments exist
        assert 0.45 <= held["total"] / one["total"] <= 0.55, (held, one)
    assert sum(held["parameters"] for held in figures["fsdp"]) == pytest.approx(one["parameters"], rel=0.02)
    assert figures["ratio_largest_process"] <= 0.55


def test_fsdp_checkpoints_are_sharded_and_load_into_one_process(bench, tmp_path):
    out, _ = bench
    checkpoint = out / "fsdp" / "checkpoints" / "step-3"
    assert sorted(path.name for path in checkpoint.iterdir()) == ["rng.pt", "scheduler.pt", "sharded", "state.json"]
    assert len(list((checkpoint / "sharded").glob("*.distcp"))) == 2  # one shard per process
    # One process resumes the two-process checkpoint (DCP reshards on load) for one more update,
    # exactly as the one-process run continues from its own step-3 checkpoint.
    config = TrainConfig.from_yaml(out / "fsdp.yaml")
    for arm in ("fsdp", "one"):
        target = tmp_path / arm
        (target / "checkpoints").mkdir(parents=True)
        os.symlink(out / arm / "checkpoints" / "step-3", target / "checkpoints" / "step-3")
        with_out(config, target).to_yaml(target / "config.yaml")
    continued = {arm: train(with_out(config, tmp_path / arm, updates=4), resume=True) for arm in ("fsdp", "one")}
    assert continued["fsdp"].resumed_from == continued["one"].resumed_from == 3
    assert_same_losses(continued["fsdp"].metrics[-1:], continued["one"].metrics[-1:])
    assert_same_weights(
        tmp_path / "fsdp" / "final" / "model.safetensors", tmp_path / "one" / "final" / "model.safetensors"
    )


# --------------------------------------------------------------------------- LoRA under FSDP2
def test_fsdp_lora_with_kl_and_rollout_entropy_trains_as_one_process(bench, tmp_path):
    out, _ = bench
    base = TrainConfig.from_yaml(out / "fsdp.yaml")
    config = base.model_copy(
        update={
            "model": base.model.model_copy(update={"finetune": "lora", "lora_r": 4}),
            "loss": base.loss.model_copy(update={"kl_beta": 0.05, "entropy_coef": 0.01, "entropy_scope": "rollout"}),
            "optim": base.optim.model_copy(update={"lr": 5e-3}),
            # FSDP samples through the adapter (sharded weights get no merged copy): so does the one
            # process here, so that the two arms sample token for token alike.
            "rollout": base.rollout.model_copy(update={"merged_adapter": "off"}),
        }
    )
    config = TrainConfig.model_validate(config.model_dump())  # re-validated with its new fields
    one = train(with_out(config, tmp_path / "one", updates=2, eval_every=2, episodes_every=0))
    two = with_out(config, tmp_path / "two", updates=2, eval_every=2, episodes_every=0)
    two.to_yaml(tmp_path / "two.yaml")
    launched = launch(2, tmp_path / "two.yaml")
    assert launched.returncode == 0, launched.stderr[-4000:]
    assert_same_losses(read_metrics(tmp_path / "two" / METRICS_FILE), one.metrics)
    assert any(row.get("loss/rollout_entropy") for row in one.metrics)
    assert_same_weights(
        tmp_path / "two" / "adapter" / "adapter_model.safetensors", one.adapter / "adapter_model.safetensors"
    )
    assert_same_weights(tmp_path / "two" / "final" / "model.safetensors", one.final_model / "model.safetensors")
    assert launched.stdout.count("final model:") == 1  # rank 0 speaks for all


# --------------------------------------------------------------------------- kill -9 and --resume
def rank_pids(launcher: subprocess.Popen[bytes]) -> dict[int, int]:
    """The training processes of a torchrun launch, by rank (read from /proc)."""
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            parent = int(next(line for line in status.splitlines() if line.startswith("PPid:")).split()[1])
            if parent != launcher.pid:
                continue
            variables = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, StopIteration):
            continue
        for variable in variables:
            if variable.startswith(b"RANK="):
                found[int(variable[5:])] = int(entry.name)
    return found


def run_and_kill(config_file: Path, out: Path, victims: str) -> None:
    """Launch two processes, SIGKILL ``victims`` ('rank1' or 'all') once a checkpoint exists and an update is logged."""
    command = torchrun(2, "-m", "tsmg.apps.cli", "train", "--config", str(config_file), "--quiet")
    launcher = subprocess.Popen(command, cwd=REPO, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and launcher.poll() is None:
            steps = [row["step"] for row in read_metrics(out / METRICS_FILE)]
            if latest_checkpoint(out / "checkpoints") is not None and steps and steps[-1] >= 1:
                break
            time.sleep(0.02)
        assert launcher.poll() is None, launcher.stderr.read().decode()[-4000:] if launcher.stderr else ""
        pids = rank_pids(launcher)
        assert sorted(pids) == [0, 1], pids
        for rank in [1] if victims == "rank1" else [0, 1]:
            os.kill(pids[rank], signal.SIGKILL)
        # The survivor must not wait forever for the dead rank: the launch ends, and fails.
        launcher.wait(timeout=120)
        assert launcher.returncode != 0
    finally:
        launcher.kill()
        launcher.wait()


def test_kill_9_of_one_fsdp_rank_then_resume_continues_exactly(bench, tmp_path):
    out, _ = bench
    run = tmp_path / "killed"
    config = with_out(TrainConfig.from_yaml(out / "fsdp.yaml"), run)
    config.to_yaml(tmp_path / "config.yaml")
    run_and_kill(tmp_path / "config.yaml", run, "rank1")
    saved = int(latest_checkpoint(run / "checkpoints").name.split("-")[1])
    assert saved < 3
    resumed = launch(2, tmp_path / "config.yaml", "--resume")
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert f"resumed from the checkpoint of update {saved}" in resumed.stdout
    assert_same_losses(read_metrics(run / METRICS_FILE), read_metrics(out / "one" / METRICS_FILE))
    assert_same_weights(run / "final" / "model.safetensors", out / "one" / "final" / "model.safetensors")
    assert not [path for path in (run / "checkpoints").iterdir() if not path.name.startswith("step-")]


def test_kill_9_of_every_ddp_process_then_resume_continues_exactly(bench, tmp_path):
    out, _ = bench
    run = tmp_path / "killed"
    config = with_out(TrainConfig.from_yaml(out / "one.yaml"), run)
    config = config.model_copy(update={"distributed": DistributedConfig(strategy="ddp")})
    config.to_yaml(tmp_path / "config.yaml")
    run_and_kill(tmp_path / "config.yaml", run, "all")
    resumed = launch(2, tmp_path / "config.yaml", "--resume")
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert "resumed from the checkpoint of update" in resumed.stdout
    assert_same_losses(read_metrics(run / METRICS_FILE), read_metrics(out / "one" / METRICS_FILE))
    assert_same_weights(run / "final" / "model.safetensors", out / "one" / "final" / "model.safetensors")
    assert (run / "checkpoints" / "step-3" / "model").is_dir()  # DDP keeps one process's checkpoint format


# --------------------------------------------------------------------------- bad input, no hang
HANG = """
import sys, time
from training.distributed import collective_failure, current_world
world = current_world(timeout_s=float(sys.argv[1]))
if world.rank == 1:
    time.sleep(60)  # alive, but never joins the collective
else:
    try:
        world.gather("hello")
    except Exception as error:
        print("MESSAGE " + str(collective_failure(error, world.size)), flush=True)
        sys.exit(3)
"""


def test_a_rank_that_hangs_in_a_collective_stops_the_others_with_a_message(tmp_path):
    script = tmp_path / "hang.py"
    script.write_text(HANG)
    began = time.monotonic()
    done = subprocess.run(torchrun(2, str(script), "3"), cwd=REPO, env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert time.monotonic() - began < 60  # the timeout, not the sleeping rank, ended it
    message = next(line for line in done.stdout.splitlines() if line.startswith("MESSAGE "))
    assert "--resume" in message and "distributed.timeout_s" in message, message


def test_a_world_that_does_not_divide_the_groups_is_refused():
    check_world_divides_groups(World(rank=0, size=2), 4)
    with pytest.raises(DistributedSetupError, match=r"rollout.groups_per_update \(5\).*3 training processes.*3 or 6"):
        check_world_divides_groups(World(rank=0, size=3), 5)
    with pytest.raises(DistributedSetupError, match=r"to 4, or launch"):
        check_world_divides_groups(World(rank=0, size=4), 2)


def test_accelerate_fsdp_settings_are_read_and_what_cannot_be_honoured_is_named(monkeypatch):
    config = DistributedConfig()
    assert resolve_strategy("auto", World()) == "single"
    assert resolve_strategy("auto", World(0, 2)) == "ddp"
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    monkeypatch.setenv("FSDP_VERSION", "2")
    monkeypatch.setenv("FSDP_RESHARD_AFTER_FORWARD", "false")
    monkeypatch.setenv("FSDP_AUTO_WRAP_POLICY", "TRANSFORMER_BASED_WRAP")
    monkeypatch.setenv("FSDP_TRANSFORMER_CLS_TO_WRAP", "LlamaDecoderLayer")
    assert resolve_strategy("auto", World(0, 2)) == "fsdp"
    with pytest.raises(DistributedSetupError, match="distributed.strategy is 'ddp'"):
        resolve_strategy("ddp", World(0, 2))
    settings = fsdp_settings(config, lora=True)
    assert settings.reshard_after_forward is False and settings.layer_classes == ("LlamaDecoderLayer",)
    assert settings.source == "accelerate's FSDP config"
    monkeypatch.setenv("FSDP_VERSION", "1")
    with pytest.raises(DistributedSetupError, match=r"fsdp_version\).*LoRA.*--fsdp_version 2"):
        fsdp_settings(config, lora=True)
    monkeypatch.setenv("FSDP_VERSION", "2")
    monkeypatch.setenv("FSDP_ACTIVATION_CHECKPOINTING", "true")
    with pytest.raises(DistributedSetupError, match="fsdp_activation_checkpointing"):
        fsdp_settings(config, lora=False)
    monkeypatch.delenv("ACCELERATE_USE_FSDP")
    if not torch.cuda.is_available():
        with pytest.raises(DistributedSetupError, match="distributed.fsdp_cpu_offload.*needs GPUs"):
            fsdp_settings(DistributedConfig(fsdp_cpu_offload=True), lora=False)
