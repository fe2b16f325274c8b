"""The language-agent policy's command-line flags: one home for ``tsmg eval`` and ``tsmg prompt``.

How a model is prompted and its answers read (:class:`~tsmg.lap.LAPConfig`: system prompt,
history, layout, action format, re-prompts, sampling) is given on the command line by the same
flags wherever a command plays or shows a language model's decision. Both commands add them with
:func:`add_lap_arguments` and read them back with :func:`lap_config_from_args`, so the prompt
``tsmg prompt`` prints is the prompt ``tsmg eval`` sends with the same flags (a test compares them).
"""

from __future__ import annotations

import argparse

from tsmg.lap import ActionFormat, LAPConfig, PromptTemplate


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
        "--action-format",
        choices=["tag", "regex", "choice", "raw", "tool"],
        default="tag",
        help="how the answer names its action",
    )
    lap.add_argument("--tool-choice", choices=["auto", "required"], default="auto", help="with --action-format tool")
    lap.add_argument("--action-tag", default="action", help="the tag of --action-format tag (<action>…</action>)")
    lap.add_argument(
        "--action-regex", metavar="PATTERN", help="with --action-format regex: the action's pattern (default: none)"
    )
    lap.add_argument("--reprompt", type=int, default=0, help="retries for an invalid answer")
    lap.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (0: greedy)")
    lap.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass")
    lap.add_argument("--max-tokens", type=int, default=64, help="most tokens per answer")


def lap_config_from_args(args: argparse.Namespace, seed: int = 0) -> LAPConfig:
    """The :class:`~tsmg.lap.LAPConfig` the flags of :func:`add_lap_arguments` describe (validated).

    Args:
        args: The parsed command line.
        seed: The run seed, which keys each decision's sampling seed (:mod:`tsmg.seeding`).

    Raises:
        pydantic.ValidationError: A value the LAP refuses (a regex that does not compile, say).
    """
    template = PromptTemplate(history=args.history, history_k=args.history_k, observation_last=args.observation_last)
    if args.system is not None:
        template = template.model_copy(update={"system": args.system})
    return LAPConfig(
        template=template,
        action_format=ActionFormat(
            kind=args.action_format, tag=args.action_tag, pattern=args.action_regex, tool_choice=args.tool_choice
        ),
        reprompt=args.reprompt,
        temperature=args.temperature,
        top_p=args.top_p,
        max_tokens=args.max_tokens,
        seed=seed,
    )
