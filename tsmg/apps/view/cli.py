"""``tsmg view``: build the HTML report of run folders (and optionally serve it on loopback)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tsmg.apps.cli_parser import examples


def add_commands(commands: Any) -> None:
    """Register the ``view`` sub-command on an argparse sub-parser set."""
    view = commands.add_parser(
        "view",
        help="a browsable HTML report of eval and training runs, with transcripts",
        description=(
            "Build a static HTML report of run folders (eval, train, rollout --out): the model x game table of the "
            "eval runs, the training runs' learning curves overlaid, and every stored episode's transcript, "
            "filtered and searched; --serve also serves it on 127.0.0.1."
        ),
        epilog=examples(
            "tsmg view runs/eval-fl",
            "tsmg view runs/fl --updates 10,50,100 --serve --port 0",
            "tsmg view runs/eval-fl runs/fl --out runs/report --no-plots",
            "tsmg view runs/  # a folder of run folders: every run in it, overlaid (report in runs/view)",
        ),
    )
    view.add_argument(
        "runs",
        nargs="+",
        type=Path,
        metavar="RUN",
        help="run folders (tsmg eval, tsmg train, tsmg rollout), or folders of them",
    )
    view.add_argument(
        "--out",
        type=Path,
        help="report folder (default: RUN/view for one run or one folder of runs; required for several)",
    )
    view.add_argument(
        "--updates", help="training runs: the updates whose stored episodes to include, e.g. 10,50,100 (default: all)"
    )
    view.add_argument("--no-plots", action="store_true", help="skip the eval runs' matplotlib plots")
    view.add_argument("--serve", action="store_true", help="also serve the report on 127.0.0.1 until Ctrl-C")
    view.add_argument("--port", type=int, default=8000, help="port for --serve (0: any free port)")
    view.set_defaults(handler=cmd_view)


def parse_updates(text: str | None) -> list[int] | None:
    """``"10,50,100"`` as ``[10, 50, 100]``; None for None.

    Raises:
        ValueError: an entry is not a whole number.
    """
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--updates takes whole numbers separated by commas, got {text!r}") from None


def cmd_view(args: argparse.Namespace) -> int:
    """Build the report; print where it is and what could not be read; serve it with --serve."""
    from tsmg.apps.view import build_report
    from tsmg.apps.view.runs import expand_run_paths

    if args.out is None and len(args.runs) > 1:
        raise ValueError("several runs make one report: give its folder with --out")
    runs = expand_run_paths(args.runs)  # a folder of runs stands for its runs
    out = args.out or args.runs[0] / "view"  # a folder of runs holds its report beside them
    if runs != list(args.runs):
        print(f"{len(runs)} runs: {', '.join(str(run) for run in runs)}")
    try:
        report = build_report(runs, out, updates=parse_updates(args.updates), plots=not args.no_plots)
    except OSError as error:  # a folder that cannot be written, a disk that is full
        raise ValueError(f"could not write the report to {out}: {error.strerror or error}") from None
    problems = sum(len(items) for items in report.problems.values())
    print(
        f"{report.episodes} episodes in {report.chunks} data files ({report.data_bytes / 1e6:.1f} MB); "
        f"report: {report.index_html}"
    )
    if problems or report.flagged_episodes:
        print(
            f"could not read everything: {problems} problem(s) in the run files, "
            f"{report.flagged_episodes} episode(s) with unreadable fields (listed at the top of the report)"
        )
    if args.serve:
        from tsmg.apps.view.serve import make_server

        try:
            server = make_server(report.out_dir, args.port)
        except OSError as error:
            reason = f"cannot serve on 127.0.0.1:{args.port} ({error.strerror})"
            raise ValueError(f"{reason}: pass --port N (0: any free port)") from None
        host, port = server.server_address[:2]
        print(f"serving the report at http://{host!s}:{port}/ (Ctrl-C stops)", flush=True)
        try:
            server.serve_forever()
        finally:
            server.server_close()
    return 0
