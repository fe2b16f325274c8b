"""``tsmg sft``: a supervised warm start on episode transcripts (see :mod:`training.sft`).

Layers as in ``tsmg train``: the YAML file (``--config``; with ``--resume`` and no file, the run
folder's own ``config.yaml``), then the flags given, then ``--set SECTION.FIELD=VALUE`` overrides;
the whole config and then the dataset are checked before any model loads.

Examples::

    tsmg rollout --game FrozenLake-NoSlip-v0 --model oracle --episodes 200 --seed 5000000 --out runs/oracle
    tsmg sft --episodes runs/oracle/episodes.jsonl --model smollm2 --out runs/sft
    tsmg sft --config configs/sft/frozen_lake_smollm2.yaml --out runs/sft2 --set optim.max_steps=40
    tsmg sft --resume --out runs/sft    # after a crash or kill: continues from the last checkpoint
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tsmg.apps.cli_parser import document_default, examples
from tsmg.apps.config_layers import FieldFlag, add_field_flags, layered_data, validated

#: Flags that set one configuration field each: (flag, section, field, type, help).
_FIELD_FLAGS: tuple[FieldFlag, ...] = (
    ("--model", "model", "spec", str, "model spec: smollm2 or hf:PATH"),
    ("--finetune", "model", "finetune", str, "lora or full"),
    ("--dtype", "model", "dtype", str, "auto, float32, bfloat16 or float16"),
    ("--lr", "optim", "lr", float, "peak learning rate"),
    ("--epochs", "optim", "epochs", float, "passes over the dataset"),
    (
        "--max-steps",
        "optim",
        "max_steps",
        int,
        "optimizer steps, overriding --epochs (default: none, --epochs decides)",
    ),
    ("--batch-size", "optim", "batch_size", int, "samples per forward/backward pass"),
    ("--seed", "run", "seed", int, "seed of the data order and the adapter's initialisation"),
    ("--threads", "run", "threads", int, "torch CPU threads (default: torch's own)"),
    (
        "--max-cpu-seconds",
        "run",
        "max_cpu_seconds",
        float,
        "stop after this much CPU time of the fine-tune, earlier sessions of a resumed run counted (default: no limit)",
    ),
    ("--checkpoint-every", "run", "checkpoint_every", int, "checkpoint every N optimizer steps (0: never)"),
)


def add_sft_command(commands: Any) -> None:
    """Register ``sft`` on an argparse sub-parser set."""
    sft = commands.add_parser(
        "sft",
        help="supervised warm start on episode transcripts (e.g. an oracle's), in a LAP's prompt and action format",
        description=(
            "Fine-tune a local model on transcripts. Layers: --config file, then flags, then --set overrides; a "
            "flag's default is the config's (shown below) unless --config sets it."
        ),
        epilog=examples(
            "tsmg rollout --game FrozenLake-NoSlip-v0 --model oracle --episodes 200 --seed 5000000 --out runs/oracle",
            "tsmg sft --episodes runs/oracle/episodes.jsonl --model smollm2 --out runs/sft",
            "tsmg sft --config configs/sft/frozen_lake_smollm2.yaml --out runs/sft2 --set optim.max_steps=40",
            "tsmg sft --episodes runs/oracle/episodes.jsonl --model smollm2 --dry-run",
            "tsmg sft --resume --out runs/sft  # after a crash or kill: continues from the last checkpoint",
        ),
    )
    sft.add_argument("--config", type=Path, help="YAML config, see configs/ (default: none)")
    sft.add_argument(
        "--episodes",
        action="append",
        metavar="FILE",
        help="episodes.jsonl of the transcripts (repeatable; default: none, give it or --config)",
    )
    document_default(
        sft.add_argument("--out", type=Path, help="run folder (dataset.jsonl, metrics.jsonl, final model)"),
        lambda: _config_default("run.out_dir"),
    )
    sft.add_argument("--resume", action="store_true", help="continue from the run folder's last checkpoint")
    add_field_flags(sft, _FIELD_FLAGS, _sft_config, metavars={"--model": "SPEC"})
    document_default(
        sft.add_argument("--action-format", choices=["tag", "regex", "choice", "raw"], help="the LAP's action format"),
        lambda: _config_default("lap.action_format.kind"),
    )
    sft.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.FIELD=VALUE",
        help="override any config field (VALUE is YAML; repeatable)",
    )
    sft.add_argument("--dry-run", action="store_true", help="build and check the dataset, train nothing")
    sft.set_defaults(handler=cmd_sft)


def _sft_config() -> type:
    from training.sft import SFTConfig

    return SFTConfig


def _config_default(path: str) -> object:
    from tsmg.apps.cli_parser import config_default

    return config_default(_sft_config(), path)


def sft_config_from_args(args: argparse.Namespace) -> Any:
    """The :class:`~training.sft.SFTConfig` the arguments describe (validated).

    Raises:
        ValueError: A bad flag value or an invalid configuration.
    """

    def own_flags(data: dict[str, Any]) -> None:
        if args.episodes:
            data.setdefault("data", {})["episodes"] = [str(path) for path in args.episodes]
        if args.action_format is not None:
            data.setdefault("lap", {})["action_format"] = {"kind": args.action_format}

    data = layered_data(args, _FIELD_FLAGS, "an SFT config", own_flags)
    if "data" not in data or "model" not in data:
        raise ValueError("name the transcripts and the model (--episodes FILE --model M) or give --config FILE.yaml")
    return validated(_sft_config(), data, "SFT configuration")


def cmd_sft(args: argparse.Namespace) -> int:
    """``tsmg sft``: check the dataset, fine-tune, say where the model went."""
    import datasets

    import games  # noqa: F401  (registers the catalog)
    from backends.hf import describe_dtype
    from training.run_log import quiet_library_progress
    from training.sft import SFTDatasetError, build_dataset, run_sft

    config = sft_config_from_args(args)
    try:
        samples = build_dataset(config)
    except SFTDatasetError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{len(samples)} samples from {', '.join(config.data.episodes)}; the first answer: {samples[0].answer!r}")
    if args.dry_run:
        return 0
    print(f"fine-tuning {config.model.spec} in {describe_dtype(config.model.dtype)}", flush=True)
    quiet_library_progress()
    datasets.disable_progress_bars()

    def show(row: dict[str, Any]) -> None:
        if "loss" in row:
            print(f"step {row['step']}  loss {row['loss']:.4f}  lr {row.get('learning_rate', 0):.2e}", flush=True)

    try:
        result = run_sft(config, samples=samples, on_log=show, resume=args.resume)
    except FileExistsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if result.resumed_from is not None:
        print(f"resumed from the checkpoint of step {result.resumed_from}")
    took = f"{result.seconds:.0f} s ({result.cpu_seconds:.0f} CPU-s)"
    print(f"{result.steps} steps over {result.samples} samples in {took}, mean loss {result.train_loss:.4f}")
    print(f"final model: {result.final_model}  (tsmg eval --model hf:{result.final_model} ...)")
    return 0
