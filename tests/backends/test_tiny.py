"""The tiny-model factory: what it saves loads back through from_pretrained like a user's model."""

import json

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import tsmg
from backends.tiny import IM_END, PAD, build_tiny_model


def test_model_and_tokenizer_load_back_through_from_pretrained(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, local_files_only=True)
    assert json.loads((tiny_model_dir / "config.json").read_text())["model_type"] == "llama"
    assert model.config.vocab_size == len(tokenizer)
    assert 0.1e6 < sum(p.numel() for p in model.parameters()) < 0.2e6
    assert tokenizer.eos_token == IM_END and tokenizer.pad_token == PAD
    assert tokenizer.chat_template


def test_tokenizer_round_trips_game_text_and_keeps_its_own_pre_tokenizer(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir, local_files_only=True)
    game = tsmg.make("FrozenLake-NoSlip-v0")
    observation = game.reset(seed=123)[0]["player"]
    ids = tokenizer(observation, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == observation
    # trained on game text: far fewer tokens than bytes
    assert len(ids) < len(observation.encode()) / 2
    chat = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert chat == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert tokenizer.convert_ids_to_tokens(tokenizer("<|im_start|>user")["input_ids"])[0] == "<|im_start|>"


def test_weights_depend_on_the_seed_only_and_leave_the_global_rng_alone(tmp_path):
    state = torch.random.get_rng_state()
    first = build_tiny_model(tmp_path / "a", seed=3, corpus=["left right up down"] * 3)
    assert torch.equal(torch.random.get_rng_state(), state)
    second = build_tiny_model(tmp_path / "b", seed=3, corpus=["left right up down"] * 3)
    third = build_tiny_model(tmp_path / "c", seed=4, corpus=["left right up down"] * 3)
    weights = [AutoModelForCausalLM.from_pretrained(folder).state_dict() for folder in (first, second, third)]
    name = "model.layers.0.self_attn.q_proj.weight"
    assert torch.equal(weights[0][name], weights[1][name])
    assert not torch.equal(weights[0][name], weights[2][name])


def test_sizes_can_be_chosen_and_a_model_can_have_no_chat_template(tiny_plain_model_dir, tmp_path):
    assert not AutoTokenizer.from_pretrained(tiny_plain_model_dir).chat_template
    folder = build_tiny_model(tmp_path / "wide", hidden_size=32, layers=1, heads=2, intermediate_size=48)
    config = AutoModelForCausalLM.from_pretrained(folder).config
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (32, 1, 2)
