"""tsmg export: a run's episodes as token-exact trl / verl / jsonl rows, read back by TRL itself."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

from training.advantages import DEFAULT_EPS
from training.credit import CREDIT_ASSIGNERS
from tsmg.apps.cli import main
from tsmg.apps.train.export import export_run
from tsmg.episode import read_episodes, write_episodes
from tsmg.lap import LAP, ActionFormat, LAPConfig
from tsmg.rollout import plan_episodes, rollout

GAME, OPTIONS, GROUP = "FrozenLake-NoSlip-v0", {"size": 2, "max_steps": 6}, 4


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    from backends.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def run(tiny_model_dir, tmp_path_factory):
    """A run folder of groups of model-played episodes (what a training run's episodes.jsonl holds)."""
    import torch

    from backends.hf import HFBackend

    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("run")
    lap = LAP(HFBackend(tiny_model_dir), LAPConfig(action_format=ActionFormat(kind="choice"), seed=3))
    plans = plan_episodes(GAME, list(range(6)), group_size=GROUP, id_prefix="u0")
    episodes = rollout(GAME, lap, plans=plans, game_options=OPTIONS)
    write_episodes(folder / "episodes.jsonl", episodes)
    return folder


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_jsonl_rows_are_the_records_tokens_with_the_ms_grpo_advantage(run):
    result = export_run(run, format="jsonl", credit="ms-grpo")
    rows = _rows(result.path)
    episodes = {episode.episode_id: episode for episode in read_episodes(run / "episodes.jsonl")}
    assert result.rows == len(rows) == sum(len(episode.steps) for episode in episodes.values())
    for row in rows:
        step = episodes[row["episode_id"]].steps[row["step"]]
        assert row["prompt_ids"] == step.prompt_token_ids and row["completion_ids"] == step.token_ids
        assert row["logprobs"] == step.logprobs and len(row["logprobs"]) == len(row["completion_ids"])
        assert row["choices"] == step.choices == ["left", "down", "right", "up"]
    # The advantage, by hand: (R - mean) / (sample std + eps) within each group, on every step of an episode
    groups = {}
    for episode in episodes.values():
        groups.setdefault(episode.group_id, []).append(episode)
    signal = 0
    for members in groups.values():
        returns = np.array([episode.returns["player"] for episode in members])
        expected = (returns - returns.mean()) / (returns.std(ddof=1) + DEFAULT_EPS)
        signal += bool(np.any(expected))
        for episode, advantage in zip(members, expected, strict=True):
            values = [row["advantage"] for row in rows if row["episode_id"] == episode.episode_id]
            assert values == [pytest.approx(advantage)] * len(episode.steps)
    assert signal  # some group had both outcomes


def test_trl_rows_feed_trls_sft_trainer_through_datasets(run, tiny_model_dir, tmp_path):
    from datasets import load_dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    result = export_run(run, tmp_path / "trl.jsonl", format="trl")
    dataset = load_dataset("json", data_files=str(result.path), split="train")
    row = dataset[0]
    assert row["input_ids"] == row["prompt_ids"] + row["completion_ids"]
    assert row["completion_mask"] == [0] * len(row["prompt_ids"]) + [1] * len(row["completion_ids"])
    # Filtered behaviour cloning on the steps MS-GRPO credits positively: TRL reads the processed columns as they are
    good = dataset.filter(lambda row: row["advantage"] > 0).select_columns(["input_ids", "completion_mask"])
    assert 0 < len(good) < len(dataset)
    trainer = SFTTrainer(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir),
        args=SFTConfig(
            output_dir=str(tmp_path / "sft"),
            max_steps=1,
            per_device_train_batch_size=4,
            report_to="none",
            use_cpu=True,
            save_strategy="no",
            completion_only_loss=True,
            disable_tqdm=True,
        ),
        train_dataset=good,
        processing_class=AutoTokenizer.from_pretrained(tiny_model_dir),
    )
    batch = trainer.data_collator([trainer.train_dataset[0]])  # what the trainer feeds the model
    first = good[0]
    prompt_length = first["completion_mask"].index(1)
    labels, ids = batch["labels"][0].tolist(), batch["input_ids"][0].tolist()
    assert ids[: len(first["input_ids"])] == first["input_ids"]
    assert labels[:prompt_length] == [-100] * prompt_length  # the prompt is not trained
    assert labels[prompt_length : len(first["input_ids"])] == first["input_ids"][prompt_length:]
    assert trainer.train().training_loss > 0


def test_verl_rows_hold_dataproto_fields_that_pad_into_a_batch(run, tmp_path):
    result = export_run(run, tmp_path / "verl.jsonl", format="verl", credit="rloo")
    rows = _rows(result.path)
    episodes = {episode.episode_id: episode for episode in read_episodes(run / "episodes.jsonl")}
    keys = {"prompts", "responses", "response_mask", "old_log_probs", "advantages", "token_level_rewards"}
    for row in rows:
        assert keys | {"uid", "data_source", "extra_info"} == set(row)
        length = len(row["responses"])
        assert all(len(row[key]) == length for key in keys - {"prompts"})
        episode = episodes[row["extra_info"]["episode_id"]]
        step = episode.steps[row["extra_info"]["step"]]
        assert (row["prompts"], row["responses"], row["old_log_probs"]) == (
            step.prompt_token_ids,
            step.token_ids,
            step.logprobs,
        )
        assert row["uid"] == episode.group_id and row["data_source"] == GAME
        assert row["token_level_rewards"][-1] == step.reward and sum(row["token_level_rewards"]) == step.reward
    # verl's layout: prompts left-padded, responses right-padded, input_ids their concatenation
    width_p, width_r = max(len(row["prompts"]) for row in rows), max(len(row["responses"]) for row in rows)
    prompts = np.array([[0] * (width_p - len(row["prompts"])) + row["prompts"] for row in rows])
    responses = np.array([row["responses"] + [0] * (width_r - len(row["responses"])) for row in rows])
    mask = np.array([row["response_mask"] + [0] * (width_r - len(row["response_mask"])) for row in rows])
    assert prompts.shape == (len(rows), width_p) and responses.shape == mask.shape == (len(rows), width_r)


@pytest.mark.parametrize("name", sorted(CREDIT_ASSIGNERS))
def test_any_registered_assigner_by_name(run, tmp_path, name):
    # This run has groups, state keys and per-step rewards: an assigner that needs no more must export; one
    # that needs more (a tree, teacher logprobs, ...) must say so in one sentence.
    met = CREDIT_ASSIGNERS[name].needs <= {"groups", "state_keys", "per_step_rewards"}
    try:
        result = export_run(run, tmp_path / f"{name}.jsonl", credit=name)
    except ValueError as error:
        assert not met, error
        assert str(error).startswith(f"credit assigner {name}") and "\n" not in str(error)
        return
    assert result.rows and result.credit == name


def test_aaw_sampling_draws_only_trajectories_with_signal(run, tmp_path):
    result = export_run(run, tmp_path / "aaw.jsonl", sampler="aaw", samples=40, seed=1)
    rows = _rows(result.path)
    assert rows and all(row["advantage"] != 0 for row in rows)
    again = export_run(run, tmp_path / "aaw2.jsonl", sampler="aaw", samples=40, seed=1)
    assert again.path.read_text() == result.path.read_text()


def test_cli_export_and_its_one_line_errors(run, tmp_path, capsys):
    assert main(["export", str(run), "--format", "trl", "--out", str(tmp_path / "x.jsonl"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == len(_rows(tmp_path / "x.jsonl")) and summary["credit"] == "ms-grpo"

    # A run written without token ids
    stripped = tmp_path / "stripped"
    stripped.mkdir()
    write_episodes(stripped / "episodes.jsonl", read_episodes(run / "episodes.jsonl"), token_ids=False)
    # Records of schema version 1 (before prompt ids were recorded)
    old = tmp_path / "old"
    old.mkdir()
    lines = []
    for line in (run / "episodes.jsonl").read_text().splitlines():
        record = json.loads(line)
        del record["schema_version"]
        lines.append(json.dumps(record))
    (old / "episodes.jsonl").write_text("\n".join(lines) + "\n")
    # An evaluation-like run: no groups
    ungrouped = tmp_path / "ungrouped"
    ungrouped.mkdir()
    episodes = [episode.model_copy(update={"group_id": None}) for episode in read_episodes(run / "episodes.jsonl")]
    write_episodes(ungrouped / "episodes.jsonl", episodes)
    cases = [
        ([str(stripped)], "written without token ids (--no-token-ids)"),
        ([str(old)], "schema version 1"),
        ([str(ungrouped)], "credit assigner ms-grpo compares the episodes of a group"),
        ([str(run), "--credit", "nope"], "unknown credit assigner 'nope'"),
        ([str(run), "--agent", "ghost"], "credit assigner ms-grpo cannot run on these episodes"),
        ([str(run), "--param", "gamma=0.5"], "credit assigner ms-grpo cannot run"),
        ([str(run), "--sampler", "nope"], "unknown sampler 'nope'"),
        ([str(tmp_path / "missing")], "no episodes.jsonl there"),
        ([str(run), "--format", "parquet"], "invalid choice: 'parquet'"),
    ]
    for arguments, message in cases:
        assert main(["export", *arguments]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and err.count("\n") == 1, (arguments, err)
    assert not [name for name in os.listdir(run) if name.endswith(".tmp")]


def test_export_of_a_training_run_without_episodes_names_the_setting_that_stores_them(tmp_path, capsys):
    """The issue's case: a training run keeps no episodes.jsonl unless run.episodes_every is set."""
    from training.config import TrainConfig

    folder = tmp_path / "trained"
    folder.mkdir()
    config = TrainConfig.from_yaml(Path(__file__).resolve().parents[2] / "configs" / "frozen_lake_tiny.yaml")
    assert config.run.episodes_every == 0
    config.to_yaml(folder / "config.yaml")  # what `tsmg train` writes first
    (folder / "metrics.jsonl").write_text('{"step": 1, "rollout/mean_return": 0.5}\n')
    assert main(["export", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert "training run that stored no episodes.jsonl" in err and "run.episodes_every" in err
