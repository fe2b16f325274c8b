"""Training components take their own config sections, not the whole TrainConfig.

Only :class:`training.async_loop.AsyncRollouts` keeps the whole configuration: its worker process
rebuilds the backend and engine from it.
"""

import ast
import inspect
import re
from pathlib import Path

import pytest

from tests.small_lake import make_config
from training.async_loop import AsyncRollouts
from training.config import DistillConfig, LossConfig
from training.distill import Teacher
from training.distributed import World
from training.engines import check_rollout
from training.losses import LossSettings
from training.rtpo import ReverseTurnRollouts
from training.setup import set_up
from training.sources import GroupRollouts, RolloutSource
from training.update import PolicyUpdate


def annotations(function):
    """Each parameter's annotation as written (the modules use postponed annotations: strings)."""
    return {name: str(parameter.annotation) for name, parameter in inspect.signature(function).parameters.items()}


@pytest.mark.parametrize(
    ("function", "sections"),
    [
        (PolicyUpdate.__init__, {"optim": "OptimConfig", "loss": "LossConfig", "distill": "DistillConfig | None"}),
        (Teacher.load, {"distill": "DistillConfig"}),
        (RolloutSource.__init__, {"rollout": "RolloutConfig", "run": "RunConfig"}),
        (GroupRollouts.__init__, {"rollout": "RolloutConfig", "run": "RunConfig"}),
        (ReverseTurnRollouts.__init__, {"rollout": "RolloutConfig", "run": "RunConfig"}),
        (check_rollout, {"rollout": "RolloutConfig"}),
    ],
)
def test_components_take_their_sections_not_the_whole_config(function, sections):
    found = annotations(function)
    assert not any("TrainConfig" in annotation for annotation in found.values()), found
    assert {name: found.get(name) for name in sections} == sections


ROOT = Path(__file__).resolve().parents[2]

#: Every function of training/ and tsmg/ with a parameter annotated with the whole TrainConfig (issue 39
#: counted 22 functions in 12 modules; 24 before this was pinned). What remains: the trainer and what
#: it hands the whole run to (the set-up that loads the model, the run folder that stores the config,
#: the rollout source, the update, the async worker that rebuilds both from it), the check against
#: the game, the base model and teacher checks that read model, run and distill together, and the
#: demo's evaluation.
WHOLE_CONFIG_TAKERS = {
    "training/async_loop.py AsyncRollouts.__init__",
    "training/base_model.py base_model_source",
    "training/config.py validate_against_game",
    "training/distill.py student_tokenizer",
    "training/distill.py check_teacher",
    "training/rollout_sources.py build_rollouts",
    "training/run_folder.py RunFolder.open",
    "training/setup.py set_up",
    "training/setup.py unsharded_backend",
    "training/setup.py load_backend",
    "training/setup.py add_lora",
    "training/trainer.py train",
    "training/update.py PolicyUpdate.from_config",
    "tsmg/apps/train/demo.py success_on_seeds",
}


def whole_config_takers() -> set[str]:
    """``path qualified.name`` of every function in training/ and tsmg/ with a parameter annotated ``TrainConfig``."""
    found = set()
    pattern = re.compile(r"\bTrainConfig\b")
    for folder in ("training", "tsmg"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            scopes = [(tree, "")]
            while scopes:
                node, prefix = scopes.pop()
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.ClassDef):
                        scopes.append((child, f"{prefix}{child.name}."))
                    elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                        scopes.append((child, f"{prefix}{child.name}."))
                        arguments = child.args
                        every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
                        every += [argument for argument in (arguments.vararg, arguments.kwarg) if argument]
                        if any(a.annotation and pattern.search(ast.unparse(a.annotation)) for a in every):
                            found.add(f"{path.relative_to(ROOT).as_posix()} {prefix}{child.name}")
    return found


def test_few_functions_take_the_whole_train_config():
    found = whole_config_takers()
    assert found - WHOLE_CONFIG_TAKERS == set(), "these take the whole TrainConfig: pass them the sections they read"
    assert found == WHOLE_CONFIG_TAKERS  # one that stopped: take it off the list, so that the count stays true
    assert len(found) == 14


def test_the_count_sees_a_function_that_takes_the_whole_config(tmp_path, monkeypatch):
    module = tmp_path / "training" / "extra.py"
    module.parent.mkdir()
    module.write_text(
        "class A:\n    def f(self, config: 'TrainConfig | None') -> None: ...\n"
        "def g(*, run: RunConfig, rest: training.config.TrainConfig) -> None: ...\n"
        "def h(config: TrainConfigs) -> None: ...\n"
    )
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert whole_config_takers() == {"training/extra.py A.f", "training/extra.py g"}


def test_only_the_async_source_keeps_the_whole_config_for_its_worker():
    assert annotations(AsyncRollouts.__init__)["config"] == "TrainConfig"
    assert "config" in annotations(PolicyUpdate.from_config)


def test_the_update_built_from_sections_is_the_one_from_config(tiny_model, tmp_path):
    config = make_config(
        tmp_path / "run",
        tiny_model,
        loss={"name": "clip-higher", "aggregation": "constant", "old_logprobs": "recompute"},
        optim={"micro_batch_size": 3},
        rollout={"lap": {"max_tokens": 7}},
    )
    setup = set_up(config, tmp_path / "run", None, World())
    from_config = PolicyUpdate.from_config(setup, config, World())
    loss = LossConfig(name="clip-higher", aggregation="constant", old_logprobs="recompute")
    update = PolicyUpdate(setup, World(), optim=config.optim, loss=loss, max_tokens=7)
    expected = LossSettings(**config.loss_options())
    assert update.settings == from_config.settings == expected
    assert update.settings.constant_normalizer == 7.0  # rollout.lap.max_tokens: the loss sets no normaliser
    assert update.recompute_old and from_config.recompute_old and not update.rollout_entropy
    assert update.optim.micro_batch_size == 3 and update.max_tokens == 7
    assert update.teacher is None and update.distill == DistillConfig()
    assert loss.options(max_tokens=7) == config.loss_options()

    with pytest.raises(ValueError, match=r"distill\.teacher .* no teacher was given"):
        PolicyUpdate(
            setup,
            World(),
            optim=config.optim,
            loss=loss,
            max_tokens=7,
            distill=DistillConfig(teacher=f"hf:{tiny_model}"),
        )


def test_teacher_load_refuses_an_unset_teacher():
    with pytest.raises(ValueError, match="distill.teacher is unset"):
        Teacher.load(DistillConfig(), dtype="float32", threads=1)
