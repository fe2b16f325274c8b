"""``tsmg export``: a run's episodes as token-exact training data for another trainer.

Each row is one model step of one credited seat: the prompt's token ids exactly as the model
read them, the tokens it wrote, their behaviour log-probabilities, and the step's advantage from
any registered credit assigner (:data:`training.credit.CREDIT_ASSIGNERS`, ``--credit NAME``).
``--sampler NAME`` (e.g. ``aaw``) draws the rows as an update of tsmg's trainer would (whole
trajectories by their mean |A|, repeats kept), so MS-GRPO's credit *and* its sampling can feed
another trainer. Nothing is re-tokenised: a row's ids and logprobs are the record's.

Formats (:data:`FORMATS`), one JSON object per line:

``jsonl`` (tsmg's own)
    ``episode_id``, ``group_id``, ``seed``, ``agent``, ``step`` (index in the episode),
    ``round``, ``prompt_ids``, ``completion_ids``, ``logprobs`` (one per completion id),
    ``advantage``, ``episode_return``, ``step_reward``, ``choices`` (the answers a constrained
    decision allowed, or null), ``valid``.
``trl``
    TRL's names: ``prompt_ids``, ``completion_ids``, ``logprobs`` (what a GRPOTrainer
    ``rollout_func`` returns per row), ``input_ids`` = prompt + completion with
    ``completion_mask`` (0 on the prompt, 1 on the completion: TRL's processed prompt-completion
    dataset, which its ``SFTTrainer`` reads as is), ``advantage``, ``reward`` (the episode
    return), and ``episode_id``, ``group_id``, ``seed``, ``agent``, ``step``.
``verl``
    verl's ``DataProto`` names, unpadded (left-pad ``prompts`` and right-pad the per-token
    fields into the batch): ``prompts``, ``responses``, ``response_mask`` (all 1),
    ``old_log_probs``, ``advantages`` (the step's advantage on every response token),
    ``token_level_rewards`` (the step's reward on its last token), ``uid`` (the group: verl's
    GRPO groups rows by it), ``data_source`` (the game id), ``extra_info`` (``episode_id``,
    ``seed``, ``agent``, ``step``).

Bad input ends in one sentence: a run written without token ids (``--no-token-ids``), records
of a schema version before prompt ids were recorded, an assigner whose needs the episodes do not
meet (groups, state keys, ...).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from training.credit import CreditAssignment, StepCredit, assign_credit, credit_assigner
from training.sampling import draw_steps
from tsmg.apps.cli_parser import examples
from tsmg.episode import Episode, StepRecord, read_episodes
from tsmg.run_folder import EPISODES_FILE, is_training_run
from tsmg.seeding import seed_generator

ExportFormat = Literal["jsonl", "trl", "verl"]
FORMATS: tuple[str, ...] = get_args(ExportFormat)


@dataclass(frozen=True)
class ExportedStep:
    """One credited model step and what every format writes of it."""

    episode: Episode
    step: StepRecord
    advantage: float


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export_run` wrote.

    Attributes:
        path: The file written.
        rows: Rows written.
        episodes: Episodes the rows come from.
        skipped_failed: Episodes left out because they failed (their ``error`` is set).
        credit: The credit assigner used.
    """

    path: Path
    rows: int
    episodes: int
    skipped_failed: int
    credit: str


def episodes_file(run: str | Path) -> Path:
    """The episodes file of ``run``: a run folder holding ``episodes.jsonl``, or the file itself.

    Raises:
        FileNotFoundError: Neither exists (the message says what was looked for, and for a
            training run, which setting stores its episodes).
    """
    path = Path(run)
    if path.is_dir():
        if not (path / EPISODES_FILE).is_file() and is_training_run(path):
            raise FileNotFoundError(
                f"{run} is a training run that stored no {EPISODES_FILE}: training keeps its episodes only with "
                "run.episodes_every set (`run.episodes_every: 1` in the config, or `tsmg train ... --set "
                "run.episodes_every=1`), so train with it to have episodes to export"
            )
        path = path / EPISODES_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{run}: no {EPISODES_FILE} there (give a run folder or an episodes file; `tsmg eval --out` and "
            "`tsmg rollout --out` write one, `tsmg train` only with run.episodes_every set)"
        )
    return path


def load_for_export(path: Path) -> tuple[list[Episode], int]:
    """The finished episodes of ``path`` (failed ones counted and left out).

    Raises:
        ValueError: No episode, a record of schema version 1 (no prompt ids), or a run written
            without token ids.
    """
    episodes = list(read_episodes(path))
    finished = [episode for episode in episodes if episode.error is None]
    if not finished:
        raise ValueError(f"{path} holds no finished episode to export")
    old = [episode for episode in finished if episode.schema_version < 2]
    if old:
        raise ValueError(
            f"{path} holds episode records of schema version {old[0].schema_version}, written before prompt token "
            "ids were recorded: they cannot be exported token-exact (play the run again with this tsmg)"
        )
    model_steps = [step for episode in finished for step in episode.steps if step.prompt is not None]
    if not model_steps:
        raise ValueError(f"{path} holds no model step (only scripted policies played): nothing to train on")
    if all(step.token_ids is None for step in model_steps):
        raise ValueError(
            f"{path} was written without token ids (--no-token-ids): rerun without that flag to export training data"
        )
    return finished, len(episodes) - len(finished)


def credited_steps(
    episodes: Sequence[Episode],
    credit: str,
    *,
    params: Mapping[str, Any] | None = None,
    agent: str | None = None,
    sampler: str | None = None,
    samples: int | None = None,
    seed: int = 0,
) -> list[ExportedStep]:
    """Every model step with token ids and its advantage (or the steps ``sampler`` draws).

    Raises:
        ValueError: An unknown assigner or sampler, or episodes the assigner cannot feed on.
    """
    spec = credit_assigner(credit)
    if "groups" in spec.needs and not any(_groups(episodes).values()):
        raise ValueError(
            f"credit assigner {credit} compares the episodes of a group (one seed, several samples), and these "
            "episodes have no group of two or more: export a training run, or play groups (--group-size)"
        )
    try:
        assignment = assign_credit(credit, episodes, agent=agent, params=params)
    except ValueError as error:
        raise ValueError(f"credit assigner {credit} cannot run on these episodes: {error}") from None
    chosen = _draw(assignment, sampler, samples, seed)
    by_id = {episode.episode_id: episode for episode in episodes}
    rows = []
    for item in chosen:
        episode = by_id[item.episode_id]
        step = episode.steps[item.step_index]
        if step.prompt_token_ids is not None and step.token_ids is not None and step.logprobs is not None:
            rows.append(ExportedStep(episode, step, item.advantage))
    return rows


def _groups(episodes: Sequence[Episode]) -> dict[str, bool]:
    sizes: dict[str, int] = {}
    for episode in episodes:
        if episode.group_id is not None:
            sizes[episode.group_id] = sizes.get(episode.group_id, 0) + 1
    return {group: size > 1 for group, size in sizes.items()}


def _draw(assignment: CreditAssignment, sampler: str | None, samples: int | None, seed: int) -> list[StepCredit]:
    if sampler is None:
        return assignment.steps()
    steps, _ = draw_steps(assignment, sampler, seed_generator(seed), count=samples)
    return steps


def jsonl_row(item: ExportedStep) -> dict[str, Any]:
    """A row of the ``jsonl`` format (see the module docstring)."""
    episode, step = item.episode, item.step
    return {
        "episode_id": episode.episode_id,
        "group_id": episode.group_id,
        "seed": episode.seed,
        "agent": step.agent,
        "step": step.index,
        "round": step.round,
        "prompt_ids": step.prompt_token_ids,
        "completion_ids": step.token_ids,
        "logprobs": step.logprobs,
        "advantage": item.advantage,
        "episode_return": float(episode.returns.get(step.agent, 0.0)),
        "step_reward": step.reward,
        "choices": step.choices,
        "valid": step.valid,
    }


def trl_row(item: ExportedStep) -> dict[str, Any]:
    """A row of the ``trl`` format (see the module docstring)."""
    episode, step = item.episode, item.step
    prompt, completion = list(step.prompt_token_ids or []), list(step.token_ids or [])
    return {
        "prompt_ids": prompt,
        "completion_ids": completion,
        "logprobs": step.logprobs,
        "input_ids": prompt + completion,
        "completion_mask": [0] * len(prompt) + [1] * len(completion),
        "advantage": item.advantage,
        "reward": float(episode.returns.get(step.agent, 0.0)),
        "episode_id": episode.episode_id,
        "group_id": episode.group_id,
        "seed": episode.seed,
        "agent": step.agent,
        "step": step.index,
    }


def verl_row(item: ExportedStep) -> dict[str, Any]:
    """A row of the ``verl`` format (see the module docstring)."""
    episode, step = item.episode, item.step
    completion = list(step.token_ids or [])
    rewards = [0.0] * len(completion)
    if rewards:
        rewards[-1] = step.reward
    return {
        "prompts": step.prompt_token_ids,
        "responses": completion,
        "response_mask": [1] * len(completion),
        "old_log_probs": step.logprobs,
        "advantages": [item.advantage] * len(completion),
        "token_level_rewards": rewards,
        "uid": episode.group_id or episode.episode_id,
        "data_source": episode.game_id,
        "extra_info": {"episode_id": episode.episode_id, "seed": episode.seed, "agent": step.agent, "step": step.index},
    }


ROW_WRITERS: dict[str, Callable[[ExportedStep], dict[str, Any]]] = {
    "jsonl": jsonl_row,
    "trl": trl_row,
    "verl": verl_row,
}


def export_run(
    run: str | Path,
    out: str | Path | None = None,
    *,
    format: ExportFormat = "jsonl",
    credit: str = "ms-grpo",
    params: Mapping[str, Any] | None = None,
    agent: str | None = None,
    sampler: str | None = None,
    samples: int | None = None,
    seed: int = 0,
) -> ExportResult:
    """Write the run's credited model steps as ``format`` rows (see the module docstring).

    Args:
        run: A run folder holding ``episodes.jsonl``, or an episodes file.
        out: The file to write (default: ``export-FORMAT.jsonl`` beside the episodes); replaced
            whole, through a temporary file, so a failed export leaves nothing half-written.
        format: ``jsonl``, ``trl`` or ``verl``.
        credit: A registered credit assigner.
        params: Its parameters.
        agent: The seat to export (None: every seat).
        sampler: Draw the rows with this registered sampler (None: every step once).
        samples: Trajectories drawn (None: as many as there are).
        seed: Seed of the draw.

    Raises:
        FileNotFoundError: No episodes file.
        ValueError: An unknown format, assigner or sampler, or data the export cannot use (the
            message says which and what to do).
    """
    if format not in ROW_WRITERS:
        raise ValueError(f"unknown export format {format!r}; choose one of {', '.join(FORMATS)}")
    source = episodes_file(run)
    episodes, failed = load_for_export(source)
    items = credited_steps(episodes, credit, params=params, agent=agent, sampler=sampler, samples=samples, seed=seed)
    target = Path(out) if out is not None else source.with_name(f"export-{format}.jsonl")
    temporary = target.with_name(target.name + ".tmp")
    writer = ROW_WRITERS[format]
    with open(temporary, "w", encoding="utf-8") as handle:
        for item in items:
            handle.write(json.dumps(writer(item), separators=(",", ":")) + "\n")
    temporary.replace(target)
    return ExportResult(target, len(items), len({item.episode.episode_id for item in items}), failed, credit)


def add_export_command(commands: Any) -> None:
    """Register ``export`` on the ``tsmg`` sub-parser set."""
    export = commands.add_parser(
        "export",
        help="write a run's episodes as token-exact training data (trl, verl or jsonl rows)",
        description="One row per model step: prompt ids, completion ids, logprobs and the step's advantage.",
        epilog=examples(
            "# credit compares the episodes of a group: export a training run's (kept with run.episodes_every)",
            "tsmg train --config configs/frozen_lake_tiny.yaml --set run.episodes_every=1 --out runs/fl-episodes",
            "tsmg export runs/fl-episodes --format trl",
            "tsmg export runs/fl-episodes/episodes.jsonl --format verl --credit ms-grpo --out rows.jsonl",
            "tsmg export runs/fl-episodes --agent player --sampler aaw --samples 64 --seed 1 --json",
        ),
    )
    export.add_argument("run", type=Path, help="run folder (holding episodes.jsonl) or an episodes file")
    export.add_argument("--format", choices=FORMATS, default="jsonl", help="row layout (default: jsonl)")
    export.add_argument("--credit", default="ms-grpo", help="registered credit assigner, see tsmg algos")
    export.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an assigner parameter, e.g. std=population (repeatable)",
    )
    export.add_argument("--agent", help="export this seat only (default: every seat)")
    export.add_argument("--sampler", help="draw trajectories with this sampler, e.g. aaw (default: every step once)")
    export.add_argument("--samples", type=int, help="trajectories drawn with --sampler (default: as many as there are)")
    export.add_argument("--seed", type=int, default=0, help="seed of the --sampler draw")
    export.add_argument("--out", type=Path, help="file to write (default: RUN/export-FORMAT.jsonl)")
    export.add_argument("--json", action="store_true", help="print what was written as JSON")
    export.set_defaults(handler=_cmd_export)


def _cmd_export(args: Any) -> int:
    from tsmg.assignments import parse_assignments

    result = export_run(
        args.run,
        args.out,
        format=args.format,
        credit=args.credit,
        params=parse_assignments(args.param, "--param KEY=VALUE"),
        agent=args.agent,
        sampler=args.sampler,
        samples=args.samples,
        seed=args.seed,
    )
    summary = {
        "path": str(result.path),
        "format": args.format,
        "rows": result.rows,
        "episodes": result.episodes,
        "skipped_failed": result.skipped_failed,
        "credit": result.credit,
    }
    if args.json:
        print(json.dumps(summary))
    else:
        skipped = f", {result.skipped_failed} failed episodes left out" if result.skipped_failed else ""
        counts = f"{result.rows} {args.format} rows from {result.episodes} episodes"
        print(f"wrote {counts} ({result.credit}{skipped}) to {result.path}")
    return 0
