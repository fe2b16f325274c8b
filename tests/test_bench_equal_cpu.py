"""bench/smollm2_equal_cpu.py: pilots change only what they claim, and the paired statistics are exact."""

import argparse
import json
from pathlib import Path

import pytest
from bench_modules import flat, load_bench

import games  # noqa: F401  (registers the catalog)
from training.config import TrainConfig
from tsmg.apps.train.cli import add_commands, config_from_args

equal_cpu = load_bench("smollm2_equal_cpu")
REPO = Path(__file__).resolve().parents[1]


def bench(tmp_path):
    args = argparse.Namespace(
        threads=1, model_flags=[], pilot_budget=1200.0, sft_share=0.25, oracle_episodes=20, budget=360.0, seeds=1
    )
    return equal_cpu.Bench(tmp_path, args)


def parsed(command):
    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers())
    return config_from_args(parser.parse_args(command[3:]))  # past "python -m tsmg.apps.cli"


@pytest.mark.parametrize("name", sorted(equal_cpu.PILOTS))
def test_a_pilot_changes_only_its_settings_and_the_budget(name, tmp_path):
    pilot = equal_cpu.PILOTS[name]
    config = equal_cpu.RL_CONFIG if pilot.arm == "sft+rl" else equal_cpu.CHOICE_CONFIG
    shipped = flat(TrainConfig.from_yaml(REPO / config).model_dump())
    command = bench(tmp_path).train_command(tmp_path / name, config, 0, 1200.0, equal_cpu.sets(pilot.settings))
    changed = {key: value for key, value in flat(parsed(command).model_dump()).items() if shipped[key] != value}
    assert changed == {**pilot.settings, "run.max_cpu_seconds": 1200.0, "run.out_dir": str(tmp_path / name)}
    assert len(equal_cpu.PILOTS) <= 8  # the rule: at most eight pilots


def test_the_arms_train_in_their_own_action_format_and_are_judged_in_it():
    for arm, config in (("sft+rl", equal_cpu.RL_CONFIG), ("rl-choice", equal_cpu.CHOICE_CONFIG)):
        kind = TrainConfig.from_yaml(REPO / config).rollout.lap.action_format.kind
        assert equal_cpu.EVAL_FORMAT[arm] == ["--action-format", kind]
        assert TrainConfig.from_yaml(REPO / config).run.eval_every == 0  # evaluations would spend the budget


def test_training_signal_reads_what_ms_grpo_saw(tmp_path):
    rows = [
        {"step": 1, "credit/groups": 8, "credit/zero_signal_fraction": 0.5, "credit/mean_abs_advantage": 0.2,
         "loss/approx_kl": 0.01, "rollout/success_rate": 0.25},
        {"step": 2, "credit/groups": 8, "credit/zero_signal_fraction": 0.25, "credit/mean_abs_advantage": 0.4,
         "loss/approx_kl": 0.02, "loss/kl_ref": 0.03, "rollout/success_rate": 0.5},
        {"step": 2, "time/cpu_s": 12.0},
    ]  # fmt: skip
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    signal = equal_cpu.training_signal(tmp_path)
    assert signal == {
        "updates": 2.0,
        "zero_signal_fraction": 0.375,
        "mean_abs_advantage": pytest.approx(0.3),
        "kl_ref_last": 0.03,
        "rollout_success_first": 0.25,
        "rollout_success_last": 0.5,
    }
    assert equal_cpu.cpu_spent(tmp_path) == 12.0


def test_kl_to_start_is_zero_against_the_model_that_answered_and_positive_against_another(tmp_path):
    from backends.hf import HFBackend
    from backends.tiny import build_tiny_model
    from tsmg.episode import write_episodes
    from tsmg.lap import LAP, LAPConfig
    from tsmg.rollout import rollout

    answered, other = build_tiny_model(tmp_path / "a", seed=0), build_tiny_model(tmp_path / "b", seed=1)
    config = LAPConfig.model_validate({"action_format": {"kind": "choice"}, "temperature": 1.0})
    # float32 on both sides: `auto` is bfloat16 on a CPU with AMX, whose rounding would blur the zero
    backend = HFBackend(str(answered), dtype="float32", threads=1)
    episodes = rollout("FrozenLake-NoSlip-v0", LAP(backend, config), seeds=range(2))
    write_episodes(tmp_path / "episodes.jsonl", episodes)
    assert abs(equal_cpu.kl_to_start(tmp_path, answered, threads=1, dtype="float32")) < 1e-5
    assert equal_cpu.kl_to_start(tmp_path, other, threads=1, dtype="float32") > 0.01


def test_an_interrupted_sft_is_resumed_where_it_stopped_not_started_again(tmp_path):
    from training.run_folder import check_run_folder
    from training.sft_checkpoints import RESUMABLE_CHANGES
    from tsmg.apps.cli import _build_parser
    from tsmg.apps.train.sft_cli import sft_config_from_args

    def parsed_sft(command):
        return sft_config_from_args(_build_parser().parse_args(command[3:]))  # past "python -m tsmg.apps.cli"

    runner = bench(tmp_path)
    calibration = {equal_cpu.machine_key(): {"cpu_s_fixed": 100.0, "cpu_s_per_step": 10.0}}
    (tmp_path / "calibration.json").write_text(json.dumps(calibration))
    folder = tmp_path / "seed0" / "sft"
    first = runner.sft_command(folder, 0, steps=350, budget=3600.0)
    assert "--resume" not in first
    # What a killed `tsmg sft` leaves: its config and a checkpoint, no final model.
    (folder / "checkpoints" / "checkpoint-40").mkdir(parents=True)
    parsed_sft(first).to_yaml(folder / "config.yaml")
    commands = []

    def run(command, log):  # the SmolLM2 fine-tune itself is hours: record the command, log what it would
        commands.append(command)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "metrics.jsonl").write_text(json.dumps({"step": 350, "time/cpu_s": 3601.0}) + "\n")

    runner.run = run
    assert runner.sft(folder, 0, 3600.0) == 3601.0
    [again] = commands  # one run: this machine's calibration was used, none timed
    assert again == [*first[: first.index("--out") + 2], "--resume", *first[first.index("--out") + 2 :]]
    assert (folder / "checkpoints" / "checkpoint-40").is_dir()  # kept for the resumed run
    check_run_folder(parsed_sft(again), folder, True, resumable=RESUMABLE_CHANGES)  # the same run: not refused


def test_an_rl_arm_is_also_judged_at_the_temperature_it_trained_at():
    assert equal_cpu.training_temperature("rl-choice") == 2.0  # the shipped choice config samples at 2
    assert equal_cpu.training_temperature("rl-choice", "choice-t4") == 4.0
    assert equal_cpu.training_temperature("sft+rl") is None  # trains at 1: the temperature-1 table is its own
    assert equal_cpu.training_temperature("sft+rl", "rl-t1.3") == 1.3
    assert equal_cpu.training_temperature("sft") is None


def test_the_training_temperature_table_pairs_each_rl_arm_with_sft_at_temperature_1(capsys):
    def maps(*solved):  # a record's solved maps, as runs.jsonl holds them, of 4 maps
        return {str(m): m in solved for m in range(4)}

    records = [
        {"seed": 0, "arm": "sft", "cpu": {"sft": 3600.0}, "solved": {"t0": maps(0), "t1": maps(0, 1)}},
        {
            "seed": 0,
            "arm": "rl-choice",
            "cpu": {"rl": 3600.0},
            "solved": {"t0": maps(), "t1": maps(2), "train": maps(1)},
            "train_temperature": 2.0,
        },
    ]
    headline = equal_cpu.summarise(records)
    assert headline["arms"]["rl-choice"]["train"]["mean_over_seeds"] == 0.25
    assert "train" not in headline["arms"]["sft"]
    paired = headline["paired"]["rl-choice vs sft train"]  # map 1 solved by both, map 0 by sft at temperature 1 only
    assert (paired["per_seed"][0]["only_arm"], paired["per_seed"][0]["only_baseline"]) == (0, 1)
    assert "| 0 | rl-choice | 3600 | — / — | 2 | 25.0% " in capsys.readouterr().out


def test_a_record_holds_all_its_tables_need_so_runs_jsonl_outlives_the_run_folders(tmp_path, capsys):
    from tsmg.episode import write_episodes
    from tsmg.policies import policy_from_spec
    from tsmg.rollout import rollout

    for name, spec in (("zero-shot-t0", "random"), ("sft-t0", "oracle")):
        episodes = rollout(equal_cpu.GAME, policy_from_spec(spec), seeds=range(6))
        (tmp_path / name).mkdir()
        write_episodes(tmp_path / name / "episodes.jsonl", episodes)
    zero_shot = equal_cpu.finished({"seed": None, "arm": "zero-shot", "evals": {"t0": str(tmp_path / "zero-shot-t0")}})
    sft = equal_cpu.finished({"seed": 0, "arm": "sft", "cpu": {"sft": 1.0}, "evals": {"t0": str(tmp_path / "sft-t0")}})
    assert sft["solved"]["t0"] == {str(seed): True for seed in range(6)}  # the oracle solves every map
    assert sft["commit"]  # the commit the bench ran at
    assert sft["machine"]["cpu"] and "auto" not in sft["machine"]["dtype_auto"].split(" ")[0]  # where, in what dtype
    records = [json.loads(json.dumps(record)) for record in (zero_shot, sft)]  # as runs.jsonl gives them back
    for name in ("zero-shot-t0", "sft-t0"):
        (tmp_path / name / "episodes.jsonl").unlink()  # a clone has no run folders
    headline = equal_cpu.summarise(records)
    assert headline["arms"]["sft"]["t0"]["mean_over_seeds"] == 1.0
    assert headline["zero-shot"]["t0"]["episodes"] == 6
    assert "zero-shot under constrained choice: greedy" in capsys.readouterr().out


def test_an_sft_calibration_holds_for_its_machine_and_another_machine_is_timed_anew(tmp_path, monkeypatch):
    runner = bench(tmp_path)
    runner.args.calibrate_steps = 20
    other = {"Another CPU / float32": {"cpu_s_fixed": 50.0, "cpu_s_per_step": 30.0}}
    (tmp_path / "calibration.json").write_text(json.dumps(other))
    timed = []

    def run(command, log):  # a calibration run: its CPU-seconds are 20 fixed + 5 per step
        steps = int(command[command.index("--max-steps") + 1])
        folder = Path(command[command.index("--out") + 1])
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "metrics.jsonl").write_text(json.dumps({"step": steps, "time/cpu_s": 20.0 + 5.0 * steps}) + "\n")
        timed.append(steps)

    runner.run = run
    assert runner.sft_cost() == (pytest.approx(20.0), pytest.approx(5.0))
    assert timed == [5, 25]
    assert runner.sft_cost() == (pytest.approx(20.0), pytest.approx(5.0)) and timed == [5, 25]  # measured once
    kept = json.loads((tmp_path / "calibration.json").read_text())
    assert kept["Another CPU / float32"] == other["Another CPU / float32"]  # the other machine's is kept
    assert set(kept) == {"Another CPU / float32", equal_cpu.machine_key()}


def test_the_default_folder_keeps_in_git_only_the_records_and_the_calibration():
    import subprocess

    def ignored(name):
        path = equal_cpu.RESULTS / name
        return subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=REPO).returncode == 0

    assert not ignored("runs.jsonl") and not ignored("calibration.json")
    assert ignored("seed-0/sft/final/adapter_model.safetensors") and ignored("oracle/episodes.jsonl")


def test_every_arm_is_judged_under_the_same_game_options_so_all_meet_the_same_maps():
    from tsmg.apps.evaluation.plan import episode_seeds
    from tsmg.assignments import parse_assignments

    options = TrainConfig.from_yaml(REPO / equal_cpu.RL_CONFIG).rollout.game_options
    assert options  # the RL arm trains with on_invalid: penalize; tsmg eval would carry it into its seeds
    flags = equal_cpu.eval_game_options()
    assert set(flags[::2]) == {"--option"}
    given = parse_assignments(flags[1::2])  # as tsmg eval reads them
    assert given == options
    game = equal_cpu.GAME
    assert episode_seeds(game, given, 0, 8) == episode_seeds(game, options, 0, 8) != episode_seeds(game, {}, 0, 8)


def test_finished_sft_runs_size_the_next_by_their_cheapest_step_so_the_budget_is_spent(tmp_path):
    runner = bench(tmp_path)
    timed = {"cpu_s_fixed": 20.0, "cpu_s_per_step": 20.0}  # timed beside more processes than the arms
    (tmp_path / "calibration.json").write_text(json.dumps({equal_cpu.machine_key(): timed}))
    assert runner.sft_cost() == (pytest.approx(20.0), pytest.approx(20.0))
    asked = []

    def run(command, log):  # an SFT arm whose steps cost 15 CPU-s, stopped by its budget or its steps
        steps = int(command[command.index("--max-steps") + 1])
        budget = float(command[command.index("--max-cpu-seconds") + 1])
        done = min(steps, int((budget - 20.0) / 15.0))
        folder = Path(command[command.index("--out") + 1])
        (folder / "final").mkdir(parents=True)
        (folder / "metrics.jsonl").write_text(json.dumps({"step": done, "time/cpu_s": 20.0 + 15.0 * done}) + "\n")
        asked.append(steps)

    runner.run = run
    assert runner.sft(tmp_path / "seed-0" / "sft", 0, 3620.0) == pytest.approx(20.0 + 15.0 * 180)  # 900 CPU-s unspent
    assert runner.sft_cost()[1] == pytest.approx(15.0)  # the finished run's step, not the timed pair's
    runner.sft(tmp_path / "seed-0" / "sft", 0, 3620.0)  # done: not run again, not counted twice
    assert runner.sft(tmp_path / "seed-1" / "sft", 1, 3620.0) == pytest.approx(3620.0)  # the next spends its budget
    assert asked == [180, 240]
    kept = json.loads((tmp_path / "calibration.json").read_text())[equal_cpu.machine_key()]["finished"]
    assert [run["run"] for run in kept] == ["seed-0/sft", "seed-1/sft"] and kept[0]["steps"] == 180


def test_an_arm_is_averaged_over_its_seeds_with_each_seeds_success_beside(capsys):
    def maps(*solved):  # a record's solved maps, as runs.jsonl holds them, of 4 maps
        return {str(m): m in solved for m in range(4)}

    records = [
        {"seed": 0, "arm": "sft", "cpu": {"sft": 3600.0}, "solved": {"t0": maps(0, 1, 2), "t1": maps(0)}},
        {"seed": 1, "arm": "sft", "cpu": {"sft": 3600.0}, "solved": {"t0": maps(0), "t1": maps(0)}},
    ]
    greedy = equal_cpu.summarise(records)["arms"]["sft"]["t0"]
    assert (greedy["mean_over_seeds"], greedy["episodes"]) == (0.5, {0: 4, 1: 4})  # each seed's maps its own
    assert greedy["per_seed"] == {0: 0.75, 1: 0.25}
    assert "sft: mean over 2 seed(s) 50.0%; seed 0 75.0% " in capsys.readouterr().out


def test_sft_then_rl_is_paired_with_its_own_start_on_the_same_maps(capsys):
    def maps(*solved):  # a record's solved maps, as runs.jsonl holds them, of 4 maps
        return {str(m): m in solved for m in range(4)}

    solved = {"t0": maps(0, 1, 2), "t1": maps(0), "start_t0": maps(0, 3), "start_t1": maps(0)}
    records = [{"seed": 1, "arm": "sft+rl", "cpu": {"sft": 900.0, "rl": 2700.0}, "solved": solved}]
    paired = equal_cpu.summarise(records)["paired"]
    greedy = paired["sft+rl vs its start t0"]  # maps 1 and 2 gained by MS-GRPO, map 3 lost
    assert (greedy["per_seed"][0]["only_arm"], greedy["per_seed"][0]["only_baseline"]) == (2, 1)
    at_1 = paired["sft+rl vs its start t1"]["per_seed"][0]
    assert (at_1["only_arm"], at_1["only_baseline"]) == (0, 0)
    out = capsys.readouterr().out
    assert "greedy (maps solved only after vs only before MS-GRPO): seed 1: 50.0% → 75.0%; seed 1: +25.0 pts" in out


def test_an_sft_then_rl_arm_is_judged_at_its_start_on_the_same_maps(tmp_path, monkeypatch):
    from tsmg.episode import write_episodes
    from tsmg.policies import policy_from_spec
    from tsmg.rollout import rollout

    runner = bench(tmp_path)
    runner.args.episodes = 4
    calibration = {equal_cpu.machine_key(): {"cpu_s_fixed": 10.0, "cpu_s_per_step": 10.0}}
    (tmp_path / "calibration.json").write_text(json.dumps(calibration))
    judged = {}

    def run(command, log):  # the SmolLM2 runs are an hour: a training run leaves its metrics, an eval its episodes
        folder = Path(command[command.index("--out") + 1])
        folder.mkdir(parents=True, exist_ok=True)
        if command[3] == "eval":
            model, seed = command[command.index("--model") + 1], int(command[command.index("--seed") + 1])
            judged[folder.name] = (model, seed, float(command[command.index("--temperature") + 1]))
            spec = "random" if "sft-short" in model else "oracle"
            episodes = rollout(equal_cpu.GAME, policy_from_spec(spec), seeds=range(seed, seed + 4))
            write_episodes(folder / "episodes.jsonl", episodes)
        else:
            (folder / "final").mkdir()
            (folder / "metrics.jsonl").write_text(json.dumps({"step": 8, "time/cpu_s": 90.0}) + "\n")

    runner.run = run
    monkeypatch.setattr(equal_cpu, "training_signal", lambda run_dir: {"updates": 3.0})
    monkeypatch.setattr(equal_cpu, "kl_to_start", lambda *args, **kwargs: 0.0)
    record = runner.arm(0, "sft+rl", 360.0)
    short = f"hf:{tmp_path / 'seed-0' / 'sft-short' / 'final'}"
    assert judged["eval-sft-short-t0"] == (short, equal_cpu.HELD_OUT_SEED, 0.0)
    assert judged["eval-sft-short-t1"] == (short, equal_cpu.HELD_OUT_SEED, 1.0)
    assert judged["eval-sft+rl-t0"][1:] == (equal_cpu.HELD_OUT_SEED, 0.0)  # the same maps as the trained model's
    assert set(record["solved"]) == {"t0", "t1", "start_t0", "start_t1"}
    assert record["solved"]["t0"] == {str(seed): True for seed in range(4)}  # the oracle stands in for the trained
    assert record["sft_steps"] == 8


def test_seeds_are_compared_one_by_one_and_over_seeds_by_a_paired_t_never_pooled():
    def maps(*solved):  # a record's solved maps, as runs.jsonl holds them, of 4 maps
        return {str(m): m in solved for m in range(4)}

    records = [
        {"seed": 0, "arm": "sft", "cpu": {"sft": 3600.0}, "solved": {"t0": maps(0, 1)}},
        {"seed": 0, "arm": "rl-choice", "cpu": {"rl": 3600.0}, "solved": {"t0": maps(2)}},  # 1 vs 2: -25 points
        {"seed": 1, "arm": "sft", "cpu": {"sft": 3600.0}, "solved": {"t0": maps(0, 1, 2)}},
        {"seed": 1, "arm": "rl-choice", "cpu": {"rl": 3600.0}, "solved": {"t0": maps(3)}},  # 1 vs 3: -50 points
    ]
    paired = equal_cpu.summarise(records)["paired"]["rl-choice vs sft t0"]
    assert [(t["only_arm"], t["only_baseline"]) for t in paired["per_seed"]] == [(1, 2), (1, 3)]
    assert [t["difference_points"] for t in paired["per_seed"]] == [-25.0, -50.0]
    assert "only_arm" not in paired  # no McNemar test sums the seeds' discordant maps (that was p = 0.453)
    assert (paired["seeds"], paired["df"], paired["mean_points"]) == (2, 1, -37.5)
    assert paired["p_value"] == pytest.approx(0.2048, abs=1e-4)  # t = -37.5 / 12.5 = -3 on 1 degree of freedom


def test_the_never_seen_split_drops_every_map_some_run_trained_on_and_prints_overlap_0(capsys):
    seeds = list(range(40))
    layouts = {seed: equal_cpu.layout(seed) for seed in seeds}
    excluded = equal_cpu.sft_pool_layouts(50)  # a small SFT pool
    fresh = [seed for seed in seeds if layouts[seed] not in excluded]
    assert 0 < len(fresh) < len(seeds)  # some evaluation maps were trained on, and not all
    records = [{"seed": 0, "arm": "sft", "cpu": {"sft": 1.0}, "solved": {"t0": {str(s): True for s in seeds}}}]
    headline = equal_cpu.summarise(records, excluded)
    assert headline["never_seen"]["overlap"] == 0
    assert headline["never_seen"]["arms"]["sft"]["t0"]["episodes"] == {0: len(fresh)}
    assert headline["arms"]["sft"]["t0"]["episodes"] == {0: len(seeds)}  # the seed split keeps every seed
    assert "overlap 0" in capsys.readouterr().out
    assert equal_cpu.layout(5_000_000) in equal_cpu.sft_pool_layouts(1)  # a map is its layout: the pool's first


def test_the_held_out_seeds_are_counted_by_where_their_maps_fall_and_the_counts_add_up(capsys):
    seeds = list(range(60))
    layouts = [equal_cpu.layout(seed) for seed in seeds]
    sft_pool = equal_cpu.sft_pool_layouts(50)
    rl_maps = {layouts[s] for s in (1, 2, 3) if layouts[s] not in sft_pool}  # an MS-GRPO run played three of them
    assert rl_maps and all(found not in sft_pool for found in rl_maps)
    excluded = sft_pool | rl_maps
    by_hand = {
        "evaluation_seeds": 60,
        "maps": len(set(layouts)),
        "on_the_most_drawn_map": max(layouts.count(found) for found in layouts),
        "sft_pool_maps": len(sft_pool),
        "rl_only_maps": len(rl_maps),
        "on_sft_pool_maps": sum(found in sft_pool for found in layouts),
        "on_rl_only_maps": sum(found in rl_maps for found in layouts),
        "never_seen": sum(found not in excluded for found in layouts),
    }
    assert equal_cpu.map_overlap(set(seeds), sft_pool, excluded) == by_hand
    assert by_hand["on_sft_pool_maps"] + by_hand["on_rl_only_maps"] + by_hand["never_seen"] == 60
    assert by_hand["maps"] < 60 and by_hand["on_the_most_drawn_map"] > 1  # random 4x4 maps repeat
    records = [{"seed": 0, "arm": "sft", "cpu": {"sft": 1.0}, "solved": {"t0": {str(s): True for s in seeds}}}]
    headline = equal_cpu.summarise(records, excluded, sft_pool)
    assert headline["map_overlap"] == by_hand
    assert headline["never_seen"]["arms"]["sft"]["t0"]["episodes"] == {0: by_hand["never_seen"]}
    printed = capsys.readouterr().out
    assert f"{by_hand['on_sft_pool_maps']} on one of the {len(sft_pool)} maps of the SFT transcripts" in printed


def test_an_rl_run_trained_on_the_maps_of_its_update_seeds():
    from training.rollout.engines import independent_groups
    from training.rollout.sources import GAME_SEEDS
    from tsmg.seeding import seed_generator

    rollout = equal_cpu.shipped_config(equal_cpu.RL_CONFIG).rollout
    first = independent_groups(rollout, 1, seed_generator(2, 1, GAME_SEEDS), 1_000_000)
    seeds = equal_cpu.rl_training_seeds("sft+rl", 2, 3)
    assert len(seeds) == 3 * rollout.groups_per_update and seeds[:8] == [plan.seed for plan in first][::8]
    records = [{"seed": 2, "arm": "sft+rl", "training_signal": {"updates": 3.0}}]
    trained = equal_cpu.training_layouts(records, 1)
    assert {equal_cpu.layout(seed) for seed in seeds} <= trained and equal_cpu.layout(5_000_000) in trained


def test_the_cheapest_finished_step_net_of_loading_sizes_an_sft_run():
    timed = {"cpu_s_fixed": 30.0, "cpu_s_per_step": 20.0}
    assert equal_cpu.per_step_cost(timed) == 20.0  # no finished run yet: the timed pair's
    finished = [{"run": "a", "steps": 100, "cpu_s": 1530.0}, {"run": "b", "steps": 50, "cpu_s": 1030.0}]
    assert equal_cpu.per_step_cost({**timed, "finished": finished}) == pytest.approx(15.0)  # not b's 20


def test_arms_started_together_make_the_oracle_transcripts_once(tmp_path):
    # Processes sharing the arms out start at once; each used to run the rollout into the same folder.
    import threading

    runners = [bench(tmp_path) for _ in range(3)]
    for runner in runners:
        runner.args.oracle_episodes = 20
    threads = [threading.Thread(target=runner.oracle) for runner in runners]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seeds = [json.loads(line)["seed"] for line in (tmp_path / "oracle" / "episodes.jsonl").open()]
    assert seeds == list(range(equal_cpu.ORACLE_SEED, equal_cpu.ORACLE_SEED + 20))


def test_an_evaluation_plays_enough_seeds_for_its_never_seen_maps_counting_the_rl_runs_to_come(tmp_path):
    from tsmg.apps.evaluation.plan import episode_seeds

    runner = bench(tmp_path)
    runner.args.episodes = 30
    count = runner.eval_episodes(equal_cpu.HELD_OUT_SEED, [])
    options = dict(equal_cpu.shipped_config(equal_cpu.RL_CONFIG).rollout.game_options)
    seeds = episode_seeds(equal_cpu.GAME, options, equal_cpu.HELD_OUT_SEED, count)
    # The RL runs of seed 0 have not trained yet: the maps they will play (up to budget / 20 updates) are out.
    to_come = [{"seed": 0, "arm": arm, "training_signal": {"updates": 18}} for arm in ("sft+rl", "rl-choice")]
    excluded = equal_cpu.training_layouts(to_come, 20)
    fresh = equal_cpu.never_seen({seed: True for seed in seeds}, excluded)
    assert count > 30 and len(fresh) >= 30


def test_the_regenerated_rl_seeds_are_the_seeds_a_real_run_played(tmp_path):
    from backends.tiny import build_tiny_model
    from training.config import TrainConfig
    from training.trainer import train
    from tsmg.episode import read_episodes

    shipped = equal_cpu.shipped_config(equal_cpu.RL_CONFIG)
    rollout = {**shipped.rollout.model_dump(), "lap": {"action_format": {"kind": "choice"}}}  # the maps, cheaply
    config = TrainConfig.model_validate({
        "rollout": rollout,
        "model": {"spec": f"hf:{build_tiny_model(tmp_path / 'tiny', seed=1)}", "finetune": "full", "dtype": "float32"},
        "sampler": shipped.sampler.model_dump(),
        "run": {"out_dir": str(tmp_path / "run"), "updates": 2, "threads": 1, "tensorboard": False, "seed": 2,
                "episodes_every": 1, "eval_every": 0},
    })  # fmt: skip
    train(config)
    played = sorted({int(e.seed) for e in read_episodes(tmp_path / "run" / "episodes.jsonl")})
    assert played == sorted(equal_cpu.rl_training_seeds("sft+rl", 2, 2))
