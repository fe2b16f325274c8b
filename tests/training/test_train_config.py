"""TrainConfig: build-time validation with reasons, YAML round trip, checks against a game."""

import subprocess
import sys

import pytest
from pydantic import ValidationError

import tsmg
from training.config import (
    IncompatibleGameError,
    TrainConfig,
    game_capabilities,
    validate_against_game,
)
from training.losses import LossSettings

BASE = {"rollout": {"game_id": "FrozenLake-v0"}, "model": {"spec": "tiny"}}


def build(**sections):
    data = {key: dict(value) for key, value in BASE.items()}
    for key, value in sections.items():
        data[key] = {**data.get(key, {}), **value}
    return TrainConfig.model_validate(data)


def test_defaults_are_ms_grpo_with_aaw_and_token_clip():
    config = build()
    assert (config.credit.name, config.sampler.name, config.loss.name) == ("ms-grpo", "aaw", "ppo-clip")
    assert config.credit.params == {"std": "sample", "eps": 1e-6}  # defaults filled in
    assert config.rollout.group_size == 8
    assert config.run.resolved_eval_seeds()[:2] == [1_000_000, 1_000_001]
    assert len(config.run.resolved_eval_seeds()) == config.run.eval_episodes


def test_yaml_round_trip(tmp_path):
    config = build(
        credit={"name": "gigpo", "params": {"gamma": 0.9}},
        sampler={"alpha": 2.0, "replacement": False, "samples_per_update": 64},
        loss={"name": "clip-higher", "kl_beta": 0.01, "aggregation": "sequence-mean"},
        optim={"schedule": "cosine", "warmup_steps": 5},
        model={"finetune": "full"},
        rollout={"game_options": {"max_steps": 8}, "lap": {"temperature": 0.7}},
        run={"eval_seeds": [5, 6]},
    )
    path = tmp_path / "train.yaml"
    text = config.to_yaml(path)
    assert "gigpo" in text
    loaded = TrainConfig.from_yaml(path)
    assert loaded == config
    assert loaded.credit.params["gamma"] == 0.9 and loaded.credit.params["omega"] == 1.0
    assert loaded.rollout.lap.temperature == 0.7
    assert loaded.run.resolved_eval_seeds() == [5, 6]


def test_frozen_and_unknown_fields_refused():
    config = build()
    with pytest.raises(ValidationError):
        config.run.seed = 3  # type: ignore[misc]
    with pytest.raises(ValidationError, match="grup_size"):
        build(rollout={"grup_size": 4})
    with pytest.raises(ValidationError, match="extra"):
        TrainConfig.model_validate({**BASE, "trainer": {}})
    with pytest.raises(ValueError, match="mapping"):
        TrainConfig.from_yaml_text("- just a list")


@pytest.mark.parametrize(
    ("section", "value", "choices"),
    [
        ("credit", {"name": "grpo"}, "ms-grpo"),
        ("sampler", {"name": "weighted"}, "aaw"),
        ("loss", {"name": "ppo"}, "clip-higher"),
    ],
)
def test_unknown_algorithm_names_list_the_valid_ones(section, value, choices):
    with pytest.raises(ValidationError, match=choices):
        build(**{section: value})


def test_literal_choices_are_validated():
    with pytest.raises(ValidationError, match="token-mean"):
        build(loss={"aggregation": "mean"})
    with pytest.raises(ValidationError, match="cosine"):
        build(optim={"schedule": "step"})


def test_credit_params_are_validated_against_the_assigner():
    with pytest.raises(ValidationError, match="gamma"):
        build(credit={"name": "ms-grpo", "params": {"gamma": 0.9}})
    with pytest.raises(ValidationError, match="omega"):
        build(credit={"name": "gigpo", "params": {"omega": -1}})
    assert build(credit={"name": "rloo"}).credit.params == {}
    assert build(credit={"name": "gigpo"}).credit.resolved().gamma == 0.95  # type: ignore[attr-defined]


def test_group_assigner_with_groups_of_one_is_refused_with_the_reason():
    with pytest.raises(ValidationError, match="group_size >= 2"):
        build(rollout={"group_size": 1})


@pytest.mark.parametrize(
    ("lap", "fix"),
    [({"top_p": 0.9}, "set rollout.lap.top_p to 1"), ({"temperature": 0.0}, "set a temperature above 0")],
)
def test_sampling_that_training_cannot_score_is_refused_with_the_fix(lap, fix):
    # Training scores tokens under log_softmax(logits / T) over the whole vocabulary: a nucleus or
    # greedy rollout did not sample from that.
    with pytest.raises(ValidationError, match=fix):
        build(rollout={"lap": lap})
    assert build(rollout={"lap": {"temperature": 0.7, "top_p": 1.0}}).rollout.lap.temperature == 0.7


def test_the_cli_refuses_top_p_below_1_in_one_sentence(tmp_path, capsys):
    # In process (the CLI's main and its error report, without a second interpreter importing torch).
    from tsmg.apps.cli import main

    command = ["train", "--game", "FrozenLake-v0", "--model", "tiny"]
    command += ["--set", "rollout.lap.top_p=0.9", "--out", str(tmp_path / "run")]
    returncode, stderr = main(command), capsys.readouterr().err
    assert returncode != 0 and "Traceback" not in stderr, stderr
    assert "set rollout.lap.top_p to 1" in stderr and not (tmp_path / "run").exists()


def test_alpha_only_for_aaw():
    with pytest.raises(ValidationError, match="only 'aaw'"):
        build(sampler={"name": "uniform", "alpha": 2.0})
    assert build(sampler={"name": "uniform"}).sampler.alpha == 1.0


def test_model_spec_and_lora_fields():
    with pytest.raises(ValidationError, match="local model"):
        build(model={"spec": "openai:gpt-4o"})
    with pytest.raises(ValidationError, match="lora_r"):
        build(model={"finetune": "full", "lora_r": 16})
    assert build(model={"lora_target_modules": ["q_proj", "v_proj"]}).model.lora_target_modules == ["q_proj", "v_proj"]
    with pytest.raises(ValidationError, match="vllm_options only apply to spec 'vllm:PATH'"):
        build(model={"spec": "tiny", "vllm_options": {"gpu_memory_utilization": 0.5}})
    options = {"gpu_memory_utilization": 0.5}
    assert build(model={"spec": "vllm:/models/q", "vllm_options": options}).model.vllm_options == options


def test_loss_options_resolve_the_loss_defaults():
    options = build(loss={"name": "clip-higher", "aggregation": "constant"}, rollout={"lap": {"max_tokens": 32}})
    settings = LossSettings(**options.loss_options())
    assert (settings.clip_eps_low, settings.clip_eps_high) == (0.2, 0.28)
    assert settings.constant_normalizer == 32.0
    explicit = build(loss={"clip_eps_high": 0.3, "constant_normalizer": 10})
    assert explicit.loss_options()["clip_eps_high"] == 0.3
    assert explicit.loss_options()["constant_normalizer"] == 10.0
    assert build(loss={"name": "turn-clip"}).loss_options()["ratio_level"] == "turn"


def keyless_lake():
    """Frozen Lake whose state key is unavailable."""
    game = tsmg.make("FrozenLake-v0")
    game.state_key = lambda agent: None  # type: ignore[method-assign]
    return game


def test_gigpo_refused_on_a_game_without_state_keys():
    config = build(credit={"name": "gigpo"})
    with pytest.raises(IncompatibleGameError, match="state key.*returned None"):
        validate_against_game(config, keyless_lake())
    assert validate_against_game(config).state_keys  # Frozen Lake's own keys are fine


def test_per_step_reward_assigner_needs_rewards_before_the_end():
    config = build(credit={"name": "mt-grpo"})
    with pytest.raises(IncompatibleGameError, match="every reward came at the end"):
        validate_against_game(config)  # Frozen Lake pays only at the goal
    cliff = build(credit={"name": "mt-grpo"}, rollout={"game_id": "CliffWalking-v0"})
    assert validate_against_game(cliff).per_step_rewards is True  # -1 every step
    declared = tsmg.make("FrozenLake-v0")
    declared.per_step_rewards = True  # type: ignore[attr-defined]
    assert game_capabilities(declared).per_step_rewards_reason.startswith("the game declares")
    validate_against_game(config, declared)


def test_seats_and_opponent_are_checked_against_the_game():
    config = build(rollout={"train_agents": ["black"], "opponent": "random"})
    with pytest.raises(IncompatibleGameError) as error:
        validate_against_game(config)
    assert "train_agents ['black']" in str(error.value) and "single agent" in str(error.value)


def test_unknown_game_options_fail_through_make():
    with pytest.raises(tsmg.GameOptionsError):
        validate_against_game(build(rollout={"game_options": {"colour": "blue"}}))


def test_importing_training_config_and_listing_does_not_import_torch():
    code = (
        "import sys, training, training.config, training.algorithms;"
        "training.list_algorithms();"
        "print('torch' in sys.modules)"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "False"


# ----------------------------------------------------------------------------- issue 12's refusals
def test_aaw_configurations_identical_to_uniform_nonzero_are_refused_with_the_reason():
    with pytest.raises(ValidationError, match="alpha 0.*'uniform-nonzero'"):
        build(sampler={"alpha": 0.0})
    with pytest.raises(ValidationError, match="exactly once, whatever \\|A\\|"):
        build(sampler={"replacement": False})
    # As many draws as trajectories (8 groups x 8): known once the game's seats are.
    config = build(sampler={"replacement": False, "samples_per_update": 64})
    with pytest.raises(IncompatibleGameError, match="draws 64 of at most 64 trajectories"):
        validate_against_game(config)
    validate_against_game(build(sampler={"replacement": False, "samples_per_update": 32}))


def test_importance_correction_is_aaw_with_replacement_only():
    assert build(sampler={"importance_correction": True}).sampler.importance_correction
    with pytest.raises(ValidationError, match="draws uniformly"):
        build(sampler={"name": "uniform-nonzero", "importance_correction": True})
    with pytest.raises(ValidationError, match="needs replacement"):
        build(sampler={"importance_correction": True, "replacement": False, "samples_per_update": 8})


def test_dr_grpo_and_gspo_come_with_their_papers_aggregation():
    assert build(credit={"name": "dr-grpo"}).loss.aggregation == "constant"
    assert build(loss={"name": "gspo"}).loss.aggregation == "sequence-mean"
    assert build().loss.aggregation == "token-mean"
    with pytest.warns(UserWarning, match="credit assigner 'dr-grpo' prescribes loss.aggregation 'constant'"):
        build(credit={"name": "dr-grpo"}, loss={"aggregation": "token-mean"})
    with pytest.warns(UserWarning, match="'dr-grpo'"):  # gspo's own wins, and dr-grpo's is said to be dropped
        assert build(credit={"name": "dr-grpo"}, loss={"name": "gspo"}).loss.aggregation == "sequence-mean"
    config = build(credit={"name": "dr-grpo"})
    assert TrainConfig.from_yaml_text(config.to_yaml()) == config  # no warning on a round trip


def finished_keyless_lake():
    """Frozen Lake whose state key exists while the episode runs but not once it is over."""
    game = tsmg.make("FrozenLake-NoSlip-v0")
    original = game.state_key
    game.state_key = lambda agent: None if game.done else original(agent)  # type: ignore[method-assign]
    return game


@pytest.mark.parametrize("name", ["pgpo", "graft"])
def test_graph_credit_needs_state_keys_and_next_state_keys(name):
    config = build(credit={"name": name}, rollout={"game_id": "FrozenLake-NoSlip-v0"})
    with pytest.raises(IncompatibleGameError, match="groups steps by state key"):
        validate_against_game(config, keyless_lake())
    with pytest.raises(IncompatibleGameError, match="names no state once an episode is over"):
        validate_against_game(config, finished_keyless_lake())
    assert validate_against_game(config).next_state_keys


def test_opd_needs_a_teacher_and_a_sampler_that_draws_zero_rl_advantages():
    with pytest.raises(ValidationError, match="distils from a teacher: set distill.teacher"):
        build(credit={"name": "opd"}, sampler={"name": "uniform"})
    with pytest.raises(ValidationError, match="sampler 'aaw'.*would draw nothing: use sampler 'uniform'"):
        build(credit={"name": "opd"}, distill={"teacher": "hf:some/teacher"})
    with pytest.raises(ValidationError, match="only apply with a distill.teacher"):
        build(distill={"weight": 0.5})
    with pytest.raises(ValidationError, match="must be a local model"):
        build(distill={"teacher": "openai:gpt-4o"})
    with pytest.raises(ValidationError, match="built from scratch"):
        build(distill={"teacher": "tiny"})
    opd = build(
        credit={"name": "opd"}, sampler={"name": "uniform"}, distill={"teacher": "hf:t"}, rollout={"group_size": 1}
    )
    assert opd.distill.teacher == "hf:t"  # no groups needed for distillation alone
    combined = build(distill={"teacher": "hf:t", "weight": 0.5, "turn_balanced": True})
    assert combined.credit.name == "ms-grpo" and combined.distill.weight == 0.5


def test_rl_training_refuses_lora_dropout_in_one_sentence_and_sft_keeps_it(tmp_path, capsys):
    """pi_old is scored without dropout and the loss's forward runs in train mode, so lora_dropout > 0 makes
    the first ratio differ from 1: RL refuses it at validation (mutation killed: the validator removed)."""
    from training.sft import SFTConfig
    from tsmg.apps.cli import main

    base = {"rollout": {"game_id": "FrozenLake-v0"}}
    with pytest.raises(ValueError, match=r"set model.lora_dropout 0 for RL training"):
        TrainConfig.model_validate({**base, "model": {"spec": "tiny", "finetune": "lora", "lora_dropout": 0.1}})
    TrainConfig.model_validate({**base, "model": {"spec": "tiny", "finetune": "lora", "lora_dropout": 0.0}})
    command = ["train", "--game", "FrozenLake-v0", "--model", "tiny", "--set", "model.finetune=lora"]
    command += ["--set", "model.lora_dropout=0.1", "--out", str(tmp_path / "run")]
    returncode, stderr = main(command), capsys.readouterr().err
    assert returncode != 0 and "Traceback" not in stderr
    assert "set model.lora_dropout 0 for RL training" in stderr and not (tmp_path / "run").exists()
    # SFT has no ratio: dropout stays allowed there.
    sft = SFTConfig(data={"episodes": ["e.jsonl"]}, model={"spec": "smollm2", "finetune": "lora", "lora_dropout": 0.1})
    assert sft.model.lora_dropout == 0.1
