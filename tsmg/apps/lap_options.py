"""The language-agent policy's command-line flags: one home for ``tsmg eval`` and ``tsmg prompt``.

How a model is prompted and its answers read (:class:`~tsmg.lap.LAPConfig`: system prompt,
history, layout, action format, re-prompts, sampling) is given on the command line by the same
flags wherever a command plays or shows a language model's decision. Both commands add them with
:func:`add_lap_arguments` and read them back with :func:`lap_config_from_args`, so the prompt
``tsmg prompt`` prints is the prompt ``tsmg eval`` sends with the same flags (a test compares them).
"""

from __future__ import annotations

import argparse
from typing import Any

from tsmg.arena import LAP_PRESETS, preset_settings
from tsmg.lap import ActionFormat, LAPConfig, PromptTemplate
from tsmg.registry import spec


def add_lap_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the LAP's flags to ``parser``, in their own help group ("language-agent policy")."""
    lap = parser.add_argument_group("language-agent policy")
    lap.add_argument("--system", help="system prompt text (default: the LAP's own system prompt)")
    lap.add_argument(
        "--history", choices=["none", "last_k", "full"], default="none", help="earlier turns shown in the prompt"
    )
    lap.add_argument("--history-k", type=int, default=2, help="turns shown with --history last_k")
    lap.add_argument(
        "--observation-last",
        action="store_true",
        help="the observation at the end of the user turn, the format instructions before it (as trained with it)",
    )
    lap.add_argument(
        "--lap",
        choices=list(LAP_PRESETS),
        help="a named set of the LAP settings below, which flags given beside it override; arena: reason, then "
        '"Final Answer: MOVE", 1,024 tokens, 2 re-prompts (see docs/evaluate.md; default: none)',
    )
    lap.add_argument(
        "--action-format",
        choices=["tag", "regex", "choice", "raw", "tool", "final"],
        help='how the answer names its action (final: reasoning, then a line "Final Answer: MOVE"; default: tag)',
    )
    lap.add_argument("--tool-choice", choices=["auto", "required"], default="auto", help="with --action-format tool")
    lap.add_argument("--action-tag", default="action", help="the tag of --action-format tag (<action>…</action>)")
    lap.add_argument(
        "--action-regex", metavar="PATTERN", help="with --action-format regex: the action's pattern (default: none)"
    )
    lap.add_argument("--reprompt", type=int, help="retries for an invalid answer, told the reason (default: 0)")
    lap.add_argument(
        "--legal-moves",
        choices=["list", "none"],
        help="list the legal moves in the prompt, or name none (none also drops them from OpenSpiel games' views; "
        "default: list)",
    )
    lap.add_argument(
        "--votes",
        type=int,
        metavar="K",
        help="answers sampled per decision; the move most valid answers name is played (default: 1)",
    )
    lap.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (0: greedy)")
    lap.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass")
    lap.add_argument("--max-tokens", type=int, help="most tokens per answer (default: 64)")


def lap_config_from_args(args: argparse.Namespace, seed: int = 0) -> LAPConfig:
    """The :class:`~tsmg.lap.LAPConfig` the flags of :func:`add_lap_arguments` describe (validated).

    Args:
        args: The parsed command line.
        seed: The run seed, which keys each decision's sampling seed (:mod:`tsmg.seeding`).

    The ``--lap`` preset's settings (:data:`tsmg.arena.LAP_PRESETS`) come first; a flag given
    beside it overrides its setting.

    Raises:
        pydantic.ValidationError: A value the LAP refuses (a regex that does not compile, say).
    """
    template = PromptTemplate(history=args.history, history_k=args.history_k, observation_last=args.observation_last)
    if args.system is not None:
        template = template.model_copy(update={"system": args.system})
    settings = preset_settings(args.lap)
    given = {"reprompt": args.reprompt, "max_tokens": args.max_tokens, "legal_moves": args.legal_moves}
    settings.update({key: value for key, value in {**given, "votes": args.votes}.items() if value is not None})
    action_format = settings.pop("action_format", {})
    if args.action_format is not None:
        action_format["kind"] = args.action_format
    return LAPConfig(
        template=template,
        action_format=ActionFormat(
            **action_format, tag=args.action_tag, pattern=args.action_regex, tool_choice=args.tool_choice
        ),
        temperature=args.temperature,
        top_p=args.top_p,
        seed=seed,
        **settings,
    )


def legal_moves_options(game_ids: list[str], lap: LAPConfig, options: dict[str, dict[str, Any]]) -> None:
    """Under ``legal_moves="none"``, set ``list_moves=false`` in ``options`` (game → options) of the games that take it.

    OpenSpiel games take it: their full and compact views list the legal moves themselves. Other
    games' texts name their moves as part of their rules, if at all (FrozenLake's four actions), and
    the list ``none`` drops is the LAP's format line.
    """
    if lap.legal_moves == "none":
        for game_id in game_ids:
            config = getattr(spec(game_id).load(), "Config", None)
            if config is not None and "list_moves" in getattr(config, "model_fields", {}):
                options.setdefault(game_id, {}).setdefault("list_moves", False)
