"""Every example in every sub-command's ``--help`` runs.

The examples are parsed out of the real help text (the epilog under "examples:", a ``#`` line
being a comment and `` # …`` ending a line's command), then run through the CLI in one scratch
folder, in the order of :data:`ORDER` (an example may read what an earlier one wrote: ``runs/fl``
for ``tsmg view runs/fl``), with ``configs/`` linked into it. A shell would expand globs and
braces (``runs/eval-*``, ``step-{40,50,60}``): so does the test, through bash.

The rule of shrinking, applied mechanically to every example, so that a new example is covered
without editing this file:

* :data:`SHRUNK_FLAGS`: the value of each listed flag is replaced (``--episodes 20`` -> ``2``,
  ``--updates 50`` -> ``2``, ``--port 8000`` -> ``0``, ``--host 0.0.0.0`` -> loopback);
* :data:`SHRUNK_MODELS`: a model that needs weights this machine does not hold (``smollm2``, a
  hub download) is replaced by the tiny model the first ``tsmg train`` example trained
  (``hf:runs/fl/final``), which takes the same local-model path (tokenizer, chat template,
  sampling); a ``--config`` file naming such a model gets ``--set model.spec=`` the replacement;
* :data:`SHRUNK_SETS`: a ``--set KEY=VALUE`` whose key is listed gets the shrunk value;
* :data:`APPENDED`: flags added per command (``train``: two updates of two groups of two
  episodes; ``demo``: a one-second budget), unless the example gives the flag;
* a command that serves until stopped (``serve`` but for ``--export-project``, ``view --serve``)
  runs in a subprocess until it prints its address, then is stopped with Ctrl-C (SIGINT) and must
  exit cleanly (one at a time, beside the in-process examples); ``play`` reads
  :data:`PLAY_INPUT` from its standard input.

Every other example runs in process (``tsmg.apps.cli.main``) and must return 0. An example that
cannot run here is listed in :data:`NOT_RUN` with why; a listed example that is no longer in the
help fails the test, so the list stays true.
"""

from __future__ import annotations

import argparse
import io
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from tsmg.apps.cli import _build_parser, main

ROOT = Path(__file__).resolve().parents[1]

#: Sub-commands in the order their examples run: those that write run folders before those that read them.
ORDER = (
    "games", "check", "prompt", "rollout", "algos", "train", "play", "sft", "eval", "exploitability",
    "export", "report", "view", "serve", "demo",
)  # fmt: skip

#: flag -> the value it is shrunk to.
SHRUNK_FLAGS = {
    "--episodes": "2",
    "--updates": "2",
    "--nonsense-seeds": "2",
    "--samples": "8",
    "--max-steps": "2",
    "--port": "0",
    "--host": "127.0.0.1",
}
#: model spec -> the one run instead (for --model and --opponent-model).
SHRUNK_MODELS = {"smollm2": "hf:runs/fl/final"}
#: --set key -> the value it is shrunk to.
SHRUNK_SETS = {"optim.max_steps": "2", "run.updates": "2"}
#: command, or "command --flag" for its examples that give the flag -> flags appended (a flag the example
#: gives is not appended again; nothing is appended to a --print-config or --dry-run, which train nothing).
APPENDED: dict[str, list[str]] = {
    "train": [
        "--set", "run.updates=2", "--set", "rollout.group_size=2", "--set", "rollout.groups_per_update=2",
        "--set", "run.eval_every=0", "--set", "run.max_seconds=null", "--quiet",
    ],
    "demo": ["--max-seconds", "1"],
    "demo --no-train": ["--episodes", "2"],
    "sft": ["--max-steps", "2"],
}  # fmt: skip
#: What ``tsmg play`` reads: a few moves, then the end of input.
PLAY_INPUT = "down\nright\nbet\npass\n" * 3
#: Examples not run here, each with why.
NOT_RUN = {
    "tsmg check --all --nonsense-seeds 20": "checks the whole catalog (315 ids, many minutes); "
    "tests/test_checker.py checks games one by one",
    "tsmg exploitability --model hf:runs/kuhn/checkpoints/step-{40,50,60} --average --temperature 0": "needs the "
    "checkpoints of a 60-update self-play run (configs/kuhn_selfplay_tiny.yaml, minutes)",
    "tsmg sft --resume --out runs/sft": "resumes an interrupted fine-tune; a finished one is refused by design",
    "tsmg eval --suite openspiel-small-v1 --model random --model openspiel-mcts --out runs/suite": "plays the "
    "suite's fixed episodes, which a suite refuses to shrink (100 s here); tests/evaluation/test_suites.py runs "
    "a suite from the command line",
}


def help_examples() -> list[tuple[str, str]]:
    """(sub-command, example line) for every example of every sub-command's help, in :data:`ORDER`."""
    parser = _build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    found = []
    for name, sub in commands.items():
        epilog = sub.format_help().split("\nexamples:\n", 1)
        if len(epilog) < 2:
            continue
        for line in epilog[1].splitlines():
            line = line.strip()
            if line.startswith("tsmg "):
                found.append((name, re.split(r"\s+#\s", line, maxsplit=1)[0].strip()))
    unknown = {name for name, _ in found} - set(ORDER)
    assert not unknown, f"add the sub-commands {sorted(unknown)} to ORDER"
    return sorted(found, key=lambda item: ORDER.index(item[0]))


def shrunk(example: str, folder: Path) -> list[str]:
    """The example's arguments (after ``tsmg``), expanded as bash would and shrunk by the rules above."""
    expanded = subprocess.run(
        ["bash", "-O", "nullglob", "-c", f"printf '%s\\0' {example.removeprefix('tsmg ')}"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    words = [word for word in expanded.split("\0") if word]
    assert words == shlex.split(example.removeprefix("tsmg ")) or any(c in example for c in "*{"), example
    out: list[str] = []
    for index, word in enumerate(words):
        previous = words[index - 1] if index else ""
        if previous in SHRUNK_FLAGS and (word.isdigit() or previous in ("--host", "--port")):
            word = SHRUNK_FLAGS[previous]
        elif previous in ("--model", "--opponent-model") and word in SHRUNK_MODELS:
            word = SHRUNK_MODELS[word]
        elif previous == "--set" and word.split("=", 1)[0] in SHRUNK_SETS:
            word = f"{word.split('=', 1)[0]}={SHRUNK_SETS[word.split('=', 1)[0]]}"
        out.append(word)
    if "--config" in out and "--model" not in out:  # a config file's model: shrunk as a --model would be
        loaded = yaml.safe_load((folder / out[out.index("--config") + 1]).read_text(encoding="utf-8")) or {}
        spec = loaded.get("model", {}).get("spec")
        if spec in SHRUNK_MODELS:
            out += ["--set", f"model.spec={SHRUNK_MODELS[spec]}"]
    # The example's own command (sft's help shows a rollout first), with a flag of it where one is listed.
    keys = [f"{out[0]} {word}" for word in out if f"{out[0]} {word}" in APPENDED] + [out[0]]
    appended = APPENDED.get(keys[0], [])
    if not {"--print-config", "--dry-run"} & set(out):
        given = set(out)
        index = 0
        while index < len(appended):
            flag = appended[index]
            takes_value = index + 1 < len(appended) and not appended[index + 1].startswith("--")
            pair = appended[index : index + (2 if takes_value else 1)]
            key = pair[1].split("=", 1)[0] + "=" if flag == "--set" else None
            if not (flag in given and flag != "--set") and not (key and any(w.startswith(key) for w in out)):
                out.extend(pair)
            index += len(pair)
    return out


def _long_lived(command: str, words: list[str]) -> bool:
    return command == "serve" and "--export-project" not in words or command == "view" and "--serve" in words


def _run_serving(words: list[str], folder: Path) -> str | None:
    """Start the command, wait for its address, stop it with SIGINT; a problem as one line, or None."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    process = subprocess.Popen(
        [sys.executable, "-m", "tsmg.apps.cli", *words],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    lines = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                return f"exited {process.wait()} before serving: {''.join(lines)[-500:]}"
            lines.append(line)
            if "http://" in line:
                break
        else:
            return "printed no address in 120 s"
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=20)
        return None if code in (0, 130, -signal.SIGINT) else f"exit {code} after Ctrl-C: {''.join(lines)[-500:]}"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_not_run_list_names_examples_of_the_help():
    examples = {example for _, example in help_examples()}
    assert set(NOT_RUN) <= examples, set(NOT_RUN) - examples


def test_every_help_example_runs(tmp_path, monkeypatch, capsys):
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    my_games = "import tsmg\n\ntsmg.register('MyFrozenLake-v0', 'games.frozen_lake:FrozenLake', description='a copy')\n"
    (tmp_path / "my_games.py").write_text(my_games, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    failures, timings = [], []
    # The long-lived examples run one at a time in a second thread: each start-up (a fresh interpreter)
    # overlaps the in-process examples after it, and no more than two commands compete for the cores.
    serving: queue.Queue[tuple[str, list[str]] | None] = queue.Queue()

    def serve_each() -> None:
        while (item := serving.get()) is not None:
            problem = _run_serving(item[1], tmp_path)
            if problem is not None:
                failures.append(f"{item[0]}\n    ran: tsmg {shlex.join(item[1])}\n    {problem}")

    server_thread = threading.Thread(target=serve_each)
    server_thread.start()
    for command, example in help_examples():
        if example in NOT_RUN:
            continue
        words = shrunk(example, tmp_path)
        began = time.perf_counter()
        if _long_lived(command, words):
            serving.put((example, words))
            continue
        else:
            monkeypatch.setattr(sys, "stdin", io.StringIO(PLAY_INPUT))
            try:
                code = main(words)
            except SystemExit as error:  # argparse's --help and version paths
                code = int(error.code or 0)
            captured = capsys.readouterr()
            problem = None if code == 0 else f"exit {code}: {(captured.err or captured.out).strip()[-400:]}"
        timings.append((time.perf_counter() - began, example))
        if os.environ.get("TSMG_HELP_EXAMPLES_LOG"):  # watch a slow run: one line per example
            with open(os.environ["TSMG_HELP_EXAMPLES_LOG"], "a", encoding="utf-8") as log:
                log.write(f"{timings[-1][0]:6.1f}s {'ok ' if problem is None else 'BAD'} {example}\n")
        if problem is not None:
            failures.append(f"{example}\n    ran: tsmg {shlex.join(words)}\n    {problem}")
    serving.put(None)
    server_thread.join()
    import tsmg.registry

    tsmg.registry._registry.pop("MyFrozenLake-v0", None)  # the --import example's game: gone for later tests
    sys.modules.pop("my_games", None)
    with capsys.disabled():
        print("\nslowest help examples:", *(f"{s:6.1f}s  {e}" for s, e in sorted(timings)[::-1][:8]), sep="\n  ")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(
    ("example", "expected"),
    [
        ("tsmg eval --game G --model smollm2 --episodes 50", "eval --game G --model hf:runs/fl/final --episodes 2"),
        ("tsmg demo --no-train", "demo --no-train --episodes 2"),
        ("tsmg serve --game G --port 8000 --host 0.0.0.0", "serve --game G --port 0 --host 127.0.0.1"),
        (
            "tsmg train --config configs/frozen_lake_tiny.yaml --set run.updates=150",
            "train --config configs/frozen_lake_tiny.yaml --set run.updates=2 --set rollout.group_size=2 "
            "--set rollout.groups_per_update=2 --set run.eval_every=0 --set run.max_seconds=null --quiet",
        ),
        ("tsmg train --game G --model tiny --print-config", "train --game G --model tiny --print-config"),
    ],
)
def test_the_shrinking_rule(example, expected):
    assert shlex.join(shrunk(example, ROOT)) == expected
