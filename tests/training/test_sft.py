"""The supervised warm start: samples are what the LAP sends, bad transcripts are refused, a model learns the format."""

import json
from collections import deque
from pathlib import Path

import pytest
import yaml

import games  # noqa: F401  (registers the catalog)
from backends.hf import HFBackend
from backends.tiny import build_tiny_model
from training.sft import SFTConfig, SFTDatasetError, build_dataset, chat_samples, run_sft, tokenized
from tsmg.episode import write_episodes
from tsmg.lap import LAP, LAPConfig, PromptTemplate
from tsmg.lm import Completion, GenerationRequest, SamplingParams
from tsmg.policies import OraclePolicy
from tsmg.rollout import rollout

GAME = "FrozenLake-NoSlip-v0"


def oracle_episodes(seeds, game=GAME):
    return rollout(game, OraclePolicy(), seeds=seeds)


class Replay:
    """A model that writes the given answers in order (one request at a time)."""

    name = "replay"

    def __init__(self, answers):
        self.answers = deque(answers)

    def generate(self, requests, sampling: SamplingParams):
        return [Completion(text=self.answers.popleft()) for _ in requests]


@pytest.mark.parametrize("history", ["none", "last_k", "full"])
def test_samples_are_the_prompts_a_lap_sends_with_the_answers_in_its_format(history):
    lap_config = LAPConfig(template=PromptTemplate(history=history, history_k=2))
    [episode] = oracle_episodes([41])
    samples = chat_samples([episode], lap_config)
    assert [sample.answer for sample in samples] == [f"<action>{step.parsed_action}</action>" for step in episode.steps]
    # The LAP itself, driven by a model that writes those answers, sends exactly these prompts.
    [played] = rollout(GAME, LAP(Replay([s.answer for s in samples]), lap_config), seeds=[41])
    assert played.success["player"] and len(played.steps) == len(samples)
    for step, sample in zip(played.steps, samples, strict=True):
        assert [m.model_dump() for m in step.prompt] == sample.messages
    if history != "none":
        assert samples[-1].messages[-2] == {"role": "assistant", "content": samples[-2].answer}


def test_the_compact_view_and_the_seat_filter_apply():
    [episode] = oracle_episodes([3])
    samples = chat_samples([episode], LAPConfig(), observation_lines="[_OPG]+")
    user = samples[0].messages[-1]["content"]
    assert user.startswith("P") and "Coordinates" not in user
    assert chat_samples([episode], LAPConfig(), agents=["nobody"]) == []


def test_an_answer_the_action_format_cannot_read_is_refused_with_where_and_why():
    episodes = oracle_episodes([1, 2])
    with pytest.raises(SFTDatasetError, match=r"#.*/0: the answer 'down' does not parse .*no <action>"):
        chat_samples(episodes, LAPConfig(), template="{action}")
    with pytest.raises(SFTDatasetError, match="not the recorded move"):
        chat_samples(episodes, LAPConfig(), template="<action>up</action> {action}")
    with pytest.raises(SFTDatasetError, match="regex: set data.answer_template"):
        chat_samples(episodes, LAPConfig(action_format={"kind": "regex", "pattern": "MOVE: (\\w+)"}))
    # A template the regex reads back is fine.
    regex = LAPConfig(action_format={"kind": "regex", "pattern": "MOVE: (\\w+)"})
    assert chat_samples(episodes, regex, template="MOVE: {action}")[0].answer.startswith("MOVE: ")


def test_transcripts_that_cannot_be_samples_are_refused():
    [episode] = oracle_episodes([5])
    tampered = episode.model_copy(deep=True)
    tampered.steps[1].observation = tampered.steps[1].observation.replace("P", "_")
    with pytest.raises(SFTDatasetError, match="/1: replaying seed 5 shows another observation"):
        chat_samples([tampered], LAPConfig())
    invalid = episode.model_copy(deep=True)
    invalid.steps[2].valid, invalid.steps[2].reason, invalid.steps[2].parsed_action = False, "no tag", None
    with pytest.raises(SFTDatasetError, match="/2 is an invalid answer \\(no tag\\)"):
        chat_samples([invalid], LAPConfig())
    unseeded = episode.model_copy(update={"seed": None})
    with pytest.raises(SFTDatasetError, match="has no seed"):
        chat_samples([unseeded], LAPConfig())
    failed = episode.model_copy(update={"error": "backend down"})
    assert chat_samples([failed], LAPConfig()) == []


def test_the_cli_refuses_a_bad_dataset_in_one_sentence_before_loading_a_model(tmp_path, capsys):
    from tsmg.apps.cli import main

    write_episodes(tmp_path / "episodes.jsonl", oracle_episodes([1]))
    code = main(
        ["sft", "--episodes", str(tmp_path / "episodes.jsonl"), "--model", "hf:/nowhere", "--out", str(tmp_path / "r")]
        + ["--set", "data.answer_template='{action}!'"]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and "does not parse under the LAP's action format" in err
    assert "Traceback" not in err and not (tmp_path / "r").exists()
    assert main(["sft", "--episodes", "x", "--model", "smollm2", "--set", "data.answer_template={action}!"]) == 2
    assert "'data.answer_template={action}!'" in capsys.readouterr().err  # the bad --set, in one sentence
    assert main(["sft", "--episodes", str(tmp_path / "missing.jsonl"), "--model", "smollm2"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["sft", "--episodes", str(tmp_path / "episodes.jsonl"), "--model", "tiny", "--dry-run"]) == 2
    assert "fine-tunes 'smollm2' or 'hf:PATH'" in capsys.readouterr().err


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=1)


def test_tokens_are_the_backends_prompt_ids_then_the_answer_and_the_end_of_turn(tiny_model):
    backend = HFBackend(tiny_model, threads=1)
    samples = chat_samples(oracle_episodes([7]), LAPConfig())
    data = tokenized(backend, samples)
    prompts = backend.encode_prompts([GenerationRequest(messages=sample.messages) for sample in samples])
    for ids, mask, prompt, sample in zip(data["input_ids"], data["completion_mask"], prompts, samples, strict=True):
        assert ids[: len(prompt)] == prompt and mask == [0] * len(prompt) + [1] * (len(ids) - len(prompt))
        assert ids[-1] == backend.eos_ids[0]
        assert backend.tokenizer.decode(ids[len(prompt) : -1]).replace(" ", "") == sample.answer


@pytest.mark.parametrize("finetune", ["full", "lora"])
def test_a_tiny_model_learns_to_answer_in_tags_and_the_result_loads(tiny_model, tmp_path, finetune):
    # One map (the standard 4x4), six decisions: the fine-tune must make greedy answers those decisions' tags.
    write_episodes(tmp_path / "oracle.jsonl", oracle_episodes([0], game="FrozenLake-v0"))
    lora = {"lora_r": 16, "lora_alpha": 64} if finetune == "lora" else {}
    config = SFTConfig(
        data={"episodes": [str(tmp_path / "oracle.jsonl")]},
        model={"spec": f"hf:{tiny_model}", "finetune": finetune, "dtype": "float32", **lora},
        optim={"lr": 1e-2, "max_steps": 40, "batch_size": 6, "schedule": "constant"},
        run={"out_dir": str(tmp_path / "run"), "threads": 1, "logging_steps": 10},
    )
    samples = build_dataset(config)
    before = _greedy(HFBackend(tiny_model, threads=1), samples)
    result = run_sft(config, samples=samples)
    assert result.steps == 40 and result.samples == 6
    assert (result.adapter is not None) == (finetune == "lora")
    after = _greedy(HFBackend(result.final_model, threads=1), samples)
    fmt = config.lap.action_format
    assert not any(fmt.extract(text) in ("left", "down", "right", "up") for text in before)
    if finetune == "full":  # every answer a valid tag
        assert all(fmt.extract(text) in ("left", "down", "right", "up") for text in after)
    else:  # an adapter this small learns slowly: the merged weights answer differently, and in the tag's direction
        assert after != before and all(text.startswith("<action>") for text in after)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    losses = [row["loss"] for row in rows if "loss" in row]
    assert len(losses) == 4 and losses[-1] < losses[0]
    dataset = [json.loads(line) for line in (tmp_path / "run" / "dataset.jsonl").read_text().splitlines()]
    assert dataset[0]["prompt"] == samples[0].messages and dataset[0]["completion"][0]["content"] == samples[0].answer
    with pytest.raises(FileExistsError):
        run_sft(config, samples=samples)


def test_a_cpu_budget_ends_the_fine_tune_and_its_cost_is_logged(tiny_model, tmp_path):
    write_episodes(tmp_path / "oracle.jsonl", oracle_episodes([0], game="FrozenLake-v0"))
    config = SFTConfig(
        data={"episodes": [str(tmp_path / "oracle.jsonl")]},
        model={"spec": f"hf:{tiny_model}", "finetune": "full", "dtype": "float32"},
        optim={"lr": 1e-3, "max_steps": 500, "batch_size": 6},
        run={"out_dir": str(tmp_path / "run"), "threads": 1, "max_cpu_seconds": 1e-3},
    )
    result = run_sft(config)
    assert result.steps == 1 and 0 < result.cpu_seconds
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1] == {"step": 1, "time/elapsed_s": result.seconds, "time/cpu_s": result.cpu_seconds}


def _greedy(backend, samples):
    requests = [GenerationRequest(messages=sample.messages) for sample in samples]
    return [c.text.strip() for c in backend.generate(requests, SamplingParams(temperature=0.0, max_tokens=16))]


@pytest.mark.parametrize(
    "path", sorted((Path(__file__).resolve().parents[2] / "configs" / "sft").glob("*.yaml")), ids=lambda p: p.name
)
def test_example_sft_configs_are_valid(path):
    config = SFTConfig.model_validate(yaml.safe_load(path.read_text()))
    assert config.data.episodes and config.model.spec == "smollm2"
