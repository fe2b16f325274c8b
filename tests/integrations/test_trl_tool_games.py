"""A tool-using service game trains through tsmg's TRL route, its moves in the text form of the calls.

The model (tiny, real, CPU) writes calls such as ``lookup_order(order_id="A71")`` under constrained
choice; the records keep the game's influence graph. The conversation re-sends each observation
(a growing transcript), so the tiny model is built with an 8k context window: 2k overflows at the
third turn (docs/tool-games.md says so).
"""

import os

import pytest

pytest.importorskip("trl", reason="the TRL integration needs the trl extra: pip install 'tsmg[trl]'")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

import tsmg  # noqa: E402
from tsmg.apps.integrations.conversation import episode_sequence  # noqa: E402
from tsmg.apps.integrations.trl import GameRollout  # noqa: E402
from tsmg.lap import ActionFormat, LAPConfig  # noqa: E402
from tsmg.tools import format_call, parse_call  # noqa: E402

GAME = "ServiceRefund-Easy-v0"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Two GRPOTrainer steps on the easy refund game: two seeds per step, two episodes per seed."""
    from backends.tiny import build_tiny_model

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    folder = tmp_path_factory.mktemp("trl-tools")
    model_dir = build_tiny_model(folder / "tiny-8k", max_position_embeddings=8192)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    before = {name: parameter.detach().clone() for name, parameter in model.named_parameters()}
    game = GameRollout(
        GAME,
        seeds=range(4),
        lap=LAPConfig(action_format=ActionFormat(kind="choice")),
        game_options={"max_steps": 4},
    )
    rows, episodes = [], []

    def rollout_func(prompts, trainer):
        output = game.rollout_func(prompts, trainer)
        rows.append(output)
        episodes.extend(game.episodes)
        return output

    args = GRPOConfig(
        output_dir=str(folder / "out"),
        per_device_train_batch_size=4,
        num_generations=2,
        max_steps=2,
        learning_rate=1e-2,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
    )
    kwargs = {**game.trainer_kwargs(), "rollout_func": rollout_func}
    trainer = GRPOTrainer(model, args=args, processing_class=tokenizer, **kwargs)
    trainer.train()
    return {"trainer": trainer, "rows": rows, "episodes": episodes, "before": before, "model": model}


def test_the_model_plays_text_form_calls_and_the_records_keep_the_influence_graph(trained):
    tools = tsmg.make(GAME).tool_specs()
    episodes = trained["episodes"]
    assert len(episodes) == 8 and not any(episode.error for episode in episodes)
    for episode in episodes:
        for step in episode.steps:
            parsed = parse_call(step.action, tools)
            assert not isinstance(parsed, str), parsed
            assert format_call(next(tool for tool in tools if tool.name == parsed[0]), parsed[1]) == step.action
        assert len(episode.influence["exact"].actions()) == len(episode.steps)
        sequence = episode_sequence(episode, "player")  # the tokens TRL trained are the model's own
        assert sum(sequence.model_mask) == sum(len(step.token_ids) for step in episode.steps)


def test_the_trainer_takes_the_episode_returns_and_updates_the_weights(trained):
    logs = [entry for entry in trained["trainer"].state.log_history if "reward" in entry]
    assert len(logs) == 2 == len(trained["rows"])
    for entry, row in zip(logs, trained["rows"], strict=True):
        assert entry["reward"] == pytest.approx(sum(row["tsmg_return"]) / len(row["tsmg_return"]))
    returns = {value for row in trained["rows"] for value in row["tsmg_return"]}
    assert returns == {0.0, 1.0}  # some refunds right, some not: the groups carry signal
    changed = [
        name
        for name, parameter in trained["model"].named_parameters()
        if not parameter.detach().equal(trained["before"][name])
    ]
    assert changed
