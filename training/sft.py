"""Supervised warm start: episode transcripts -> the chat samples a LAP would send -> TRL's ``SFTTrainer``.

A pretrained chat model that never writes the LAP's action format gives MS-GRPO no signal (every
answer is invalid, every group's returns are equal). A short supervised fine-tune on transcripts
that tsmg itself wrote (``tsmg rollout --game GAME --model oracle --out DIR``) teaches the format, and
some of the game, before reinforcement learning starts. What this module does, exactly:

* **Samples.** Each recorded decision becomes one prompt-completion pair. The prompt is what the
  LAP (:class:`~tsmg.lap.LAP`, with the config's :class:`~tsmg.lap.LAPConfig`) would send for that
  decision: the episode is replayed from its seed through the game, so the observation, the legal
  actions in the format instructions and the history turns are the live game's, and the trainer's
  compact view (``observation_lines``) applies as in rollouts. The completion is the recorded move
  written in the LAP's action format (``data.answer_template``; for ``<action>`` tags,
  ``<action>MOVE</action>``) followed by the end-of-turn token the backend stops at.
* **Refused before any model loads** (:class:`SFTDatasetError`): an answer that the LAP's action
  format cannot extract or the game cannot parse as the recorded move, an invalid recorded answer,
  a transcript whose replay shows another observation, an episode without a seed.
* **Tokens.** Prompts are encoded by the backend's own :meth:`~backends.hf.HFBackend.encode_prompts`
  (the ids generation feeds the model); the loss covers the completion tokens only.
* **Training.** TRL's ``SFTTrainer`` (a LoRA adapter through PEFT, or every weight) on the
  pre-tokenised dataset; no gradient checkpointing (these sequences are short).
* **Run folder.** ``config.yaml``, ``dataset.jsonl`` (the chat samples, in the conversational
  prompt-completion layout other trainers read), ``metrics.jsonl`` (the trainer's log rows, the
  last one the run's cost: ``time/elapsed_s``, ``time/cpu_s``), and ``final/``: a full model
  folder with its tokenizer (a LoRA adapter is merged into it and also kept in ``adapter/``),
  which ``tsmg eval --model hf:RUN/final`` and ``tsmg train --set model.spec=hf:RUN/final`` load.
  While the run lasts, ``checkpoints/checkpoint-N`` (the HF Trainer's, every
  ``run.checkpoint_every`` steps, the newest only) lets ``resume=True`` (``tsmg sft --resume``)
  continue a killed run where its checkpoint left it, with its CPU budget counting the sessions
  before (:mod:`training.sft_checkpoints`).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from training.checkpoint import FINAL_DIR, save_final_model
from training.config import ModelConfig
from tsmg.core import Game, Invalid
from tsmg.episode import Episode, read_episodes
from tsmg.lap import LAP, ActionFormat, LAPConfig, checked_regex
from tsmg.lm import Completion, GenerationRequest, SamplingParams
from tsmg.policies import DecisionRequest, Turn
from tsmg.run_folder import CHECKPOINTS_DIR, CONFIG_FILE, METRICS_FILE, truncate_metrics

if TYPE_CHECKING:
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from backends.base import TrainableModel

DATASET_FILE = "dataset.jsonl"


class SFTDatasetError(ValueError):
    """The transcripts cannot make a dataset for this LAP; the message says which sample and why."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SFTDataConfig(_Section):
    """Where the transcripts come from and how an answer is written."""

    episodes: list[str] = Field(
        min_length=1,
        description="episodes.jsonl files (e.g. from `tsmg rollout --game GAME --model oracle --out DIR`).",
    )
    agents: list[str] | None = Field(default=None, description="Seats whose decisions become samples; None: all.")
    answer_template: str | None = Field(
        default=None,
        description=(
            "The answer the model learns to write, with {action} for the move; None: from the action format "
            "(tag: <TAG>{action}</TAG>; choice and raw: {action}; regex needs one)."
        ),
    )

    @field_validator("answer_template")
    @classmethod
    def _has_action(cls, template: str | None) -> str | None:
        if template is not None and "{action}" not in template:
            raise ValueError("answer_template must contain {action}, where the move goes")
        return template


class SFTOptimConfig(_Section):
    """Optimizer and batching of the supervised fine-tune."""

    lr: float = Field(default=2e-4, gt=0.0, description="Peak learning rate (AdamW).")
    epochs: float = Field(default=1.0, gt=0.0, description="Passes over the dataset (ignored with max_steps).")
    max_steps: int | None = Field(default=None, ge=1, description="Optimizer steps; None: from epochs.")
    batch_size: int = Field(default=8, ge=1, description="Samples per forward/backward pass.")
    grad_accumulation: int = Field(default=1, ge=1, description="Passes per optimizer step.")
    schedule: Literal["constant", "linear", "cosine"] = Field(default="linear", description="Learning-rate decay.")
    warmup_steps: int = Field(default=0, ge=0, description="Steps of linear warm-up.")
    weight_decay: float = Field(default=0.0, ge=0.0, description="AdamW weight decay.")


class SFTRunConfig(_Section):
    """Where the run writes and how it runs."""

    out_dir: str = Field(default="runs/sft", description="Run folder: config, dataset, metrics, final model.")
    seed: int = Field(default=0, description="Seed of the data order and the adapter's initialisation.")
    threads: int | None = Field(default=None, ge=1, description="torch CPU threads (None: torch's default).")
    logging_steps: int = Field(default=5, ge=1, description="Log the training loss every this many steps.")
    max_cpu_seconds: float | None = Field(
        default=None,
        gt=0.0,
        description=(
            "Stop after the optimizer step during which the run has used this much CPU time (every thread, user + "
            "system, loading included, a resumed run's earlier sessions counted; None: no limit). The learning-rate "
            "schedule still runs over max_steps or epochs."
        ),
    )
    checkpoint_every: int = Field(
        default=20,
        ge=0,
        description=(
            "Checkpoint every this many optimizer steps, keeping only the newest, which `tsmg sft --resume` continues "
            "from (0: never); the checkpoint is removed once the final model is written."
        ),
    )


class SFTConfig(_Section):
    """A whole supervised warm start. Build it from keyword sections, a dict, or YAML.

    Example:
        >>> config = SFTConfig(data={"episodes": ["runs/oracle/episodes.jsonl"]}, model={"spec": "smollm2"})
        >>> answer_template(config.lap.action_format, config.data.answer_template)
        '<action>{action}</action>'
    """

    data: SFTDataConfig = Field(description="Transcripts and the answer layout.")
    model: ModelConfig = Field(description="The model fine-tuned ('smollm2' or 'hf:PATH'), LoRA or full.")
    lap: LAPConfig = Field(
        default_factory=LAPConfig, description="The LAP whose prompts and action format the samples follow."
    )
    observation_lines: str | None = Field(
        default=None, description="Compact view, as rollout.observation_lines of a training run (None: whole text)."
    )
    optim: SFTOptimConfig = Field(default_factory=SFTOptimConfig, description="Optimizer and batching.")
    run: SFTRunConfig = Field(default_factory=SFTRunConfig, description="Output and threads.")

    @field_validator("observation_lines")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        return checked_regex(pattern, "observation_lines")

    @field_validator("model")
    @classmethod
    def _loadable(cls, model: ModelConfig) -> ModelConfig:
        kind, _, target = model.spec.partition(":")
        if model.spec != "smollm2" and not (kind == "hf" and target):
            raise ValueError(f"tsmg sft fine-tunes 'smollm2' or 'hf:PATH', not {model.spec!r}")
        return model

    def to_yaml(self, path: str | Path | None = None) -> str:
        """The config as YAML (every field); also written to ``path`` if given."""
        text = yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text


# ============================================================================ the dataset
@dataclass(frozen=True)
class ChatSample:
    """One decision as a prompt-completion pair.

    Attributes:
        messages: The chat messages the LAP sends for this decision.
        answer: What the model should write (the move in the LAP's action format).
        source: Where it came from: ``FILE#EPISODE_ID/STEP``.
    """

    messages: list[dict[str, str]]
    answer: str
    source: str

    def to_json(self) -> str:
        """One JSON line in the conversational prompt-completion layout (``prompt``, ``completion``)."""
        return json.dumps(
            {
                "prompt": self.messages,
                "completion": [{"role": "assistant", "content": self.answer}],
                "source": self.source,
            }
        )


def answer_template(action_format: ActionFormat, template: str | None) -> str:
    """The answer layout: ``template`` if given, else the action format's own.

    Raises:
        SFTDatasetError: A regex format without a template (no answer layout can be derived from a pattern).

    Example:
        >>> answer_template(ActionFormat(kind="tag", tag="move"), None)
        '<move>{action}</move>'
    """
    if template is not None:
        return template
    if action_format.kind == "tag":
        return f"<{action_format.tag}>{{action}}</{action_format.tag}>"
    if action_format.kind == "regex":
        raise SFTDatasetError("the LAP's action format is a regex: set data.answer_template, e.g. 'MOVE: {action}'")
    return "{action}"


class _PromptsOnly:
    """A stand-in model: :meth:`LAP.messages` needs a LAP, and building prompts needs no model."""

    name = "prompts-only"

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        raise RuntimeError("this LAP only builds prompts")


def chat_samples(
    episodes: Iterable[Episode],
    lap_config: LAPConfig,
    *,
    template: str | None = None,
    observation_lines: str | None = None,
    agents: Sequence[str] | None = None,
    source: str = "",
) -> list[ChatSample]:
    """The chat samples of ``episodes``, prompts as the LAP would send them; every answer checked.

    Each episode is replayed from its seed, so that the legal actions and history turns in the
    prompt are the live game's and the recorded observations are checked against it.

    Args:
        episodes: Finished episodes (failed ones, with ``error`` set, are skipped).
        lap_config: The LAP whose prompt layout and action format the samples follow.
        template: The answer layout with ``{action}`` (None: :func:`answer_template`'s default).
        observation_lines: The compact view of a training run (None: the whole observation).
        agents: Seats whose decisions become samples (None: every seat).
        source: A name for the transcripts in messages (e.g. the file).

    Raises:
        SFTDatasetError: A transcript that cannot be a sample, with where and why.
    """
    from tsmg.policies import compact_observation
    from tsmg.registry import make

    layout = answer_template(lap_config.action_format, template)
    lap = LAP(_PromptsOnly(), lap_config)
    samples: list[ChatSample] = []
    for episode in episodes:
        if episode.error is not None:
            continue
        where = f"{source}#{episode.episode_id}"
        if episode.seed is None:
            raise SFTDatasetError(f"{where} has no seed, so the prompts it was played with cannot be rebuilt")
        game = make(episode.game_id, **episode.game_options)
        try:
            game.reset(seed=episode.seed)
            history: dict[str, list[Turn]] = {}
            for round_steps in _rounds(episode):
                actions: dict[str, str] = {}
                for step in round_steps:
                    here = f"{where}/{step.index}"
                    observation = game.observe(step.agent)
                    if observation != step.observation:
                        raise SFTDatasetError(
                            f"{here}: replaying seed {episode.seed} shows another observation than the transcript "
                            f"(was it written by another version of {episode.game_id} or other options?)"
                        )
                    if not step.valid or step.parsed_action is None:
                        raise SFTDatasetError(
                            f"{here} is an invalid answer ({step.reason}); a warm start must only show valid moves"
                        )
                    answer = layout.format(action=step.parsed_action)
                    _check_answer(answer, step.parsed_action, lap_config.action_format, game, step.agent, here)
                    shown = compact_observation(observation, observation_lines)
                    turns = history.setdefault(step.agent, [])
                    if agents is None or step.agent in agents:
                        request = DecisionRequest(
                            game=game,
                            agent=step.agent,
                            observation=shown,
                            legal_actions=game.legal_actions(step.agent),
                            history=list(turns),
                            episode_seed=episode.seed,
                            round=step.round,
                        )
                        samples.append(ChatSample(lap.messages(request), answer, here))
                    turns.append(Turn(shown, answer, step.parsed_action, True, None, step.reward))
                    actions[step.agent] = step.parsed_action
                game.step(actions)
        finally:
            game.close()
    return samples


def _rounds(episode: Episode) -> list[list[Any]]:
    """The episode's steps grouped by round, in order."""
    grouped: dict[int, list[Any]] = {}
    for step in episode.steps:
        grouped.setdefault(step.round, []).append(step)
    return [grouped[number] for number in sorted(grouped)]


def _check_answer(answer: str, move: str, action_format: ActionFormat, game: Game, agent: str, where: str) -> None:
    """Refuse an answer the LAP would not read back as ``move``."""
    extracted = action_format.extract(answer)
    if isinstance(extracted, Invalid):
        raise SFTDatasetError(
            f"{where}: the answer {answer!r} does not parse under the LAP's action format "
            f"({action_format.kind}): {extracted.reason}; fix data.answer_template or the LAP's action format"
        )
    parsed = game.parse(agent, extracted)
    if isinstance(parsed, Invalid) or parsed != game.parse(agent, move):
        reason = parsed.reason if isinstance(parsed, Invalid) else "another move"
        raise SFTDatasetError(
            f"{where}: the LAP's action format extracts {extracted!r} from the answer {answer!r}, which is not the "
            f"recorded move {move!r} ({reason})"
        )


def build_dataset(config: SFTConfig) -> list[ChatSample]:
    """Every sample of the configured transcripts (checked; nothing is loaded but the games).

    Raises:
        SFTDatasetError: A missing file, an empty dataset, or a transcript that cannot be a sample.
    """
    samples: list[ChatSample] = []
    for name in config.data.episodes:
        path = Path(name)
        if not path.is_file():
            raise SFTDatasetError(
                f"{path} does not exist (write one with `tsmg rollout --game GAME --model oracle --out DIR`)"
            )
        samples += chat_samples(
            read_episodes(path),
            config.lap,
            template=config.data.answer_template,
            observation_lines=config.observation_lines,
            agents=config.data.agents,
            source=str(path),
        )
    if not samples:
        raise SFTDatasetError(f"no decision to learn from in {', '.join(config.data.episodes)}")
    return samples


# ============================================================================ training
@dataclass
class SFTResult:
    """What a supervised warm start left behind.

    Attributes:
        run_dir: The run folder.
        final_model: Full model folder (``hf:FINAL`` loads it).
        adapter: The LoRA adapter folder (LoRA runs only).
        samples: Samples in the dataset.
        steps: Optimizer steps done.
        train_loss: Mean training loss over this session's steps.
        seconds: Wall time of the training itself (every session's).
        cpu_seconds: CPU time of the whole run, set-up included (every thread, user + system), a resumed run's
            earlier sessions counted up to their last checkpoint.
        log: This session's log rows (also in ``metrics.jsonl``).
        resumed_from: The step of the checkpoint this session continued (None: a fresh start).
    """

    run_dir: Path
    final_model: Path
    adapter: Path | None
    samples: int
    steps: int
    train_loss: float
    seconds: float
    cpu_seconds: float
    log: list[dict[str, Any]]
    resumed_from: int | None = None


def model_source(config: SFTConfig) -> str:
    """The folder (or hub id) the initial weights load from."""
    if config.model.spec == "smollm2":
        from backends.embedded import embedded_model_dir

        return str(embedded_model_dir())
    return config.model.spec.partition(":")[2]


def tokenized(backend: TrainableModel, samples: Sequence[ChatSample]) -> dict[str, list[list[int]]]:
    """``input_ids`` (prompt as the backend encodes it for generation, answer, end-of-turn) and ``completion_mask``."""
    unique = list(dict.fromkeys(json.dumps(sample.messages) for sample in samples))
    encoded = backend.encode_prompts([GenerationRequest(messages=json.loads(key)) for key in unique])
    prompt_ids = dict(zip(unique, encoded, strict=True))
    end = list(backend.eos_ids[:1])
    input_ids, masks = [], []
    for sample in samples:
        prompt = prompt_ids[json.dumps(sample.messages)]
        answer = backend.tokenizer(sample.answer, add_special_tokens=False)["input_ids"] + end
        input_ids.append(list(prompt) + list(answer))
        masks.append([0] * len(prompt) + [1] * len(answer))
    return {"input_ids": input_ids, "completion_mask": masks}


def run_sft(
    config: SFTConfig,
    *,
    samples: Sequence[ChatSample] | None = None,
    on_log: Callable[[dict[str, Any]], None] | None = None,
    resume: bool = False,
) -> SFTResult:
    """Fine-tune as ``config`` says and write the run folder.

    Args:
        config: The run's configuration.
        samples: The dataset, when already built with :func:`build_dataset` (else built here,
            before any model loads).
        on_log: Called with each row the trainer logs (loss, learning rate, step).
        resume: Continue the run folder's fine-tune from its newest complete checkpoint (a fresh
            start when there is none); ``metrics.jsonl`` is cut back to that checkpoint's step first.

    Raises:
        SFTDatasetError: The transcripts cannot make a dataset (before any model loads).
        FileExistsError: The run folder holds a finished run, or a started one and ``resume`` is False.
        ValueError: A resumed run whose configuration (beyond :data:`~training.sft_checkpoints.RESUMABLE_CHANGES`)
            or dataset changed.
    """
    cpu_started = time.process_time()  # the budget counts set-up too (as tsmg train's does): what the run costs
    samples = list(samples) if samples is not None else build_dataset(config)
    run_dir = Path(config.run.out_dir)
    if (run_dir / FINAL_DIR).exists():
        raise FileExistsError(f"{run_dir} already holds a fine-tuned model: choose another --out")

    import datasets
    import torch
    from transformers import PrinterCallback, TrainerCallback
    from trl import SFTConfig as TRLConfig
    from trl import SFTTrainer

    from backends.hf import HFBackend
    from training.run_folder import check_run_folder
    from training.sft_checkpoints import (
        RESUMABLE_CHANGES,
        RunCost,
        checkpoint_step,
        latest_checkpoint,
        remove_incomplete,
    )

    check_run_folder(config, run_dir, resume, resumable=RESUMABLE_CHANGES, holds="a started fine-tune")
    checkpoints = run_dir / CHECKPOINTS_DIR
    checkpoint = latest_checkpoint(checkpoints) if resume else None
    dataset_text = "".join(sample.to_json() + "\n" for sample in samples)
    if checkpoint is not None and (run_dir / DATASET_FILE).read_text(encoding="utf-8") != dataset_text:
        raise ValueError(
            f"{run_dir} was fine-tuned on other samples than {', '.join(config.data.episodes)} make now: "
            "restore the transcripts it began with, or choose another --out"
        )
    resumed_from = checkpoint_step(checkpoint) if checkpoint is not None else None
    if resume:  # rows past the checkpoint are written again; without one, the run starts afresh
        truncate_metrics(run_dir / METRICS_FILE, resumed_from if resumed_from is not None else -1)
        remove_incomplete(checkpoints)
    run_dir.mkdir(parents=True, exist_ok=True)
    config.to_yaml(run_dir / CONFIG_FILE)
    (run_dir / DATASET_FILE).write_text(dataset_text, encoding="utf-8")

    backend = HFBackend(model_source(config), dtype=config.model.dtype, threads=config.run.threads)
    dataset = datasets.Dataset.from_dict(tokenized(backend, samples))
    optim, lora, every = config.optim, config.model.finetune == "lora", config.run.checkpoint_every
    arguments = TRLConfig(
        output_dir=str(checkpoints),
        learning_rate=optim.lr,
        num_train_epochs=optim.epochs,
        max_steps=optim.max_steps or -1,
        per_device_train_batch_size=optim.batch_size,
        gradient_accumulation_steps=optim.grad_accumulation,
        lr_scheduler_type=optim.schedule,
        warmup_steps=optim.warmup_steps,
        weight_decay=optim.weight_decay,
        logging_steps=config.run.logging_steps,
        seed=config.run.seed,
        data_seed=config.run.seed,
        completion_only_loss=True,
        gradient_checkpointing=False,  # short sequences: recomputation would cost more than it saves
        bf16=backend.dtype == torch.bfloat16,
        use_cpu=backend.device == "cpu",
        save_strategy="steps" if every else "no",
        save_steps=every or 500,  # (unused without checkpoints)
        save_total_limit=1,  # an interrupted run's folder holds its newest checkpoint only
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    if lora:  # the backend's own adapter, as the MS-GRPO trainer adds it; seeded without touching the global stream
        model_config = config.model
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.run.seed)
            backend.add_lora(
                r=model_config.lora_r,
                alpha=int(model_config.lora_alpha),
                target_modules=model_config.lora_target_modules,
                dropout=model_config.lora_dropout,
            )
    log: list[dict[str, Any]] = []
    cpu_before, elapsed_before = RunCost.carried(checkpoint)
    cost = RunCost(cpu_started, config.run.max_cpu_seconds, cpu_before=cpu_before, elapsed_before=elapsed_before)

    class _Rows(TrainerCallback):
        def on_log(
            self,
            args: TrainingArguments,
            state: TrainerState,
            control: TrainerControl,
            logs: dict[str, Any] | None = None,
            **_: Any,  # Any: whatever else transformers passes a callback (ignored)
        ) -> None:
            row = {"step": int(state.global_step), **(logs or {})}
            log.append(row)
            with open(run_dir / METRICS_FILE, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(row) + "\n")
            if on_log is not None:
                on_log(row)

    trainer = SFTTrainer(
        model=backend.model,
        args=arguments,
        train_dataset=dataset,
        processing_class=backend.tokenizer,
        callbacks=[_Rows(), cost],
    )
    trainer.remove_callback(PrinterCallback)  # without progress bars it prints every log row; on_log reports them
    output = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint is not None else None)
    seconds, cpu_seconds = cost.elapsed_seconds(), cost.cpu_seconds()
    with open(run_dir / METRICS_FILE, "a", encoding="utf-8") as handle:  # what the run cost, as tsmg train logs it
        row = {"step": int(output.global_step), "time/elapsed_s": seconds, "time/cpu_s": cpu_seconds}
        handle.write(json.dumps(row) + "\n")
    final, adapter = save_final_model(backend, lora, run_dir)  # trains backend.model in place
    shutil.rmtree(checkpoints, ignore_errors=True)
    return SFTResult(
        run_dir=run_dir,
        final_model=final,
        adapter=adapter,
        samples=len(samples),
        steps=int(output.global_step),
        train_loss=float(output.training_loss),
        seconds=seconds,
        cpu_seconds=cpu_seconds,
        log=log,
        resumed_from=resumed_from,
    )
