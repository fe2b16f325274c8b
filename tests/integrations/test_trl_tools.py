"""TRL's environment_factory route (tsmg.apps.integrations.trl.GameTools): a real GRPOTrainer trains the tiny model.

TRL plays the episodes itself here: the model calls ``make_move`` through a chat template that
renders tools (Qwen2.5's, which TRL knows how to parse), so the tiny model is first taught the
call's format: its tokenizer is trained with the tool prompt and calls in its corpus, then a
hundred supervised steps on calls with random moves (about 15 s); GRPO then trains on the game.
"""

import json
import os
import random

import pytest

pytest.importorskip("trl", reason="the TRL integration needs the trl extra: pip install 'tsmg[trl]'")

import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402
from trl.chat_template_utils import qwen2_5_chat_template  # noqa: E402

from backends.tiny import build_tiny_model  # noqa: E402
from training.tiny_corpus import game_corpus  # noqa: E402
from tsmg.apps.integrations.trl import GameEnvironment, GameTools  # noqa: E402
from tsmg.episode import read_episodes  # noqa: E402

GROUP = 4
GAME = "FrozenLake-NoSlip-v0"
# One move per episode, and an answer without a valid move call costs 1: the return is 0 for a called move
# and -1 for none or a call of no move (the model is taught some, see teach_the_call_format): groups carry signal.
OPTIONS = {"size": 2, "max_steps": 1, "invalid_penalty": 1.0}
MOVES = ("left", "right", "up", "down")
TAUGHT_MOVES = (*MOVES, "jump", "stay")  # two that are no move of the game: a call of either is invalid


def calls(moves=MOVES):
    """What a model writes to call make_move (Qwen2.5's tool-call format)."""
    return [
        f"<tool_call>\n{json.dumps({'name': 'make_move', 'arguments': {'move': move}})}\n</tool_call>" for move in moves
    ]


def tool_model(folder, tools):
    """The tiny model, its tokenizer trained on the game's texts, the tool prompt and the calls."""
    tokenizer = AutoTokenizer.from_pretrained(build_tiny_model(folder / "probe"))
    tokenizer.chat_template = qwen2_5_chat_template
    environment = tools.environment()
    prompt = tools.dataset()[0]["prompt"][:-1] + [{"role": "user", "content": environment.reset(seed=tools.seeds[0])}]
    text = tokenizer.apply_chat_template(
        prompt, tools=[environment.make_move], tokenize=False, add_generation_prompt=True
    )
    corpus = [*game_corpus(), *([text, *calls(TAUGHT_MOVES)] * 200)]
    model_dir = build_tiny_model(folder / "model", corpus=corpus, vocab_size=2048)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    tokenizer.chat_template = qwen2_5_chat_template  # renders tools; TRL parses its <tool_call> blocks
    return model, tokenizer


def teach_the_call_format(model, tokenizer, tools, steps=120):
    """Supervised steps on make_move calls with random moves after the first prompt.

    A third of the calls name no move of the game (``jump``, ``stay``): at any convergence the
    model's calls then still miss now and then, so the groups hold returns 0 and -1 by design, not
    by how far a CPU's float rounding let the supervised steps get.
    """
    environment = tools.environment()
    rng = random.Random(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(steps):
        messages = tools.dataset()[0]["prompt"][:-1]
        messages.append({"role": "user", "content": environment.reset(seed=rng.choice(tools.seeds))})
        text = tokenizer.apply_chat_template(
            messages, tools=[environment.make_move], tokenize=False, add_generation_prompt=True
        )
        prompt_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        answer = rng.choice(calls(TAUGHT_MOVES))
        answer_ids = tokenizer(answer + "<|im_end|>", add_special_tokens=False)["input_ids"]
        ids = torch.tensor([prompt_ids + answer_ids])
        labels = torch.tensor([[-100] * len(prompt_ids) + answer_ids])
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    return float(loss.detach())


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Two GRPOTrainer steps on 2x2 Frozen Lake maps through environment_factory, two groups of four per step."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    folder = tmp_path_factory.mktemp("trl-tools")
    tools = GameTools(GAME, seeds=range(100, 116), game_options=OPTIONS, episodes_path=folder / "episodes.jsonl")
    torch.manual_seed(0)
    model, tokenizer = tool_model(folder, tools)
    sft_loss = teach_the_call_format(model, tokenizer, tools)
    before = {name: parameter.detach().clone() for name, parameter in model.named_parameters()}
    rewards = []

    def reward(completions, environments, **columns):  # the route's reward, seen from outside
        values = tools.episode_return(completions, environments, **columns)
        rewards.append({"values": values, "seeds": list(columns["seed"]), "episodes": list(tools.episodes)})
        return values

    args = GRPOConfig(
        output_dir=str(folder / "out"),
        per_device_train_batch_size=2 * GROUP,
        num_generations=GROUP,
        max_steps=2,
        max_completion_length=160,
        max_tool_calling_iterations=OPTIONS["max_steps"],
        temperature=0.7,
        learning_rate=1e-2,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
    )
    kwargs = tools.trainer_kwargs()
    kwargs.update(reward_funcs=reward)
    trainer = GRPOTrainer(model, args=args, processing_class=tokenizer, **kwargs)
    trainer.train()
    return {
        "trainer": trainer,
        "rewards": rewards,
        "episodes": list(read_episodes(folder / "episodes.jsonl")),
        "before": before,
        "sft_loss": sft_loss,
        "tools": tools,
    }


def test_two_steps_train_on_the_episode_returns(trained):
    logs = [entry for entry in trained["trainer"].state.log_history if "reward" in entry]
    assert len(logs) == 2 == len(trained["rewards"])
    for entry, call in zip(logs, trained["rewards"], strict=True):
        assert entry["reward"] == pytest.approx(sum(call["values"]) / len(call["values"]))
        assert call["values"] == [episode.returns["player"] for episode in call["episodes"]]
    values = [value for call in trained["rewards"] for value in call["values"]]
    assert set(values) == {0.0, -1.0}, values  # valid moves called and not: the groups carry signal
    assert any(entry["frac_reward_zero_std"] < 1 for entry in logs)
    assert any(entry["tools/call_frequency"] > 0 for entry in logs)
    model = trained["trainer"].model
    assert any(not torch.equal(parameter, trained["before"][name]) for name, parameter in model.named_parameters())


def test_the_records_are_tsmg_episodes_of_the_seeds_trl_handed_out(trained):
    episodes = trained["episodes"]
    assert len(episodes) == 2 * 2 * GROUP
    assert [episode.episode_id for episode in episodes] == [
        episode.episode_id for call in trained["rewards"] for episode in call["episodes"]
    ]
    assert len({episode.episode_id for episode in episodes}) == len(episodes)
    by_group = {}
    for episode in episodes:
        by_group.setdefault(episode.group_id, []).append(episode)
        assert episode.game_id == GAME and episode.game_options == OPTIONS and episode.error is None
        assert episode.policies == {"player": "trl"}
    for call in trained["rewards"]:
        assert [episode.seed for episode in call["episodes"]] == call["seeds"]
    for members in by_group.values():
        assert len(members) == GROUP and len({episode.seed for episode in members}) == 1
    played = [step for episode in episodes for step in episode.steps]
    assert played, "no move was played"
    for step in played:
        call = step.tool_calls[0] if step.tool_calls else None
        if call is not None:  # a move the model called: the record holds the call and what the game made of it
            assert call["name"] == "make_move" and json.loads(call["arguments"])["move"] == step.action
            assert step.completion == f"make_move({call['arguments']})"
        else:  # the last answer, without a call: played as invalid
            assert not step.valid and step.reason == "no make_move call in the answer"
    for episode in episodes:  # an episode either ended in the game or is marked as stopped by TRL
        assert episode.terminated or episode.truncated
        assert episode.returns["player"] == sum(step.reward for step in episode.steps)


def test_the_tool_answers_with_the_game(trained):
    environment = trained["tools"].environment()
    first = environment.reset(seed=7, prompt=[])
    assert "Call the make_move function with your move. Valid actions:" in first
    environment._route = GameTools(GAME, seeds=[7], game_options={"size": 2})  # room for two answers
    environment.reset(seed=7)
    refused = environment.make_move("sideways")
    assert refused.startswith("That move was invalid:") and "Valid actions: left, down, right, up." in refused
    record = environment._close("I give up")
    assert [step.valid for step in record.steps] == [False, False]
    assert record.steps[0].action == "sideways" and record.steps[1].completion == "I give up"


def test_an_unknown_seat_is_refused():
    with pytest.raises(ValueError, match="has no seat 'nobody'"):
        GameTools("TicTacToe-v0", seeds=[0], agent="nobody")


def test_only_make_move_is_a_tool():
    public = [name for name in vars(GameEnvironment) if not name.startswith("_") and name != "reset"]
    assert public == ["make_move"], public  # TRL makes every public method but reset a tool
