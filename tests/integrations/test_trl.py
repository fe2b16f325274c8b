"""TRL's GRPOTrainer trains on a tsmg game through tsmg.apps.integrations.trl (real trainer, tiny model, CPU)."""

import os

import pytest

pytest.importorskip("trl", reason="the TRL integration needs the trl extra: pip install 'tsmg[trl]'")

import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from tsmg.apps.integrations.conversation import episode_sequence  # noqa: E402
from tsmg.apps.integrations.trl import GameRollout  # noqa: E402
from tsmg.episode import read_episodes  # noqa: E402

GROUP = 4


@pytest.fixture(scope="module")
def trained(tiny_model_dir, tmp_path_factory):
    """Three GRPOTrainer steps on 2x2 random Frozen Lake maps (one map per seed), two groups per step."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    folder = tmp_path_factory.mktemp("trl")
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir, padding_side="left")
    before = {name: parameter.detach().clone() for name, parameter in model.named_parameters()}
    game = GameRollout(
        "FrozenLake-NoSlip-v0",
        seeds=range(100, 116),
        game_options={"size": 2, "max_steps": 6},
        episodes_path=folder / "episodes.jsonl",
    )
    rows, reward_calls = [], []

    def rollout_func(prompts, trainer):  # what TRL handed over, seen from outside
        output = game.rollout_func(prompts, trainer)
        rows.append({"prompts": list(prompts), **output})
        return output

    def reward(completions, **columns):  # a user's reward function: the game's return, and what else TRL passes
        reward_calls.append(columns)
        return GameRollout.episode_return(completions, **columns)

    args = GRPOConfig(
        output_dir=str(folder / "out"),
        per_device_train_batch_size=2 * GROUP,
        num_generations=GROUP,
        max_steps=3,
        learning_rate=1e-2,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
    )
    kwargs = game.trainer_kwargs()
    kwargs.update(rollout_func=rollout_func, reward_funcs=reward)
    trainer = GRPOTrainer(model, args=args, processing_class=tokenizer, **kwargs)
    trainer.train()
    return {
        "trainer": trainer,
        "rows": rows,
        "rewards": reward_calls,
        "episodes": list(read_episodes(folder / "episodes.jsonl")),
        "before": before,
        "game": game,
    }


def test_three_steps_run_and_the_episode_returns_are_the_rewards_the_trainer_logs(trained):
    logs = [entry for entry in trained["trainer"].state.log_history if "reward" in entry]
    assert len(logs) == 3 == len(trained["rows"]) == len(trained["rewards"])
    for entry, row, call in zip(logs, trained["rows"], trained["rewards"], strict=True):
        assert call["tsmg_return"] == row["tsmg_return"]
        assert entry["reward"] == pytest.approx(sum(row["tsmg_return"]) / len(row["tsmg_return"]))
    returns = [value for row in trained["rows"] for value in row["tsmg_return"]]
    assert set(returns) == {0.0, 1.0}  # some maps solved, some not: the groups carry signal
    assert any(entry["frac_reward_zero_std"] < 1 for entry in logs)
    # ... so the loss moved the weights
    model = trained["trainer"].model
    assert any(not torch.equal(parameter, trained["before"][name]) for name, parameter in model.named_parameters())


def test_a_group_shares_its_game_seed_and_its_members_differ(trained):
    for row, call in zip(trained["rows"], trained["rewards"], strict=True):
        assert row["tsmg_seed"] == call["seed"]  # the dataset row's seed is the seed the game was reset with
        groups = [row["tsmg_seed"][start : start + GROUP] for start in range(0, len(row["tsmg_seed"]), GROUP)]
        assert all(len(set(group)) == 1 for group in groups) and len({group[0] for group in groups}) == len(groups)
    episodes = trained["episodes"]
    assert len(episodes) == 3 * 2 * GROUP
    by_group = {}
    for episode in episodes:
        by_group.setdefault(episode.group_id, []).append(episode)
    for members in by_group.values():
        assert len(members) == GROUP and len({episode.seed for episode in members}) == 1
        assert len({episode.steps[0].observation for episode in members}) == 1  # one start state (one map)
        assert len({tuple(step.parsed_action for step in episode.steps) for episode in members}) > 1
    # Different seeds are different maps
    assert len({members[0].steps[0].observation for members in by_group.values()}) > 1


def test_the_trainer_gets_the_recorded_tokens_and_logprobs(trained):
    episodes = {episode.episode_id: episode for episode in trained["episodes"]}
    for row in trained["rows"]:
        for index, episode_id in enumerate(row["tsmg_episode_id"]):
            sequence = episode_sequence(episodes[episode_id], "player")
            assert row["prompt_ids"][index] == sequence.prompt_ids == episodes[episode_id].steps[0].prompt_token_ids
            n = len(sequence.completion_ids)
            assert row["completion_ids"][index][:n] == sequence.completion_ids
            assert row["env_mask"][index][:n] == sequence.model_mask
            assert row["logprobs"][index][:n] == sequence.logprobs
            # Only a closing end-of-turn token (not trained) may follow
            assert row["env_mask"][index][n:] in ([], [0])
            written = [t for t, flag in zip(row["completion_ids"][index], row["env_mask"][index], strict=True) if flag]
            assert written == [t for step in episodes[episode_id].steps for t in step.token_ids]


def test_prompts_that_name_no_seed_are_refused(trained):
    with pytest.raises(ValueError, match="names no seed of FrozenLake-NoSlip-v0"):
        trained["game"].rollout_func(["What is 2 + 2?"], trained["trainer"])


def test_an_unknown_seat_is_refused():
    with pytest.raises(ValueError, match="has no seat 'nobody'"):
        GameRollout("TicTacToe-v0", seeds=[0], agent="nobody")
