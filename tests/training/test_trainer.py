"""The trainer on a tiny model: it learns, resumes exactly after kill -9, skips NaN updates, refuses bad configs."""

import itertools
import json
import math

import pytest
import torch

import tsmg
from tests.small_lake import REPO, comparable, killed_after_a_checkpoint, make_config
from training.config import IncompatibleGameError, TrainConfig
from training.rollout.engines import build_engine
from training.run_log import METRICS_FILE, read_metrics
from training.trainer import RunState, TrainHooks, TrainingOOMError, train
from tsmg.apps.train.cli import add_commands, config_from_args
from tsmg.episode import read_episodes


def test_training_beats_the_untrained_policy_on_held_out_episodes(tiny_model, tmp_path):
    # The standard 4x4 map (16-step limit) as the demo trains it; held-out episodes sampled at T=1.
    config = make_config(
        tmp_path / "run",
        tiny_model,
        rollout={"game_options": {}, "group_size": 8, "groups_per_update": 8},
        optim={"micro_batch_size": 64},
        run={"updates": 20, "eval_every": 20, "eval_episodes": 50, "eval_temperature": None},
    )
    result = train(config)
    (_, before), (_, after) = result.evals()
    assert before <= 0.1
    assert after >= 0.6 and after - before >= 0.5, result.evals()
    assert [row["step"] for row in result.metrics] == list(range(21))
    assert result.learning_curve is not None and result.learning_curve.is_file()
    # The final model is a plain model folder: the evaluation harness loads it as hf:DIR.
    from backends.hf import HFBackend

    assert HFBackend(result.final_model).model is not None


def test_kill_9_then_resume_continues_exactly(tiny_model, tmp_path):
    # A run in a subprocess (through the CLI), killed hard once a checkpoint exists and a later step is logged.
    out = tmp_path / "killed"
    config = make_config(out, tiny_model, run={"updates": 1000, "checkpoint_every": 2, "keep_last": 2})
    saved = killed_after_a_checkpoint(config, tmp_path)

    # Resume to three updates past the last complete checkpoint, wherever the kill landed.
    updates = saved + 3
    longer = {"run": config.run.model_copy(update={"updates": updates})}
    resumed = train(config.model_copy(update=longer), resume=True)
    assert resumed.resumed_from == saved
    assert [row["step"] for row in read_metrics(out / METRICS_FILE)] == list(range(1, updates + 1))
    assert not [path for path in (out / "checkpoints").iterdir() if not path.name.startswith("step-")]
    assert len(list((out / "checkpoints").iterdir())) <= 2

    # The same run, never interrupted, writes the same metrics (timings aside).
    reference = train(make_config(tmp_path / "reference", tiny_model, run={"updates": updates}))
    assert comparable(resumed.metrics) == comparable(reference.metrics)


def test_nan_loss_skips_the_update_and_training_goes_on(tiny_model, tmp_path):
    def poison(step, loss):
        return loss * float("nan") if step == 2 else loss

    run = {"updates": 4, "checkpoint_every": 1, "keep_last": 2, "episodes_every": 2}
    result = train(make_config(tmp_path / "run", tiny_model, run=run), hooks=TrainHooks(transform_loss=poison))
    rows = {row["step"]: row for row in result.metrics}
    assert rows[2]["loss/skipped"] == 1.0 and rows[2]["optim/steps"] == 0.0
    assert rows[3]["loss/skipped"] == 0.0 and rows[3]["optim/steps"] > 0
    assert rows[4]["loss/skipped_updates"] == 1.0 and result.skipped_updates == 1
    assert [path.name for path in sorted((tmp_path / "run" / "checkpoints").iterdir())] == ["step-3", "step-4"]
    episodes = list(read_episodes(tmp_path / "run" / "episodes.jsonl"))  # updates 2 and 4, 16 episodes each
    assert len(episodes) == 32 and {episode.episode_id.split("/")[0] for episode in episodes} == {"u2", "u4"}


def test_lora_with_kl_entropy_and_step_sampling(tiny_model, tmp_path):
    config = make_config(
        tmp_path / "run",
        tiny_model,
        model={"finetune": "lora", "lora_r": 4},
        loss={"kl_beta": 0.05, "entropy_coef": 0.01, "old_logprobs": "recompute"},
        sampler={"unit": "step", "name": "uniform-nonzero", "samples_per_update": 24},
        optim={"lr": 1e-2, "grad_accumulation": None, "micro_batch_size": 8},
        run={"updates": 2},
    )
    result = train(config)
    rows = [row for row in result.metrics if row.get("optim/steps")]
    assert rows and all(row["loss/kl_ref"] >= 0.0 and row["loss/entropy"] > 0.0 for row in rows)
    assert all(abs(row["loss/ratio_mean"] - 1.0) < 1e-4 for row in rows)  # recomputed pi_old, one step per update
    assert (result.adapter / "adapter_config.json").is_file()
    assert (result.final_model / "config.json").is_file() and not (result.final_model / "adapter_config.json").exists()


def test_lora_resume_equals_an_uninterrupted_run(tiny_model, tmp_path):
    lora = {"finetune": "lora", "lora_r": 4}
    whole = train(make_config(tmp_path / "whole", tiny_model, model=lora, optim={"lr": 1e-2}, run={"updates": 3}))
    first = make_config(tmp_path / "split", tiny_model, model=lora, optim={"lr": 1e-2}, run={"updates": 2})
    train(first)
    resumed = train(first.model_copy(update={"run": first.run.model_copy(update={"updates": 3})}), resume=True)
    assert resumed.resumed_from == 2
    assert comparable(resumed.metrics) == comparable(whole.metrics)


def test_resume_without_a_checkpoint_starts_over_cleanly(tiny_model, tmp_path):
    config = make_config(tmp_path / "run", tiny_model, run={"updates": 1})
    (tmp_path / "run").mkdir()
    config.to_yaml(tmp_path / "run" / "config.yaml")
    (tmp_path / "run" / METRICS_FILE).write_text('{"step": 1, "rollout/success_rate": 0.5}\n{"step": 2}\n')
    result = train(config, resume=True)
    assert result.resumed_from is None and [row["step"] for row in result.metrics] == [1]
    with pytest.raises(FileExistsError, match="--resume"):
        train(config)


def test_an_episode_budget_stops_the_run_and_clocks_the_schedule(tiny_model, tmp_path):
    decay = {"schedule": "linear", "min_lr_ratio": 0.1}
    by_updates = train(make_config(tmp_path / "updates", tiny_model, optim=decay, run={"updates": 3}))
    # 16 episodes per update: a budget of 48 ends at the third update, with the same learning rates throughout.
    budget = make_config(tmp_path / "episodes", tiny_model, optim=decay, run={"updates": 100, "episodes": 48})
    by_episodes = train(budget)
    assert by_episodes.stop_reason == "episodes" and by_episodes.steps == 3
    assert comparable(by_episodes.metrics) == comparable(by_updates.metrics)

    # RTPO plays a different number of episodes each update: the rate follows the episodes played.
    budget = {"updates": 100, "episodes": 100}
    rtpo = train(make_config(tmp_path / "rtpo", tiny_model, rollout={"shape": "rtpo"}, optim=decay, run=budget))
    played = [row["rollout/episodes_total"] for row in rtpo.metrics]
    per_update = {later - earlier for earlier, later in itertools.pairwise(played)}
    assert len(per_update) > 1 and played[-2] < 100 <= played[-1]
    for row in rtpo.metrics:
        expected = 1e-3 * (1 - 0.9 * min(row["rollout/episodes_total"] / 100, 1.0))
        assert row["optim/lr"] == pytest.approx(expected)

    # Resumed mid-budget: the schedule's clock comes back with the checkpoint.
    split = make_config(tmp_path / "split", tiny_model, optim=decay, run={"updates": 1, "episodes": 48})
    train(split)
    resumed = train(split.model_copy(update={"run": split.run.model_copy(update={"updates": 100})}), resume=True)
    assert comparable(resumed.metrics) == comparable(by_episodes.metrics)


def test_a_cpu_budget_stops_the_run_and_counts_the_sessions_before_a_resume(tiny_model, tmp_path):
    tiny_budget = train(make_config(tmp_path / "tiny", tiny_model, run={"updates": 5, "max_cpu_seconds": 1e-3}))
    assert tiny_budget.stop_reason == "max_cpu_seconds" and tiny_budget.steps == 1

    first = make_config(tmp_path / "split", tiny_model, run={"updates": 2, "checkpoint_every": 1})
    spent = [row["time/cpu_s"] for row in train(first).metrics if "time/cpu_s" in row]
    assert len(spent) == 2 and 0 < spent[0] < spent[1]
    # Resumed with a budget the first session already used up: one more update, not a fresh budget.
    run = first.run.model_copy(update={"updates": 6, "max_cpu_seconds": spent[-1]})
    resumed = train(first.model_copy(update={"run": run}), resume=True)
    assert resumed.stop_reason == "max_cpu_seconds" and resumed.steps == 3
    assert resumed.metrics[-1]["time/cpu_s"] > spent[-1]


def test_a_checkpoint_from_before_the_typed_run_state_resumes_with_its_counters(tiny_model, tmp_path):
    first = make_config(tmp_path / "run", tiny_model, run={"updates": 2, "checkpoint_every": 1})
    done = train(first)
    step_2 = tmp_path / "run" / "checkpoints" / "step-2" / "state.json"
    document = json.loads(step_2.read_text())
    assert list(document["state"]) == ["skipped_updates", "episodes_total", "elapsed_s", "cpu_s", "credit_state"]
    # The oldest writer's state: three counters, no CPU time, no credit state, the episodes as a float.
    document["state"] = {"skipped_updates": 5, "episodes_total": 32.0, "elapsed_s": 7.5}
    step_2.write_text(json.dumps(document))
    run = first.run.model_copy(update={"updates": 3})
    resumed = train(first.model_copy(update={"run": run}), resume=True)
    assert resumed.resumed_from == 2 and resumed.steps == 3
    row = resumed.metrics[-1]
    assert row["rollout/episodes_total"] == 32 + 16 == 3 * done.metrics[0]["rollout/episodes_total"]
    assert row["loss/skipped_updates"] == 5.0 and resumed.skipped_updates == 5
    assert row["time/elapsed_s"] > 7.5  # the wall time of the sessions before counts on
    saved = json.loads((tmp_path / "run" / "checkpoints" / "step-3" / "state.json").read_text())["state"]
    assert saved["episodes_total"] == 48 and saved["skipped_updates"] == 5 and saved["credit_state"] == {}


def test_the_rollout_engine_is_injected_through_the_hooks(tiny_model, tmp_path):
    class CountingEngine:
        """The trainer's own engine, counting the batches it plays."""

        def __init__(self, engine):
            self.engine, self.plays = engine, 0

        def __getattr__(self, name):
            return getattr(self.engine, name)

        def play(self, *args, **kwargs):
            self.plays += 1
            return self.engine.play(*args, **kwargs)

    built = []

    def build_and_count(*args, **kwargs):
        built.append(CountingEngine(build_engine(*args, **kwargs)))
        return built[-1]

    train(make_config(tmp_path / "run", tiny_model, run={"updates": 2}), hooks=TrainHooks(build_engine=build_and_count))
    assert [type(engine.engine).__name__ for engine in built] == ["HFRolloutEngine"]
    assert built[0].plays == 2  # one rollout per update, on the injected engine


def test_run_state_reads_every_checkpoint_format_and_writes_the_keys_it_always_wrote():
    assert RunState.from_checkpoint({}) == RunState()
    state = RunState.from_checkpoint({"skipped_updates": 1, "episodes_total": 64.0, "elapsed_s": 2, "cpu_s": 1.5})
    assert state == RunState(skipped_updates=1, episodes_total=64, elapsed_s=2.0, cpu_s=1.5)
    assert isinstance(state.episodes_total, int) and isinstance(state.elapsed_s, float)
    state.credit_state["rae"] = {"g/p0": 0.5}
    assert RunState.from_checkpoint(json.loads(json.dumps(state.to_checkpoint()))) == state


def test_rollout_entropy_bonus_acts_when_no_group_has_signal(tiny_model, tmp_path):
    # Holes all around the start: every episode fails, every group is zero-signal, AAW draws nothing.
    doomed = {"game_options": {"desc": ["SH", "HG"], "max_steps": 2}}
    for scope, optimizer_steps in (("sampled", 0.0), ("rollout", 1.0)):
        loss = {"entropy_coef": 0.05, "entropy_scope": scope}
        result = train(make_config(tmp_path / scope, tiny_model, rollout=doomed, loss=loss, run={"updates": 1}))
        row = result.metrics[-1]
        assert row["credit/zero_signal_fraction"] == 1.0 and row["sampler/samples"] == 0
        assert row["optim/steps"] == optimizer_steps
    assert 0.0 < row["loss/rollout_entropy"] <= math.log(4) + 1e-6


def test_target_kl_ends_an_update_after_its_first_step(tiny_model, tmp_path):
    config = make_config(
        tmp_path / "run", tiny_model, optim={"micro_batch_size": 4, "target_kl": 1e-12}, run={"updates": 2}
    )
    rows = [row for row in train(config).metrics if row.get("sampler/samples", 0) > 8]
    assert rows and all(row["optim/steps"] == 1 and row["optim/stopped_early"] == 1 for row in rows)


def test_fixed_opponent_trains_only_the_model_seat(tiny_model, tmp_path):
    config = make_config(
        tmp_path / "run",
        tiny_model,
        rollout={
            "game_id": "TicTacToe-v0",
            "game_options": {},
            "observation_lines": None,
            "opponent": "random",
            "train_agents": ["player_0"],
            "group_size": 2,
            "groups_per_update": 2,
        },
        run={"updates": 1},
    )
    result = train(config)
    row = result.metrics[-1]
    assert row["rollout/episodes"] == 4 and row["credit/groups"] == 2  # one comparison set per group: the model seat


def test_gigpo_is_refused_before_any_model_loads(tmp_path):
    from tests.two_agent_games import Stones

    class NoStateKeys(Stones):
        def key(self, state, agent):
            return None

    tsmg.register("test/NoKeys-v0", NoStateKeys)
    try:
        config = TrainConfig(
            rollout={"game_id": "test/NoKeys-v0"},
            model={"spec": "tiny"},
            credit={"name": "gigpo"},
            run={"out_dir": str(tmp_path / "run")},
        )
        with pytest.raises(IncompatibleGameError, match="gigpo.*state key.*returned None"):
            train(config)
        assert not (tmp_path / "run").exists()
    finally:
        tsmg.registry.unregister("test/NoKeys-v0")


def test_out_of_memory_names_what_to_lower(tiny_model, tmp_path, monkeypatch):
    import training.update as update

    def exhausted(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(update, "score_completions", exhausted)
    config = make_config(tmp_path / "run", tiny_model, run={"updates": 1})
    with pytest.raises(TrainingOOMError, match="micro-batch of 16 sequences of up to .* tokens.*micro_batch_size"):
        train(config)


def test_cli_layers_file_flags_and_set(tmp_path):
    import argparse

    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers())
    config_file = tmp_path / "c.yaml"
    make_config(tmp_path / "from-file", "/nowhere").to_yaml(config_file)
    args = parser.parse_args(
        [
            "train",
            "--config",
            str(config_file),
            "--lr",
            "0.5",
            "--episodes",
            "640",
            "--out",
            str(tmp_path / "o"),
            "--set",
            "loss.kl_beta=0.1",
        ]
    )
    config = config_from_args(args)
    assert config.optim.lr == 0.5 and config.loss.kl_beta == 0.1 and config.run.episodes == 640
    assert config.run.out_dir == str(tmp_path / "o") and config.rollout.group_size == 4
    with pytest.raises(ValueError, match="--set takes"):
        config_from_args(parser.parse_args(["train", "--config", str(config_file), "--set", "lr=1"]))


@pytest.mark.parametrize("path", sorted((REPO / "configs").glob("*.yaml")), ids=lambda path: path.name)
def test_example_configs_are_valid(path):
    from training.config import validate_against_game

    validate_against_game(TrainConfig.from_yaml(path))
