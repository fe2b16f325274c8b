"""Each method of issue 12 trains end to end through `tsmg train`'s loop on a tiny model (two updates each)."""

import pytest

from tests.small_lake import make_config
from training.trainer import train


@pytest.mark.parametrize(
    ("sections", "metric"),
    [
        ({"credit": {"name": "pgpo"}}, "credit/mean_abs_advantage"),
        ({"credit": {"name": "graft"}}, "credit/mean_abs_advantage"),
        ({"credit": {"name": "dr-grpo"}}, "credit/mean_abs_advantage"),
        ({"sampler": {"importance_correction": True}}, "sampler/drawn"),
        ({"sampler": {"name": "uniform-nonzero"}}, "sampler/drawn"),
        (
            {"loss": {"name": "sorl"}, "optim": {"micro_batch_size": 8, "grad_accumulation": 1}},
            "loss/clipped_turn_fraction",
        ),
        ({"loss": {"name": "gspo"}, "optim": {"micro_batch_size": 8, "grad_accumulation": 1}}, "loss/ratio_mean"),
    ],
    ids=["pgpo", "graft", "dr-grpo", "aaw-importance", "uniform-nonzero", "sorl", "gspo"],
)
def test_method_trains(tiny_model, tmp_path, sections, metric):
    result = train(make_config(tmp_path / "run", tiny_model, run={"updates": 2}, **sections))
    rows = [row for row in result.metrics if row["step"] > 0]
    assert len(rows) == 2 and all(row["loss/skipped"] == 0 for row in rows)
    assert any(row.get(metric) for row in rows)
    assert any(row["optim/steps"] > 0 for row in rows)
    if "loss" in sections:  # several optimizer steps per update: later ones see the moved weights
        assert max(row["optim/steps"] for row in rows) > 1


def test_mt_grpo_trains_on_snake(tiny_model, tmp_path):
    config = make_config(
        tmp_path / "run",
        tiny_model,
        rollout={"game_id": "Snake-v0", "game_options": {}, "observation_lines": "[_AT0-9]+", "groups_per_update": 2},
        credit={"name": "mt-grpo", "params": {"align": "end"}},
        run={"updates": 2},
    )
    result = train(config)
    assert all(row["loss/skipped"] == 0 for row in result.metrics if row["step"] > 0)
