import json

from training import list_algorithms
from training.credit import CREDIT_ASSIGNERS
from training.loss_specs import LOSSES
from training.sampling import SAMPLERS
from training.schedule import lr_multiplier


def test_listing_covers_every_registry_and_is_json():
    listing = list_algorithms()
    json.dumps(listing)
    assert [entry["name"] for entry in listing["credit_assigners"]] == list(CREDIT_ASSIGNERS)
    assert [entry["name"] for entry in listing["samplers"]] == list(SAMPLERS)
    assert [entry["name"] for entry in listing["losses"]] == list(LOSSES)
    gigpo = next(entry for entry in listing["credit_assigners"] if entry["name"] == "gigpo")
    assert gigpo["needs"] == ["groups", "state_keys"]
    assert gigpo["params"]["gamma"]["default"] == 0.95
    assert all(entry["description"] for group in listing.values() for entry in group)


def test_lr_schedules():
    assert [lr_multiplier(step, 10) for step in (0, 5, 20)] == [1.0, 1.0, 1.0]
    assert [lr_multiplier(step, 4, "linear") for step in range(6)] == [1.0, 0.75, 0.5, 0.25, 0.0, 0.0]
    assert [round(lr_multiplier(step, 4, "cosine"), 6) for step in (0, 2, 4)] == [1.0, 0.5, 0.0]
    assert lr_multiplier(4, 4, "cosine", min_lr_ratio=0.1) == 0.1
    assert [lr_multiplier(step, 10, "constant", warmup_steps=3) for step in range(4)] == [0.25, 0.5, 0.75, 1.0]
    # An episode budget's clock: the fraction played replaces the steps' own progress, warm-up still counts steps.
    assert [lr_multiplier(step, 100, "linear", progress=p) for step, p in ((0, 0.0), (1, 0.5), (9, 1.5))] == [
        1.0,
        0.5,
        0.0,
    ]
    assert lr_multiplier(1, 100, "cosine", min_lr_ratio=0.1, progress=0.5) == 0.55
    assert lr_multiplier(0, 100, "linear", warmup_steps=2, progress=0.9) == 1 / 3


def test_tsmg_algos_json_lists_the_methods_of_issue_12():
    import subprocess
    import sys

    output = subprocess.run(
        [sys.executable, "-m", "tsmg.apps.cli", "algos", "--json"], capture_output=True, text=True, check=True
    ).stdout
    listing = json.loads(output)
    names = {section: {entry["name"] for entry in entries} for section, entries in listing.items()}
    assert {"pgpo", "graft", "mt-grpo", "opd"} <= names["credit_assigners"]
    assert {"sorl", "gspo"} <= names["losses"]
    assert {"uniform-nonzero", "aaw", "uniform"} <= names["samplers"]
    by_name = {entry["name"]: entry for entry in listing["credit_assigners"]}
    assert by_name["pgpo"]["needs"] == ["groups", "next_state_keys", "state_keys"]
    assert by_name["dr-grpo"]["aggregation"] == "constant"
    assert by_name["mt-grpo"]["params"]["align"]["default"] == "start"
    aaw = next(entry for entry in listing["samplers"] if entry["name"] == "aaw")
    assert "importance_correction" in aaw["options"]
    gspo = next(entry for entry in listing["losses"] if entry["name"] == "gspo")
    assert gspo["ratio_level"] == "sequence" and gspo["aggregation"] == "sequence-mean"


def test_tsmg_algos_json_lists_iapo_and_the_annotators():
    import subprocess
    import sys

    output = subprocess.run(
        [sys.executable, "-m", "tsmg.apps.cli", "algos", "--json"], capture_output=True, text=True, check=True
    ).stdout
    listing = json.loads(output)
    iapo = next(entry for entry in listing["credit_assigners"] if entry["name"] == "iapo")
    assert iapo["needs"] == ["groups", "influence"] and iapo["params"]["graph"]["default"] == "exact"
    annotators = {entry["name"]: entry["description"] for entry in listing["annotators"]}
    assert "exact" in annotators and "game's own influence graph" in annotators["exact"]
    assert set(annotators) >= {"exact", "model"}
    assert "a language model labels which earlier messages each action used" in annotators["model"]
