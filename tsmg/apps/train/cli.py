"""``tsmg train`` and ``tsmg algos``: training from flags or a YAML file, and the algorithm listing.

:func:`add_commands` registers both on the ``tsmg`` sub-parser set. A configuration is built in
layers: the YAML file (``--config``; with ``--resume`` and no file, the run folder's own
``config.yaml``), then the flags given, then ``--set SECTION.FIELD=VALUE`` overrides (values
parsed as YAML), and is validated as a whole before any model loads.

Examples::

    tsmg train --game FrozenLake-v0 --model tiny --finetune full --algo ms-grpo --updates 50 --out runs/fl
    tsmg train --config configs/frozen_lake_tiny.yaml --out runs/fl2 --set optim.lr=5e-4
    tsmg train --resume --out runs/fl          # after a crash or kill: continues from the last checkpoint
    tsmg train --game KuhnPoker-v0 --model tiny --algo rae --out runs/kuhn   # self-play: one model, both seats
    tsmg train --game FrozenLake-v0 --model tiny --print-config   # every key, described: save it for --config
    tsmg algos --json
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from tsmg.apps.cli_parser import config_default, document_default, examples
from tsmg.apps.config_layers import FieldFlag, add_field_flags, layered_data, validated
from tsmg.apps.next_steps import interrupted_text, view_text
from tsmg.run_folder import CHECKPOINTS_DIR, TENSORBOARD_DIR, checkpoint_step

#: Flags that set one configuration field each: (flag, section, field, type, help).
_FIELD_FLAGS: tuple[FieldFlag, ...] = (
    ("--game", "rollout", "game_id", str, "registered game id, e.g. FrozenLake-v0"),
    ("--group-size", "rollout", "group_size", int, "episodes per group (G), all from one seed"),
    ("--groups", "rollout", "groups_per_update", int, "groups (distinct seeds) per update"),
    (
        "--opponent",
        "rollout",
        "opponent",
        str,
        "policy of the untrained seats: random, oracle, fixed:TEXT (default: none, self-play)",
    ),
    ("--model", "model", "spec", str, "model spec: tiny, smollm2 or hf:PATH_OR_ID"),
    ("--finetune", "model", "finetune", str, "lora or full"),
    ("--lora-r", "model", "lora_r", int, "LoRA rank"),
    ("--dtype", "model", "dtype", str, "auto, float32, bfloat16 or float16"),
    ("--algo", "credit", "name", str, "credit assigner (see tsmg algos)"),
    ("--sampler", "sampler", "name", str, "episode sampler: aaw, uniform, uniform-nonzero"),
    (
        "--samples-per-update",
        "sampler",
        "samples_per_update",
        int,
        "draws per update (default: as many as there are items to draw from)",
    ),
    ("--loss", "loss", "name", str, "policy loss: ppo-clip, clip-higher, turn-clip, sorl, gspo"),
    ("--kl-beta", "loss", "kl_beta", float, "weight of the KL to the reference"),
    ("--entropy-coef", "loss", "entropy_coef", float, "weight of the entropy bonus"),
    ("--lr", "optim", "lr", float, "peak learning rate"),
    ("--micro-batch-size", "optim", "micro_batch_size", int, "sequences per forward/backward pass"),
    ("--updates", "run", "updates", int, "policy updates"),
    ("--max-seconds", "run", "max_seconds", float, "stop after this much wall time (default: no limit)"),
    (
        "--max-cpu-seconds",
        "run",
        "max_cpu_seconds",
        float,
        "stop after this much CPU time of the training process (default: no limit)",
    ),
    (
        "--episodes",
        "run",
        "episodes",
        int,
        "stop after this many training episodes; the lr schedule follows them (default: no limit)",
    ),
    ("--seed", "run", "seed", int, "seed of the whole run"),
    ("--eval-every", "run", "eval_every", int, "evaluate on held-out seeds every N updates (0: never)"),
    ("--eval-episodes", "run", "eval_episodes", int, "held-out episodes per evaluation"),
    ("--checkpoint-every", "run", "checkpoint_every", int, "checkpoint every N updates (0: at the end)"),
    ("--keep-last", "run", "keep_last", int, "checkpoints kept"),
    ("--threads", "run", "threads", int, "torch CPU threads (default: torch's own)"),
    (
        "--teacher",
        "distill",
        "teacher",
        str,
        "on-policy distillation teacher: hf:PATH, smollm2 or hf:RUN, its final/ (default: none, no distillation)",
    ),
)


def add_commands(commands: Any) -> None:
    """Register ``train`` and ``algos`` on an argparse sub-parser set (``parser.add_subparsers()``)."""
    train = commands.add_parser(
        "train",
        help="train a model on a game with MS-GRPO (or another registered algorithm)",
        description=(
            "Train a local model on a game. Layers: --config file, then flags, then --set overrides; a flag's "
            "default is the config's (shown below) unless --config sets it."
        ),
        epilog=examples(
            "tsmg train --game FrozenLake-v0 --model tiny --finetune full --algo ms-grpo --updates 50 --out runs/fl",
            "tsmg train --config configs/frozen_lake_tiny.yaml --out runs/fl2 --set optim.lr=5e-4",
            "tsmg train --resume --out runs/fl  # after a crash or kill: continues from the last checkpoint",
            "# a two-player game without --opponent is self-play: the model plays and trains both seats",
            "tsmg train --game KuhnPoker-v0 --model tiny --algo rae --out runs/kuhn",
            "# every key with its value and what it does, as YAML that --config takes (train nothing):",
            "tsmg train --game FrozenLake-v0 --model tiny --print-config",
        ),
    )
    train.add_argument("--config", type=Path, help="YAML training config, see configs/ (default: none)")
    document_default(
        train.add_argument("--out", type=Path, help="run folder (metrics.jsonl, checkpoints, final model)"),
        lambda: _config_default("run.out_dir"),
    )
    train.add_argument("--resume", action="store_true", help="continue from the run folder's last checkpoint")
    add_field_flags(train, _FIELD_FLAGS, _train_config, metavars={"--game": "ID", "--model": "SPEC"})
    train.add_argument(
        "--self-play",
        action="store_true",
        help="deprecated, drop it: a multi-agent game without --opponent is self-play already (one model plays "
        "and trains every seat); kept so that old command lines still run, and a single-agent game is refused",
    )
    lap_flags = (
        ("--action-format", "action_format.kind", {"choices": ["tag", "regex", "choice", "raw"]}, "LAP action format"),
        ("--temperature", "temperature", {"type": float}, "sampling temperature of the rollouts"),
        ("--max-tokens", "max_tokens", {"type": int}, "most tokens per answer"),
    )
    for flag, name, kinds, text in lap_flags:
        document_default(train.add_argument(flag, help=text, **kinds), partial(_config_default, f"rollout.lap.{name}"))
    train.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.FIELD=VALUE",
        help="override any config field (VALUE is YAML), e.g. --set rollout.lap.template.history=last_k",
    )
    train.add_argument("--quiet", action="store_true", help="no per-update progress lines")
    train.add_argument(
        "--print-config",
        nargs="?",
        const="yaml",
        choices=["yaml", "markdown"],
        help="print the configuration the other flags describe, every key with what it does, and train nothing: "
        "'yaml' (a file --config takes; the default when the flag has no value) or 'markdown' (the reference "
        "page docs/config.md) (default: train)",
    )
    train.set_defaults(handler=cmd_train)

    algos = commands.add_parser(
        "algos",
        help="list credit assigners, samplers and losses",
        description="List what tsmg train can select: credit assigners (--algo), samplers (--sampler), losses "
        "(--loss) and aggregations, with what each needs.",
        epilog=examples("tsmg algos", "tsmg algos --json"),
    )
    algos.add_argument("--json", action="store_true", help="print a JSON document instead of the listing")
    algos.set_defaults(handler=cmd_algos)

    from tsmg.apps.train.sft_cli import add_sft_command

    add_sft_command(commands)


def _train_config() -> type:
    from training.config import TrainConfig

    return TrainConfig


def _config_default(path: str) -> object:
    return config_default(_train_config(), path)


def config_from_args(args: argparse.Namespace) -> Any:
    """The :class:`~training.config.TrainConfig` the arguments describe (validated).

    Raises:
        ValueError: A bad flag value, an invalid configuration, or neither a file nor ``--game``/``--model``.
    """
    return _config_and_defaults(args)[0]


def _config_and_defaults(args: argparse.Namespace) -> tuple[Any, list[tuple[str, Any]]]:
    """The validated config, and the model's defaults (:mod:`training.model_defaults`) it took, beneath every layer."""
    from training.model_defaults import apply_model_defaults

    data = _config_data(args)
    if "rollout" not in data or "model" not in data:
        raise ValueError("name the game and the model (--game G --model M) or give --config FILE.yaml")
    applied = apply_model_defaults(data)
    return validated(_train_config(), data, "training configuration"), applied


def _config_data(args: argparse.Namespace) -> dict[str, Any]:
    """The configuration's layers merged (file, flags, ``--set``), not yet validated."""

    def own_flags(data: dict[str, Any]) -> None:
        lap_flags = {"action_format": args.action_format, "temperature": args.temperature}
        for name, value in {**lap_flags, "max_tokens": args.max_tokens}.items():
            if value is not None:
                lap = data.setdefault("rollout", {}).setdefault("lap", {})
                lap[name] = {"kind": value} if name == "action_format" else value
        if args.self_play:
            print(SELF_PLAY_DEPRECATED, file=sys.stderr)
            data.setdefault("rollout", {})["self_play"] = True

    return layered_data(args, _FIELD_FLAGS, "a training config", own_flags)


#: What ``--self-play`` prints: it asks for what a multi-agent game without an opponent does anyway.
SELF_PLAY_DEPRECATED = (
    "warning: --self-play is deprecated and changes nothing: a multi-agent game without --opponent is self-play "
    "already (one model plays and trains every seat); drop the flag (rollout.self_play: true in a config still "
    "refuses a single-agent game)"
)


#: The required fields, and the example value ``--print-config`` shows where the flags leave one unset.
_REQUIRED_EXAMPLES = {("rollout", "game_id"): "FrozenLake-v0", ("model", "spec"): "tiny"}


def print_config(args: argparse.Namespace) -> int:
    """``tsmg train --print-config``: the configuration the flags describe as commented YAML, or the reference page."""
    from training.config import TrainConfig
    from training.model_defaults import apply_model_defaults
    from tsmg.config_reference import commented_yaml, markdown_reference

    if args.print_config == "markdown":
        intro = (
            "Every key of a training configuration (`tsmg train --config FILE.yaml`, `--set SECTION.KEY=VALUE`), "
            "its type, its default and what it does; generated from the schema (`training/config.py`) by "
            f"`{CONFIG_PAGE_COMMAND}`. `tsmg train --game ID --model SPEC --print-config` prints a whole "
            "configuration with these descriptions as comments, as a file that `--config` takes."
        )
        print(markdown_reference(TrainConfig, "Training configuration reference", intro), end="")
        return 0
    data = _config_data(args)
    notes: dict[str, str] = {}
    for (section, name), example in _REQUIRED_EXAMPLES.items():
        if name not in data.get(section, {}):
            data.setdefault(section, {})[name] = example
            notes[f"{section}.{name}"] = f"(Required; {example} is an example: set your own.)"
    for key, _ in apply_model_defaults(data):
        notes.setdefault(key, f"(The {data['model']['spec']} model's default: training/model_defaults.py.)")
    config = validated(_train_config(), data, "training configuration")
    header = (
        "# tsmg training configuration: every key with its value and what it does (tsmg train --print-config).\n"
        "# Train with it: tsmg train --config THIS_FILE.yaml\n"
    )
    print(header + commented_yaml(TrainConfig, config.model_dump(mode="json"), notes), end="")
    return 0


#: The command that writes docs/config.md (tests/test_config_reference.py compares the page with its output).
CONFIG_PAGE_COMMAND = "tsmg train --print-config markdown > docs/config.md"


def _progress_line(total: int, began: float, episodes: int | None = None) -> Any:
    def show(step: int, metrics: dict[str, float]) -> None:
        if episodes is None:
            parts = [f"update {step}/{total}"]
        else:  # an episode budget: that is the run's length
            parts = [f"update {step}", f"episodes {metrics.get('rollout/episodes_total', 0):.0f}/{episodes}"]
        for key, label in (
            ("rollout/success_rate", "success"),
            ("rollout/mean_return", "return"),
            ("eval/success_rate", "EVAL success"),
            ("loss/entropy", "entropy"),
            ("credit/zero_signal_fraction", "zero-signal groups"),
        ):
            if key in metrics and metrics[key] is not None:
                parts.append(f"{label} {metrics[key]:.3f}")
        if metrics.get("loss/skipped"):
            parts.append("SKIPPED (non-finite loss)")
        parts.append(f"{time.perf_counter() - began:.0f}s")
        print("  ".join(parts), flush=True)

    return show


def cmd_train(args: argparse.Namespace) -> int:
    """``tsmg train``: build the config, train, and say where everything went."""
    import games  # noqa: F401  (registers the catalog)
    from backends.hf import describe_dtype
    from training.config import IncompatibleGameError
    from training.distributed import DistributedSetupError, collective_failure, release_world
    from training.run_log import WANDB_DIR, quiet_library_progress, wandb_missing
    from training.trainer import TrainHooks, TrainingOOMError, train

    if args.print_config:
        return print_config(args)
    config, defaults = _config_and_defaults(args)
    missing = wandb_missing() if config.run.wandb.enabled else None
    if missing is not None:  # before the model is built, not after
        print(f"error: {missing}", file=sys.stderr)
        return 2
    quiet_library_progress()
    main_process = int(os.environ.get("RANK", "0")) == 0  # launched on several processes: rank 0 speaks for all
    echo: Any = print if main_process else _silent
    if defaults:
        from training.model_defaults import describe_applied

        echo(describe_applied(config.model.spec, defaults), flush=True)
    show_progress = main_process and not args.quiet
    run = config.run
    progress = _progress_line(run.updates, time.perf_counter(), run.episodes) if show_progress else None
    hooks = TrainHooks(on_update=progress)
    budget = (
        f"{run.updates} updates" if run.episodes is None else f"{run.episodes} episodes (at most {run.updates} updates)"
    )
    echo(
        f"training {config.model.spec} ({config.model.finetune}, {describe_dtype(config.model.dtype)}) on "
        f"{config.rollout.game_id} with {config.credit.name} + {config.sampler.name} + {config.loss.name}, "
        f"{budget} -> {run.out_dir}",
        flush=True,
    )
    out = Path(run.out_dir)
    if args.resume:
        echo(_resume_start_text(out), flush=True)
    try:
        result = train(config, resume=args.resume, hooks=hooks)
        release_world()
    except KeyboardInterrupt:  # what the last checkpoint holds is kept; --resume continues from it
        echo(f"\n{interrupted_text(args, out, ['--resume'])}\n{_resume_start_text(out, later=True)}", file=sys.stderr)
        return 130
    except (IncompatibleGameError, TrainingOOMError, FileExistsError, DistributedSetupError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # a collective that failed: a rank died or hung (timeout)
        message = collective_failure(error, int(os.environ.get("WORLD_SIZE", "1")))
        if message is None:
            raise
        print(f"error (process {os.environ.get('RANK', '0')}): {message}", file=sys.stderr, flush=True)
        return 3
    if result.resumed_from is not None:
        echo(f"resumed from the checkpoint of update {result.resumed_from}")
    evals = result.evals()
    if evals:
        (first_step, first), (last_step, last) = evals[0], evals[-1]
        echo(f"held-out success: {100 * first:.1f}% (update {first_step}) -> {100 * last:.1f}% (update {last_step})")
    if result.skipped_updates:
        echo(f"updates skipped for a non-finite loss or gradient: {result.skipped_updates}")
    if run.episodes is not None and result.stop_reason == "updates":
        played = max((row.get("rollout/episodes_total") or 0 for row in result.metrics), default=0)
        echo(
            f"stopped at run.updates={run.updates} with {played:.0f} of the {run.episodes} budgeted episodes played: "
            "raise run.updates and --resume to play the rest"
        )
    if result.stop_reason in ("max_seconds", "max_cpu_seconds"):
        budget = "wall-time" if result.stop_reason == "max_seconds" else "CPU-time"
        echo(f"stopped after update {result.steps}: the {budget} budget (run.{result.stop_reason}) was spent")
    echo(f"final model: {result.final_model}  (tsmg eval --model hf:{result.final_model} ...)")
    if result.adapter is not None:
        echo(f"LoRA adapter: {result.adapter}")
    if result.learning_curve is not None:
        echo(f"learning curve: {result.learning_curve}")
    echo(view_text(out))
    if (out / TENSORBOARD_DIR).is_dir():
        echo(f"live curves: tensorboard --logdir {shlex.quote(str(out / TENSORBOARD_DIR))}")
    if config.run.wandb.enabled and config.run.wandb.mode == "offline" and (out / WANDB_DIR).is_dir():
        echo(f"W&B (offline): upload with wandb sync {shlex.quote(str(out / WANDB_DIR))}/offline-run-*")
    return 0


def _resume_start_text(out: Path, later: bool = False) -> str:
    """Where a resumed run starts (``later``: where a resume of it would): its newest checkpoint's update."""
    from training.checkpoint import latest_checkpoint

    found = latest_checkpoint(out / CHECKPOINTS_DIR)
    step = checkpoint_step(found.name) if found is not None else None
    if step is None:
        return f"no checkpoint in {out} yet: {'it would start' if later else 'starting'} from update 0"
    if later:
        return f"a resume starts from update {step} (checkpoint {found}): the updates after it are played again"
    return f"resumed from update {step} (checkpoint {found})"


def _silent(*args: Any, **kwargs: Any) -> None:
    """Print nothing (the output of ranks other than 0)."""


def cmd_algos(args: argparse.Namespace) -> int:
    """``tsmg algos``: the selectable credit assigners, samplers, losses and aggregations."""
    from training.algorithms import list_algorithms

    listing = list_algorithms()
    if args.json:
        print(json.dumps(listing, indent=2))
        return 0
    for section, entries in listing.items():
        print(section.replace("_", " ") + ":")
        width = max(len(entry["name"]) for entry in entries)
        for entry in entries:
            needs = f"  [needs: {', '.join(entry['needs'])}]" if entry.get("needs") else ""
            print(f"  {entry['name']:<{width}}  {entry['description']}{needs}")
    return 0
