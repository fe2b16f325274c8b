"""SmolLM2-135M on held-out random maps at equal CPU time: SFT alone, SFT then MS-GRPO, MS-GRPO alone.

(Past 600 lines on purpose: a bench is one script a user runs and reads, and its runner and its
tables share the record format of ``runs.jsonl``; split, each half would be read with the other open.)

The setting of docs/results.md ("SmolLM2-135M in the paper's setting"): FrozenLake-NoSlip-v0, a
random 4x4 map per episode, 8 steps. Every arm of a seed gets the same CPU budget (``--budget``
CPU-seconds of the training processes, user + system; model loading included; evaluations are
not part of it), spent through the commands a user types (``tsmg sft`` / ``tsmg train`` with
``--max-cpu-seconds``), with the shipped configs:

* ``sft``: ``tsmg sft`` on oracle transcripts for the whole budget (``<action>`` tags);
* ``sft+rl``: ``tsmg sft`` for ``--sft-share`` of the budget, then ``tsmg train`` (MS-GRPO with
  AAW sampling, ``configs/frozen_lake_smollm2_equal_cpu_rl.yaml``) for what the SFT left of it;
* ``rl-choice``: ``tsmg train`` from the zero-shot model under constrained choice, no SFT
  (``configs/frozen_lake_smollm2_equal_cpu_choice.yaml``), for the whole budget.

An SFT run's learning-rate schedule spans the steps its budget buys: ``OUT/calibration.json``
holds an SFT run's fixed CPU-seconds (loading) and CPU-seconds per step, measured once per machine
(CPU and the dtype ``auto`` picks there; a 5-step and a ``5 + --calibrate-steps``-step run), and
each SFT run asks for the steps its budget buys, with the budget as a hard stop. A step's CPU cost
depends on how many processes share the cores, so every finished SFT run adds its steps and
CPU-seconds to its machine's calibration, and once there are some, the cheapest step among them
sizes the next runs: the budget, not the schedule, ends an ``sft`` arm (a timed pair beside more
processes than the arms once left seed 0's ``sft`` arm 22 % of its budget unspent). The arms'
actual CPU-seconds and SFT steps are in the table.

Judged on held-out maps (``tsmg eval --seed 0``, greedy and at temperature
1, and an RL arm that trained at another temperature also at that one, paired there with SFT at
temperature 1: :func:`training_temperature`; every arm under the same game options,
:func:`eval_game_options`, so that all meet the same maps); pilots (``--pilot NAME``, 20 CPU-minutes
each, training seed 0) on the validation maps (``--seed 1000000``), never the held-out ones. A map
is its layout, not its seed: an evaluation plays as many seeds as hold ``--episodes`` maps in no SFT
transcript and no MS-GRPO rollout of any run (:func:`training_layouts`, regenerated from the oracle
seeds and each run's seed and updates), and the tables come twice: on the held-out seeds (the seed
split, as the runs before 2026-12-05 were judged) and on the never-seen maps alone, with their overlap
with the training maps printed (0) and where the held-out seeds' maps fall (:func:`map_overlap`).
Each arm's success per seed with its Wilson 95 % interval and the mean over seeds; ``sft+rl`` and
``rl-choice`` against ``sft``, and ``sft+rl`` against its own start
(the short SFT judged on the same maps: what MS-GRPO added), per training seed (difference in points
and an exact McNemar test on that seed's maps) and over the training seeds (a paired t test with its
95 % interval: :mod:`seed_stats`; maps are never pooled over seeds). For runs that trained with
MS-GRPO: the share of zero-signal groups and the mean
|advantage| (from their ``metrics.jsonl``), and how far the policy moved: KL(trained || start) per
decision, estimated on the trained model's own answers (:func:`kl_to_start`).

Everything lands in ``OUT`` (one folder per seed and arm, ``OUT/runs.jsonl`` appended as each
arm finishes): started again with the same ``--out``, the bench skips what is done and resumes
an interrupted ``tsmg train`` or ``tsmg sft`` with ``--resume`` from its last checkpoint (its CPU
budget counts the sessions before). A record of ``runs.jsonl`` holds all its tables need (the maps
each evaluation solved, the training signal, the commit it ran at), so the default ``OUT``,
``bench/results/smollm2-equal-cpu``, keeps in git only ``runs.jsonl`` and ``calibration.json``
(its ``.gitignore``): a clone resumes with the arms that are done and prints their tables with
``--summarise``. The zero-shot model (the ``rl-choice`` arm's start) is judged once, with that arm.
Ends with one line holding a JSON object.

    python bench/smollm2_equal_cpu.py --seeds 3                     # ~9 CPU-hours, one process
    python bench/smollm2_equal_cpu.py --seeds 1 --arms sft          # processes can share the arms out
    python bench/smollm2_equal_cpu.py --pilot rl-lr1e-4 --out runs/equal-cpu  # one pilot, 20 CPU-minutes
    python bench/smollm2_equal_cpu.py --seeds 3 --summarise
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from seed_stats import compare_over_seeds, describe  # noqa: E402  (the benches' one helper for training seeds)

REPO = Path(__file__).resolve().parents[1]
GAME = "FrozenLake-NoSlip-v0"
SFT_CONFIG = "configs/sft/frozen_lake_smollm2.yaml"
RL_CONFIG = "configs/frozen_lake_smollm2_equal_cpu_rl.yaml"
CHOICE_CONFIG = "configs/frozen_lake_smollm2_equal_cpu_choice.yaml"
ORACLE_SEED = 5_000_000
HELD_OUT_SEED = 0  # tsmg eval's default seeds: never a training (< 1,000,000 from run seeds) or oracle seed
VALIDATION_SEED = 1_000_000
ARMS = ("sft", "sft+rl", "rl-choice")
ZERO_SHOT = "zero-shot"  # the record of the zero-shot model under constrained choice (no training seed)
START = "start_"  # an sft+rl record's evaluations of its short SFT, the start of its MS-GRPO: start_t0, start_t1
RESULTS = REPO / "bench" / "results" / "smollm2-equal-cpu"


@functools.cache
def shipped_config(path: str) -> Any:
    """A shipped training config (``RL_CONFIG``, ``CHOICE_CONFIG``) as ``tsmg train`` reads it, defaults filled in."""
    from training.config import TrainConfig

    return TrainConfig.from_yaml(REPO / path)


def eval_game_options() -> list[str]:
    """``--option`` flags of the game options every evaluation plays under: the SFT-then-RL arm's training options.

    ``tsmg eval`` plays a training run's model under its run's game options, and an evaluation's
    seed list depends on the game's options (``tsmg.apps.evaluation.plan.episode_seeds``): without one
    set for all, the arm trained with ``on_invalid: penalize`` would meet other maps than the others,
    and no map would pair. These options change the reward of an invalid answer only, not success.
    """
    options = shipped_config(RL_CONFIG).rollout.game_options
    return [flag for key, value in options.items() for flag in ("--option", f"{key}={json.dumps(value)}")]


#: Each arm's evaluation LAP: the action format it trained in.
EVAL_FORMAT = {
    "sft": ["--action-format", "tag"],
    "sft+rl": ["--action-format", "tag"],
    "rl-choice": ["--action-format", "choice"],
}


@dataclass(frozen=True)
class Pilot:
    """A pilot of the recipe: an arm with ``tsmg train --set`` overrides, judged on validation maps."""

    arm: str
    settings: dict[str, Any] = field(default_factory=dict)
    note: str = ""


#: At most eight pilots of 20 CPU-minutes (the issue's rule); the chosen recipe goes into the shipped configs.
PILOTS: dict[str, Pilot] = {
    "rl-base": Pilot("sft+rl", {}, "the shipped RL config as it is"),
    "rl-lr1e-4": Pilot("sft+rl", {"optim.lr": 1e-4}, "a smaller step"),
    "rl-t1.3": Pilot("sft+rl", {"rollout.lap.temperature": 1.3}, "more exploration in the rollouts"),
    "rl-g16": Pilot("sft+rl", {"rollout.group_size": 16, "rollout.groups_per_update": 4}, "fewer maps, bigger groups"),
    "rl-kl": Pilot("sft+rl", {"loss.kl_beta": 0.05}, "a KL penalty to the SFT model"),
    "choice-base": Pilot("rl-choice", {}, "the shipped constrained-choice config as it is"),
    "choice-t4": Pilot("rl-choice", {"rollout.lap.temperature": 4.0}, "temperature 4: more maps solved by chance"),
}


def training_temperature(arm: str, pilot: str | None = None) -> float | None:
    """The temperature an arm's MS-GRPO rollouts sample at, where it is neither 0 nor 1 (None otherwise).

    Such an arm is also judged at that temperature: the policy MS-GRPO trained is the sampled one
    (the constrained-choice arm samples at 2, where greedy play repeats one move everywhere).
    """
    if arm == "sft":
        return None
    shipped = shipped_config(RL_CONFIG if arm == "sft+rl" else CHOICE_CONFIG).rollout.lap.temperature
    settings = PILOTS[pilot].settings if pilot else {}
    temperature = float(settings.get("rollout.lap.temperature", shipped))
    return None if temperature in (0.0, 1.0) else temperature


def tsmg(*args: str) -> list[str]:
    """The CLI command a user types (run through this interpreter)."""
    return [sys.executable, "-m", "tsmg.apps.cli", *args]


def sets(settings: dict[str, Any]) -> list[str]:
    """``--set`` flags of ``settings``."""
    return [flag for key, value in settings.items() for flag in ("--set", f"{key}={json.dumps(value)}")]


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The JSON rows of a ``.jsonl`` file (none when it is missing)."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def last_logged(run_dir: Path, key: str, why_missing: str = "") -> float:
    """The last value of ``key`` in a run's ``metrics.jsonl`` (``why_missing``: a hint for the error)."""
    values = [row[key] for row in read_rows(run_dir / "metrics.jsonl") if key in row]
    if not values:
        raise SystemExit(f"{run_dir}: no {key} in metrics.jsonl{why_missing}")
    return float(values[-1])


def steps_done(run_dir: Path) -> int:
    """The optimizer steps a finished ``tsmg sft`` run logged last (``step``)."""
    return int(last_logged(run_dir, "step"))


def per_step_cost(calibration: dict[str, Any]) -> float:
    """CPU-seconds an SFT step costs on a machine: the cheapest among its finished runs, else the timed pair's.

    A finished run (``calibration["finished"]``: its ``steps`` and ``cpu_s``) ran beside the processes
    the arms share the cores with, which the timed pair may not have; the cheapest such step sizes an
    SFT run so that its budget is spent (a dearer step ends it by the budget before its schedule does,
    with the learning rate near its end).
    """
    fixed = float(calibration["cpu_s_fixed"])
    runs = calibration.get("finished", [])
    if not runs:
        return float(calibration["cpu_s_per_step"])
    return min((run["cpu_s"] - fixed) / run["steps"] for run in runs)


def cpu_spent(run_dir: Path) -> float:
    """The CPU-seconds a finished ``tsmg sft`` / ``tsmg train`` run logged last (``time/cpu_s``)."""
    return last_logged(run_dir, "time/cpu_s", " (a run from before CPU budgets?)")


class Bench:
    """Runs (and resumes) the jobs under one output folder."""

    def __init__(self, out: Path, args: argparse.Namespace) -> None:
        self.out, self.args = out, args
        self.out.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "PYTHONPATH": str(REPO)}

    def run(self, command: list[str], log: Path) -> None:
        """Run one CLI command, its output into ``log``; a failure stops the bench with the log's tail."""
        log.parent.mkdir(parents=True, exist_ok=True)
        print("$ " + " ".join(command[2:]), flush=True)
        with open(log, "a", encoding="utf-8") as handle:
            done = subprocess.run(command, cwd=REPO, env=self.env, stdout=handle, stderr=subprocess.STDOUT)
        if done.returncode != 0:
            tail = "".join(log.read_text().splitlines(keepends=True)[-15:])
            raise SystemExit(f"{' '.join(command[2:])} failed (exit {done.returncode}); its log {log} ends:\n{tail}")

    @contextlib.contextmanager
    def alone(self) -> Iterator[None]:
        """Hold ``OUT/.lock`` while a piece every arm shares is made or updated.

        Processes that share the arms out (``--arms sft`` beside ``--arms sft+rl``) start together:
        unlocked, each ran the oracle rollout into the same folder (6,000 transcripts instead of
        2,000), and each could time the calibration or rewrite ``calibration.json`` over another's.
        """
        with open(self.out / ".lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # ------------------------------------------------------------------ the pieces
    def oracle(self) -> Path:
        """Oracle transcripts (seeds from 5,000,000): more decisions than the longest SFT run uses."""
        folder = self.out / "oracle"
        with self.alone():
            if not (folder / "summary.json").is_file():
                self.run(
                    tsmg("rollout", "--game", GAME, "--model", "oracle", "--episodes", str(self.args.oracle_episodes),
                         "--seed", str(ORACLE_SEED), "--out", str(folder)),
                    self.out / "logs" / "oracle.log",
                )  # fmt: skip
        return folder / "episodes.jsonl"

    def calibrations(self) -> dict[str, Any]:
        """Every machine's SFT calibration in ``calibration.json`` (empty before the first)."""
        path = self.out / "calibration.json"
        return json.loads(path.read_text()) if path.is_file() else {}

    def save_calibrations(self, calibrations: dict[str, Any]) -> None:
        """Write every machine's SFT calibration to ``calibration.json``."""
        (self.out / "calibration.json").write_text(json.dumps(calibrations, indent=1) + "\n")

    def sft_cost(self) -> tuple[float, float]:
        """An SFT run's fixed CPU-seconds (loading) and CPU-seconds per step here (:func:`per_step_cost`).

        Timed once per machine, by two runs of 5 and 5 + N steps. ``calibration.json`` holds one
        calibration per machine (:func:`machine_key`): the records of a bench moved to another CPU
        are kept, and that CPU is timed anew.
        """
        with self.alone():  # one process times this machine; the others wait for its figures
            return self._sft_cost()

    def _sft_cost(self) -> tuple[float, float]:
        calibrations = self.calibrations()
        key = machine_key()
        if key not in calibrations:
            costs = {}
            for steps in (5, 5 + self.args.calibrate_steps):
                folder = self.out / "calibration" / f"sft-{steps}"
                shutil.rmtree(folder, ignore_errors=True)
                log = self.out / "logs" / f"calibration-{steps}.log"
                self.run(self.sft_command(folder, 0, steps=steps, budget=None), log)
                costs[steps] = cpu_spent(folder)
            per_step = (costs[5 + self.args.calibrate_steps] - costs[5]) / self.args.calibrate_steps
            fixed = max(costs[5] - 5 * per_step, 0.0)
            calibrations[key] = {"cpu_s_per_step": per_step, "cpu_s_fixed": fixed, "runs": costs}
            self.save_calibrations(calibrations)
        found = calibrations[key]
        return float(found["cpu_s_fixed"]), per_step_cost(found)

    def remember_sft(self, folder: Path) -> None:
        """Add a finished SFT run's steps and CPU-seconds to this machine's calibration (once per run)."""
        with self.alone():  # read, add, write: another arm's process may be doing the same
            calibrations, key = self.calibrations(), machine_key()
            name = folder.relative_to(self.out).as_posix()
            runs = calibrations[key].setdefault("finished", [])
            if all(run["run"] != name for run in runs):
                runs.append({"run": name, "steps": steps_done(folder), "cpu_s": cpu_spent(folder)})
                self.save_calibrations(calibrations)

    def sft_command(self, folder: Path, seed: int, *, steps: int, budget: float | None) -> list[str]:
        """``tsmg sft`` of ``steps`` steps (at most ``budget`` CPU-s) into ``folder`` (``--resume`` once it started)."""
        resume = ["--resume"] if (folder / "config.yaml").is_file() else []
        command = tsmg("sft", "--config", SFT_CONFIG, "--episodes", str(self.out / "oracle" / "episodes.jsonl"),
                       "--max-steps", str(steps), "--seed", str(seed), "--threads", str(self.args.threads),
                       "--out", str(folder), *resume, *self.args.model_flags)  # fmt: skip
        return command + (["--max-cpu-seconds", str(budget)] if budget is not None else [])

    def sft(self, folder: Path, seed: int, budget: float) -> float:
        """A finished SFT run of ``budget`` CPU-seconds in ``folder`` (resumed if interrupted); its CPU-seconds."""
        if not (folder / "final").is_dir():
            fixed, per_step = self.sft_cost()  # the schedule spans the steps the budget buys; the budget stops it
            steps = max(1, int((budget - fixed) / per_step))
            self.run(
                self.sft_command(folder, seed, steps=steps, budget=budget), self.out / "logs" / f"{folder.name}.log"
            )
            self.remember_sft(folder)
        return cpu_spent(folder)

    def train_command(self, folder: Path, config: str, seed: int, budget: float, extra: list[str]) -> list[str]:
        """``tsmg train`` of ``config`` until ``budget`` CPU-seconds are spent (``--resume`` once it started)."""
        resume = ["--resume"] if (folder / "config.yaml").is_file() else []
        return tsmg("train", "--config", config, "--seed", str(seed), "--threads", str(self.args.threads),
                    "--max-cpu-seconds", str(budget), "--out", str(folder), *resume, *extra)  # fmt: skip

    def train(self, folder: Path, config: str, seed: int, budget: float, extra: list[str]) -> float:
        """A finished ``tsmg train`` run (resumed after an interruption); its CPU-seconds."""
        if not (folder / "final").is_dir():
            log = self.out / "logs" / f"{folder.parent.name}-{folder.name}.log"
            self.run(self.train_command(folder, config, seed, budget, extra), log)
        return cpu_spent(folder)

    def eval_episodes(self, seed: int, trained: list[dict[str, Any]]) -> int:
        """Episodes from ``seed`` that hold ``--episodes`` never-seen maps, given the runs so far and ``trained``.

        Never-seen: in no SFT transcript and no MS-GRPO rollout of a finished run (``runs.jsonl``,
        ``pilots.jsonl``) nor of ``trained`` (partial records of the arm being judged). The tables keep
        only the maps outside every run's training maps (:func:`summarise`), so the count has a margin.
        """
        done = read_rows(self.out / "runs.jsonl") + read_rows(self.out / "pilots.jsonl")
        # The MS-GRPO runs not yet trained play maps known in advance (their seeds follow from the run's
        # seed and update), so those of up to budget / 20 CPU-s updates each (an update costs 50-90 here)
        # are kept out too: the arms judged first then still hold --episodes never-seen maps at the end.
        updates = int(self.args.budget / 20)
        planned = [{"seed": run_seed, "arm": arm, "training_signal": {"updates": updates}}
                   for run_seed in range(max(self.args.seeds, 1)) for arm in ("sft+rl", "rl-choice")]  # fmt: skip
        excluded = training_layouts(done + trained + planned, self.args.oracle_episodes)
        return episodes_for_never_seen(seed, self.args.episodes, excluded, margin=1.0)

    def evaluate(self, model: Path, arm: str, folder: Path, seed: int, temperature: float, episodes: int) -> Path:
        """``tsmg eval`` of a trained model on ``episodes`` maps from ``seed`` (it resumes by itself)."""
        spec = f"hf:{model}"
        self.run(
            tsmg("eval", "--game", GAME, "--model", spec, "--episodes", str(episodes), "--seed", str(seed),
                 "--temperature", str(temperature), "--max-tokens", "24", *EVAL_FORMAT[arm], *eval_game_options(),
                 "--model-option", f"{spec}:threads={self.args.threads}", "--no-progress", "--out", str(folder)),
            self.out / "logs" / f"eval-{folder.parent.name}-{folder.name}.log",
        )  # fmt: skip
        return folder

    # ------------------------------------------------------------------ arms
    def arm(self, seed: int, arm: str, budget: float, pilot: str | None = None) -> dict[str, Any]:
        """One arm of one seed, trained within ``budget`` CPU-seconds and evaluated; its record.

        A pilot (``pilot``: a name of :data:`PILOTS`) trains its RL for ``--pilot-budget`` CPU-seconds from
        the SFT every pilot shares (``OUT/pilots/sft-short``, the main runs' share of ``budget``) and is
        judged on the validation maps.
        """
        root = self.out / "pilots" / pilot if pilot else self.out / f"seed-{seed}"
        extra = sets(PILOTS[pilot].settings) if pilot else []
        short_sft = self.out / "pilots" / "sft-short" if pilot else root / "sft-short"
        eval_seed = VALIDATION_SEED if pilot else HELD_OUT_SEED
        cpu: dict[str, float] = {}
        sft_folder = {"sft": root / "sft", "sft+rl": short_sft}.get(arm)
        if arm == "sft":
            cpu["sft"] = self.sft(root / "sft", seed, budget)
            model = root / "sft" / "final"
        elif arm == "sft+rl":
            cpu["sft"] = self.sft(short_sft, seed, self.args.sft_share * budget)
            start = ["--set", f"model.spec=hf:{short_sft / 'final'}"]
            rl_budget = self.args.pilot_budget if pilot else budget - cpu["sft"]
            cpu["rl"] = self.train(root / "sft+rl", RL_CONFIG, seed, rl_budget, start + extra)
            model = root / "sft+rl" / "final"
        else:
            rl_budget = self.args.pilot_budget if pilot else budget
            cpu["rl"] = self.train(root / "rl-choice", CHOICE_CONFIG, seed, rl_budget, self.args.model_flags + extra)
            model = root / "rl-choice" / "final"
        signal = training_signal(model.parent) if arm != "sft" else {}
        episodes = self.eval_episodes(
            eval_seed, [{"seed": seed, "arm": arm, "pilot": pilot, "training_signal": signal}]
        )
        evals = {
            f"t{temperature:g}": str(
                self.evaluate(model, arm, root / f"eval-{arm}-t{temperature:g}", eval_seed, temperature, episodes)
            )
            for temperature in (0.0, 1.0)
        }
        record = {"seed": seed, "arm": arm, "budget": budget, "cpu": cpu, "cpu_total": sum(cpu.values())}
        if sft_folder is not None:
            record["sft_steps"] = steps_done(sft_folder)
        record["evals"] = evals
        if (trained_at := training_temperature(arm, pilot)) is not None:
            record["train_temperature"] = trained_at
            evals["train"] = str(
                self.evaluate(model, arm, root / f"eval-{arm}-t{trained_at:g}", eval_seed, trained_at, episodes)
            )
        if arm == "sft+rl" and not pilot:  # where its MS-GRPO started, on the same maps: what the RL added
            for temperature in (0.0, 1.0):
                folder = root / f"eval-sft-short-t{temperature:g}"
                evals[f"{START}t{temperature:g}"] = str(self.evaluate(short_sft / "final", arm, folder, eval_seed,
                                                                     temperature, episodes))  # fmt: skip
        if arm != "sft":  # what MS-GRPO saw, and how far it moved the policy from where it started
            start = short_sft / "final" if arm == "sft+rl" else self.base_model()
            record["training_signal"] = signal
            record["kl_to_start"] = kl_to_start(Path(evals["t1"]), start, self.args.threads)
        return finished(record)

    def base_model(self) -> Path:
        """The folder of the model the runs start from (``--model hf:DIR``, else the embedded SmolLM2)."""
        if self.args.model:
            return Path(self.args.model.removeprefix("hf:"))
        from backends.embedded import embedded_model_dir

        return Path(embedded_model_dir())

    def zero_shot(self) -> dict[str, Any]:
        """The record of the zero-shot model under constrained choice on the held-out maps.

        (Its row in ``<action>`` tags is in docs/results.md: it answers no tag.)
        """
        folders = {}
        episodes = self.eval_episodes(HELD_OUT_SEED, [])
        for temperature in (0.0, 1.0):
            folder = self.out / "zero-shot" / f"eval-choice-t{temperature:g}"
            self.run(
                tsmg("eval", "--game", GAME, "--model", "smollm2", "--episodes", str(episodes), "--seed",
                     str(HELD_OUT_SEED), "--temperature", str(temperature), "--action-format", "choice",
                     *eval_game_options(),
                     "--model-option", f"smollm2:threads={self.args.threads}", "--no-progress", "--out", str(folder)),
                self.out / "logs" / f"eval-zero-shot-t{temperature:g}.log",
            )  # fmt: skip
            folders[f"t{temperature:g}"] = str(folder)
        return finished({"seed": None, "arm": ZERO_SHOT, "evals": folders})


# ---------------------------------------------------------------------- the tables
def solved(eval_dir: Path) -> dict[int, bool]:
    """Which seeds the evaluation solved."""
    from tsmg.episode import read_episodes

    return {int(e.seed or 0): bool(e.success.get("player")) for e in read_episodes(eval_dir / "episodes.jsonl")}


def finished(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` made whole: the maps each of its evaluations solved, and the commit the bench ran at.

    The tables are made from these alone, so that ``runs.jsonl`` outlives the run folders.
    """
    record["solved"] = {key: {str(seed): ok for seed, ok in solved(Path(folder)).items()} for key, folder in
                        record["evals"].items()}  # fmt: skip
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    record["commit"] = commit.stdout.strip() or None
    record["machine"] = machine()
    return record


def machine() -> dict[str, str]:
    """The CPU the bench ran on and what ``dtype: auto`` meant there: arms are comparable within one machine."""
    import platform

    from backends.hf import describe_dtype

    name = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        names = [
            line.partition(":")[2].strip() for line in cpuinfo.read_text().splitlines() if line.startswith("model name")
        ]
        name = names[0] if names else name
    return {"cpu": name, "cores": str(os.cpu_count()), "dtype_auto": describe_dtype("auto", "cpu")}


def machine_key() -> str:
    """What an SFT calibration holds for: this CPU and the dtype ``auto`` picks on it, e.g. ``AMD EPYC / bfloat16``."""
    found = machine()
    return f"{found['cpu']} / {found['dtype_auto'].split()[0]}"


def outcomes(record: dict[str, Any], key: str) -> dict[int, bool]:
    """Which held-out (or validation) maps ``record``'s evaluation ``key`` (``t0``, ``t1``, ``train``) solved."""
    return {int(seed): ok for seed, ok in record["solved"][key].items()}


def success(results: dict[int, bool]) -> dict[str, Any]:
    """Success with its Wilson 95 % interval."""
    from tsmg.apps.evaluation.metrics import wilson_interval

    wins = sum(results.values())
    low, high = wilson_interval(wins, len(results))
    return {"success": wins / max(len(results), 1), "ci95": [low, high], "episodes": len(results)}


def kl_to_start(eval_dir: Path, start: Path, threads: int, dtype: str = "auto") -> float:
    """KL(trained || start) per decision, estimated on the trained model's own answers at temperature 1.

    Every decision of the evaluation at temperature 1 recorded its answer's tokens and their
    log-probabilities under the trained model; the start model scores the same tokens (a constrained
    choice under the same restriction), and the mean over decisions of the summed difference is an
    unbiased estimate of the KL divergence from the start model. The start model is scored in
    ``dtype``, by default the one ``tsmg eval`` picked for the answers (``auto``), so that the two
    sides differ by their weights, not by their numerics.
    """
    from backends.hf import HFBackend
    from tsmg.episode import read_episodes

    steps = [step for episode in read_episodes(eval_dir / "episodes.jsonl") for step in episode.steps]
    steps = [step for step in steps if step.token_ids and step.logprobs and step.prompt_token_ids]
    backend = HFBackend(str(start), dtype=dtype, threads=threads)
    total = 0.0
    for first in range(0, len(steps), 32):
        batch = steps[first : first + 32]
        scored = backend.sequence_logprobs(
            [step.prompt_token_ids for step in batch],
            [step.token_ids for step in batch],
            1.0,
            choices=[step.choices for step in batch],
        )
        for step, start_logprobs in zip(batch, scored, strict=True):
            total += sum(step.logprobs) - float(start_logprobs.sum())
    return total / max(len(steps), 1)


def training_signal(run_dir: Path) -> dict[str, float | None]:
    """What MS-GRPO saw: updates, mean share of zero-signal groups, mean |advantage|, how far the policy moved."""
    rows = [row for row in read_rows(run_dir / "metrics.jsonl") if "credit/groups" in row]
    if not rows:
        return {}
    mean = lambda key: sum(row.get(key, 0.0) for row in rows) / len(rows)  # noqa: E731
    return {
        "updates": float(len(rows)),
        "zero_signal_fraction": mean("credit/zero_signal_fraction"),
        "mean_abs_advantage": mean("credit/mean_abs_advantage"),
        "kl_ref_last": rows[-1].get("loss/kl_ref"),  # logged with a KL penalty only (loss.kl_beta > 0)
        "rollout_success_first": float(rows[0].get("rollout/success_rate", float("nan"))),
        "rollout_success_last": float(rows[-1].get("rollout/success_rate", float("nan"))),
    }


# ---------------------------------------------------------------------- never-seen maps
def layout(seed: int) -> str:
    """The map episode ``seed`` plays, as its rows joined by ``/`` (a map is its layout, not its seed)."""
    return _layouts((seed,))[0]


@functools.cache
def _game() -> Any:
    import games  # noqa: F401  (registers the catalog)
    from tsmg.registry import make

    return make(GAME)  # game options change the reward of an invalid answer, never the map


def _layouts(seeds: tuple[int, ...]) -> list[str]:
    game = _game()
    found = []
    for seed in seeds:
        game.reset(seed=seed)
        found.append("/".join(game.state.desc))
    return found


def sft_pool_layouts(oracle_episodes: int) -> set[str]:
    """The maps of the oracle transcripts every SFT run trains on (seeds from :data:`ORACLE_SEED`)."""
    return set(_layouts(tuple(range(ORACLE_SEED, ORACLE_SEED + oracle_episodes))))


def rl_training_seeds(arm: str, run_seed: int, updates: int, settings: dict[str, Any] | None = None) -> list[int]:
    """The game seeds ``arm``'s MS-GRPO run of training seed ``run_seed`` played in its ``updates`` rollouts.

    Drawn as :class:`training.rollout.sources.GroupRollouts` draws them: update ``step``'s groups from
    ``seed_generator(run.seed, step, GAME_SEEDS)`` through :func:`training.rollout.engines.independent_groups`.
    """
    from training.rollout.engines import independent_groups
    from training.rollout.sources import GAME_SEEDS
    from tsmg.seeding import seed_generator

    config = shipped_config(RL_CONFIG if arm == "sft+rl" else CHOICE_CONFIG)
    rollout = config.rollout.model_copy(update={k.split(".", 1)[1]: v for k, v in (settings or {}).items()
                                                if k.startswith("rollout.") and k.count(".") == 1})  # fmt: skip
    seeds = []
    for step in range(1, updates + 1):
        plans = independent_groups(
            rollout, step, seed_generator(run_seed, step, GAME_SEEDS), config.run.eval_seed_start
        )
        seeds.extend(dict.fromkeys(int(plan.seed) for plan in plans))
    return seeds


def training_layouts(records: list[dict[str, Any]], oracle_episodes: int) -> set[str]:
    """Every map some run of ``records`` trained on: the SFT pool's, and each MS-GRPO run's rollouts'."""
    seen = sft_pool_layouts(oracle_episodes)
    for r in records:
        updates = (r.get("training_signal") or {}).get("updates")
        if updates and r["arm"] in ("sft+rl", "rl-choice"):
            settings = PILOTS[r["pilot"]].settings if r.get("pilot") in PILOTS else None
            seen.update(_layouts(tuple(rl_training_seeds(r["arm"], r["seed"] or 0, int(updates), settings))))
    return seen


def map_overlap(seeds: set[int], sft_pool: set[str], excluded: set[str]) -> dict[str, int]:
    """Where the evaluation ``seeds``' maps fall: in the SFT pool, among the other training maps, or never seen.

    ``sft_pool``: the maps of the SFT transcripts (:func:`sft_pool_layouts`); ``excluded``: every training
    map (:func:`training_layouts`, the SFT pool included). Counts are of evaluation episodes (seeds),
    except ``maps`` (the distinct maps the seeds draw) and the two ``*_maps`` sizes of the training sets.
    Random maps repeat: ``on_the_most_drawn_map`` counts the seeds of the map drawn most often.
    """
    found = _layouts(tuple(sorted(seeds)))
    return {
        "evaluation_seeds": len(found),
        "maps": len(set(found)),
        "on_the_most_drawn_map": max((found.count(layout) for layout in set(found)), default=0),
        "sft_pool_maps": len(sft_pool),
        "rl_only_maps": len(excluded - sft_pool),
        "on_sft_pool_maps": sum(layout in sft_pool for layout in found),
        "on_rl_only_maps": sum(layout in excluded and layout not in sft_pool for layout in found),
        "never_seen": sum(layout not in excluded for layout in found),
    }


def never_seen(results: dict[int, bool], excluded: set[str]) -> dict[int, bool]:
    """The outcomes of ``results`` on maps outside ``excluded`` (the training maps)."""
    seeds = sorted(results)
    return {
        seed: results[seed] for seed, found in zip(seeds, _layouts(tuple(seeds)), strict=True) if found not in excluded
    }


def episodes_for_never_seen(base_seed: int, wanted: int, excluded: set[str], margin: float = 1.25) -> int:
    """How many evaluation episodes from ``base_seed`` hold ``wanted`` maps outside ``excluded`` (with a margin).

    The margin leaves room for the MS-GRPO runs that finish after an evaluation: their maps leave the
    never-seen set when the tables are made.
    """
    from tsmg.apps.evaluation.plan import episode_seeds

    options = dict(shipped_config(RL_CONFIG).rollout.game_options)
    count = wanted
    while True:
        seeds = episode_seeds(GAME, options, base_seed, count)
        fresh = sum(found not in excluded for found in _layouts(tuple(seeds)))
        if fresh >= wanted * margin or count > 100 * wanted:
            return count
        count += max(wanted // 2, 1)


def summarise(
    records: list[dict[str, Any]], excluded: set[str] | None = None, sft_pool: set[str] | None = None
) -> dict[str, Any]:
    """Print the tables of ``records`` (a zero-shot record gives a line); the headline figures.

    The tables are made twice where ``excluded`` (the training maps, :func:`training_layouts`) is
    given: on every held-out seed (the seed split: a seed's map may be one some run trained on), and on
    the never-seen maps alone (``never_seen``; the overlap with ``excluded`` is printed, and is 0).
    With ``sft_pool`` (the SFT transcripts' maps, part of ``excluded``) it also prints where the
    held-out seeds' maps fall (:func:`map_overlap`): how many are on SFT maps, on MS-GRPO maps only, on none.
    Arms are compared training seed by training seed and then over the seeds
    (:func:`seed_stats.compare_over_seeds`); maps are never pooled over seeds.
    """
    headline: dict[str, Any] = {}
    for r in records:
        if r["arm"] == ZERO_SHOT:
            headline[ZERO_SHOT] = {key: success(outcomes(r, key)) for key in r["solved"]}
            found = ", ".join(f"{'greedy' if k == 't0' else 'temperature 1'} {pct(v)}" for k, v in
                              headline[ZERO_SHOT].items())  # fmt: skip
            print(f"zero-shot under constrained choice: {found}")
    records = [r for r in records if r["arm"] != ZERO_SHOT]
    headline.update(tables(records, "held-out seeds (the seed split)", lambda found: found))
    if excluded is not None and sft_pool is not None:
        held_out = {int(seed) for r in records for found in r["solved"].values() for seed in found}
        counts = map_overlap(held_out, sft_pool, excluded)
        print(
            f"\nheld-out seeds: {counts['evaluation_seeds']} evaluation seeds on {counts['maps']} distinct maps "
            f"({counts['on_the_most_drawn_map']} on the most drawn one); {counts['on_sft_pool_maps']} on one of the "
            f"{counts['sft_pool_maps']} maps of the SFT transcripts, {counts['on_rl_only_maps']} more on one of the "
            f"{counts['rl_only_maps']} further maps of the MS-GRPO rollouts, {counts['never_seen']} on a map no run "
            "trained on"
        )
        headline["map_overlap"] = counts
    if excluded is not None:
        kept = [seed for r in records for found in r["solved"].values() for seed in
                never_seen({int(s): ok for s, ok in found.items()}, excluded)]  # fmt: skip
        overlap = sum(found in excluded for found in _layouts(tuple(sorted(set(kept)))))
        print(
            f"\nnever-seen maps: {len(set(kept))} evaluation seeds, {len(set(_layouts(tuple(sorted(set(kept))))))} "
            f"maps, none in the {len(excluded)} maps of the SFT transcripts and MS-GRPO rollouts; overlap {overlap}"
        )
        headline["never_seen"] = {
            "overlap": overlap,
            **tables(records, "never-seen maps", lambda found: never_seen(found, excluded)),
        }
    signals = {}
    for r in records:
        if signal := r.get("training_signal"):
            signal = {**signal, "kl_to_start": r.get("kl_to_start")}
            signals[f"{r['seed']}/{r['arm']}"] = signal
            rounded = {key: value if value is None else round(value, 4) for key, value in signal.items()}
            print(f"seed {r['seed']} {r['arm']}: {json.dumps(rounded)}")
    headline["training_signal"] = signals
    return headline


def pct(entry: dict[str, Any]) -> str:
    """A success with its interval, in percent."""
    low, high = entry["ci95"]
    return f"{100 * entry['success']:.1f}% ({100 * low:.1f}–{100 * high:.1f}%)"


def tables(records: list[dict[str, Any]], split: str, keep: Any) -> dict[str, Any]:
    """The tables of one split of the evaluation maps (``keep``: a record's outcomes -> those of the split)."""
    headline: dict[str, Any] = {"arms": {}, "paired": {}}
    # Greedy, temperature 1, and each RL arm at the temperature it trained at ("train"; paired with sft at 1).
    titles = {"t0": "greedy", "t1": "temperature 1", "train": "each arm at its training temperature"}
    for temperature, title in titles.items():
        results = {(r["seed"], r["arm"]): keep(outcomes(r, temperature)) for r in records if temperature in r["solved"]}
        if temperature == "train":
            if not results:
                continue
            results.update({(r["seed"], "sft"): keep(outcomes(r, "t1")) for r in records if r["arm"] == "sft"})
        print(f"\n{split}, {title}:")
        print("| seed | arm | CPU-s (sft + rl) | SFT steps / updates | temperature | success (95% CI) |")
        print("|---|---|---|---|---|---|")
        for r in records:
            if (r["seed"], r["arm"]) not in results:
                continue
            cpu = " + ".join(f"{r['cpu'][k]:.0f}" for k in ("sft", "rl") if k in r["cpu"])
            updates = r.get("training_signal", {}).get("updates")
            steps = f"{r.get('sft_steps', '—')} / {'—' if updates is None else format(updates, '.0f')}"
            at = {"t0": 0, "t1": 1}.get(temperature, r.get("train_temperature", 1))
            print(f"| {r['seed']} | {r['arm']} | {cpu} | {steps} | {at:g} | "
                  f"{pct(success(results[(r['seed'], r['arm'])]))} |")  # fmt: skip
        for arm in ARMS if temperature != "train" else ARMS[1:]:  # there sft's row is its temperature 1
            per_seed = {seed: success(found) for (seed, name), found in results.items() if name == arm}
            if per_seed:
                mean = statistics.fmean(entry["success"] for entry in per_seed.values())
                headline["arms"].setdefault(arm, {})[temperature] = {
                    "mean_over_seeds": mean, "per_seed": {seed: entry["success"] for seed, entry in per_seed.items()},
                    "episodes": {seed: entry["episodes"] for seed, entry in per_seed.items()},
                }  # fmt: skip
                spread = ", ".join(f"seed {seed} {pct(entry)}" for seed, entry in sorted(per_seed.items()))
                print(f"{arm}: mean over {len(per_seed)} seed(s) {100 * mean:.1f}%; {spread}")
        for arm in ("sft+rl", "rl-choice"):
            seeds = sorted({r["seed"] for r in records})
            comparison = compare_over_seeds(
                {seed: results[(seed, arm)] for seed in seeds if (seed, arm) in results},
                {seed: results[(seed, "sft")] for seed in seeds if (seed, "sft") in results},
            )
            if not comparison["per_seed"]:
                continue
            headline["paired"][f"{arm} vs sft {temperature}"] = comparison
            print(f"{arm} − sft (maps solved only by the first vs only by sft): {describe(comparison)}")
    for temperature, title in (("t0", "greedy"), ("t1", "temperature 1")):  # sft+rl against its own start
        started = [r for r in records if r["arm"] == "sft+rl" and START + temperature in r["solved"]]
        if not started:
            continue
        after = {r["seed"]: keep(outcomes(r, temperature)) for r in started}
        before = {r["seed"]: keep(outcomes(r, START + temperature)) for r in started}
        comparison = compare_over_seeds(after, before)
        headline["paired"][f"sft+rl vs its start {temperature}"] = comparison
        moves = ", ".join(f"seed {s['seed']}: {s['baseline_points']:.1f}% → {s['arm_points']:.1f}%"
                          for s in comparison["per_seed"])  # fmt: skip
        print(
            f"\n{split}: sft+rl against its short SFT, {title} (maps solved only after vs only before MS-GRPO): "
            f"{moves}; {describe(comparison)}"
        )
    return headline


def keep(record: dict[str, Any], records: list[dict[str, Any]], path: Path) -> None:
    """Append a finished ``record`` to ``path`` (``runs.jsonl`` / ``pilots.jsonl``) and to ``records``."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")
    records.append(record)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS, help="the bench's folder (resumable)")
    parser.add_argument("--seeds", type=int, default=3, help="training seeds (0, 1, ...)")
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--budget", type=float, default=3600.0, help="CPU-seconds per arm and seed")
    parser.add_argument("--sft-share", type=float, default=0.25, help="sft+rl: the SFT's share of the budget")
    parser.add_argument(
        "--episodes", type=int, default=200, help="never-seen held-out (or validation) maps per evaluation, at least"
    )
    parser.add_argument("--oracle-episodes", type=int, default=2000, help="oracle transcripts for SFT")
    parser.add_argument("--calibrate-steps", type=int, default=20, help="SFT steps timed to size the SFT runs")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of every process")
    parser.add_argument("--model", default=None, help="base model (default: the configs' smollm2), e.g. hf:DIR")
    parser.add_argument("--pilot", choices=sorted(PILOTS), help="run one pilot (training seed 0, validation maps)")
    parser.add_argument("--pilot-budget", type=float, default=1200.0, help="CPU-seconds of a pilot's RL")
    parser.add_argument("--summarise", action="store_true", help="print the tables of the finished arms; train nothing")
    args = parser.parse_args()
    args.model_flags = ["--model", args.model] if args.model else []
    bench = Bench(args.out, args)
    records_path = args.out / ("pilots.jsonl" if args.pilot else "runs.jsonl")
    records = read_rows(records_path)

    if not args.summarise:
        started = time.time()
        bench.oracle()
        if args.pilot:
            pilot = PILOTS[args.pilot]
            if not any(r.get("pilot") == args.pilot for r in records):
                record = bench.arm(0, pilot.arm, args.budget, pilot=args.pilot)
                record.update(pilot=args.pilot, note=pilot.note)
                keep(record, records, records_path)
        else:
            if args.model is None and "rl-choice" in args.arms and not any(r["arm"] == ZERO_SHOT for r in records):
                record = bench.zero_shot()
                keep(record, records, records_path)
            for seed in range(args.seeds):
                for arm in args.arms:
                    if any(r["seed"] == seed and r["arm"] == arm for r in records):
                        continue
                    record = bench.arm(seed, arm, args.budget)
                    keep(record, records, records_path)
        print(f"wall time this session: {time.time() - started:.0f} s")
    if args.pilot:
        figures = {}
        for r in records:
            excluded = training_layouts(records, args.oracle_episodes)  # validation maps: never-seen ones only
            figures[r["pilot"]] = {key: success(never_seen(outcomes(r, key), excluded)) for key in r["solved"]}
            shares = ", ".join(
                f"{'greedy' if key == 't0' else 'T1' if key == 't1' else 'T' + format(r['train_temperature'], 'g')} "
                f"{100 * found['success']:.1f}%"
                for key, found in figures[r["pilot"]].items()
            )
            print(f"pilot {r['pilot']} ({r['note']}): validation {shares}; CPU {r['cpu_total']:.0f} s")
        print(json.dumps({"pilots": figures}))
        return
    records = [r for r in records if r["arm"] == ZERO_SHOT or (r["seed"] < args.seeds and r["arm"] in args.arms)]
    print(
        json.dumps(
            {
                "budget_cpu_s": args.budget,
                "seeds": args.seeds,
                **summarise(
                    records,
                    training_layouts(records, args.oracle_episodes),
                    sft_pool_layouts(args.oracle_episodes),
                ),
            }
        )
    )


if __name__ == "__main__":
    main()
