"""The next steps a command prints when it ends: where its run went, how to look at it, how to resume it.

``tsmg eval`` and ``tsmg train`` end with the run folder and the ``tsmg view`` command that opens
it; interrupted (Ctrl-C), they print the exact command that continues the run. That command is
the one the user typed, with the run folder made explicit (``--out``) and, for training,
``--resume`` added, so it resumes the same folder whatever the defaults.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path


def typed_arguments(args: argparse.Namespace) -> list[str]:
    """The arguments the user typed after ``tsmg`` (``--import`` included), as ``tsmg``'s ``main`` recorded them.

    A handler called without ``main`` (a test, another program) falls back to ``sys.argv``.
    """
    recorded = getattr(args, "command_line", None)
    return list(recorded if recorded is not None else sys.argv[1:])


def resume_command(args: argparse.Namespace, out: Path, extra: Sequence[str] = ()) -> str:
    """The command that continues the run in ``out``: the typed one, ``--out`` made explicit, ``extra`` flags added.

    Example:
        >>> namespace = argparse.Namespace(command_line=["train", "--game", "FrozenLake-v0", "--model", "tiny"])
        >>> resume_command(namespace, Path("runs/fl"), ["--resume"])
        'tsmg train --game FrozenLake-v0 --model tiny --out runs/fl --resume'
        >>> resume_command(argparse.Namespace(command_line=["eval", "--out=my runs/x", "--game", "G"]), Path("x"))
        "tsmg eval '--out=my runs/x' --game G"
    """
    words = typed_arguments(args)
    if not any(word == "--out" or word.startswith("--out=") for word in words):
        words += ["--out", str(out)]
    words += [flag for flag in extra if flag not in words]
    return "tsmg " + shlex.join(words)


def interrupted_text(args: argparse.Namespace, out: Path, extra: Sequence[str] = ()) -> str:
    """``interrupted; resume with: COMMAND`` for a run in ``out`` stopped by Ctrl-C."""
    return f"interrupted; resume with: {resume_command(args, out, extra)}"


def view_text(out: Path) -> str:
    """Where the run is and the command that shows it (tables, curves, every transcript)."""
    return f"run folder: {out}\nsee it: tsmg view {shlex.quote(str(out))}"
