"""The update stage with GSPO, SORL and a distillation teacher, on a tiny model: step figures, micro-batching, OPD."""

import copy

import numpy as np
import pytest
import torch
from test_update import first_letter_game, free_text_config, model_dir, samples  # noqa: F401  (fixtures)

from backends.hf import HFBackend
from backends.tiny import build_tiny_model
from tests.training.loss_helpers import one_batch_loss, settings_for
from training.distill import TeacherMismatchError, check_teacher, opd_advantages
from training.distributed import World
from training.losses import LossSettings
from training.setup import set_up
from training.trainer import train
from training.update import PolicyUpdate, UpdateData, padded, plan_optimizer_steps


def shifted(found, seed=0):
    """The samples with pi_old moved off the current policy (ratios far from 1, some clipped), in 4 sequences."""
    rng = np.random.default_rng(seed)
    changed = copy.deepcopy(found)
    for index, sample in enumerate(changed):
        sample.behaviour_logprobs = [value + float(rng.normal(0, 0.3)) for value in sample.behaviour_logprobs]
        sample.sequence = index // 3
    return changed


def step_gradients(config, tmp_path, found):
    setup = set_up(config, tmp_path, None, World())
    update = PolicyUpdate.from_config(setup, config, World())
    data = UpdateData(found, (), update.old_logprobs(found, 1.0), None, 1.0, moved=True)
    [planned] = plan_optimizer_steps(len(found), 0, config.optim, np.random.default_rng(0))
    setup.optimizer.zero_grad(set_to_none=True)
    losses, finite = update.backward_step(1, planned, data)
    assert finite
    grads = {name: parameter.grad.clone() for name, parameter in setup.backend.model.named_parameters()}
    return grads, update, data, losses


@pytest.mark.parametrize("loss", ["gspo", "sorl"])
def test_step_figures_make_micro_batches_give_the_gradient_of_one_batch(model_dir, samples, tmp_path, loss):  # noqa: F811
    found = shifted(samples)
    overrides = {"clip_eps_low": 0.2, "clip_eps_high": 0.2} if loss == "gspo" else {}
    results = {}
    for micro_batch in (12, 5):
        config = free_text_config(
            tmp_path / "run",
            model_dir,
            loss={"name": loss, **overrides},
            optim={"micro_batch_size": micro_batch, "grad_accumulation": None},
        )
        results[micro_batch] = step_gradients(config, tmp_path, found)
    whole, update, data, losses = results[12]
    assert any(grad.abs().sum() > 0 for grad in whole.values())
    for name, grad in whole.items():
        torch.testing.assert_close(results[5][0][name], grad, rtol=1e-4, atol=1e-7, msg=name)
    # And the one-batch loss is the loss's own in-batch form (its figures from the batch itself).
    model = update.backend.model
    scores = update.score(model, found, 1.0, entropy=False)
    tail = scores.mask.shape[1]
    direct = one_batch_loss(
        scores.logprobs.detach(),
        padded(data.old, tail, scores.logprobs.device),
        torch.tensor([sample.advantage for sample in found]),
        scores.mask,
        LossSettings(**config.loss_options()),
        torch.tensor([sample.sequence for sample in found]),
    )
    assert sum(metrics["loss/policy"] for metrics, _ in losses) == pytest.approx(
        direct.metrics["loss/policy"], rel=1e-4
    )
    if loss == "sorl":
        fraction = losses[0][0]["loss/clipped_turn_fraction"]
        assert 0 < fraction < 1 and fraction == pytest.approx(direct.metrics["loss/clipped_turn_fraction"])


def test_first_optimizer_step_takes_its_figures_from_pi_old_without_a_forward(model_dir, samples, tmp_path):  # noqa: F811
    config = free_text_config(tmp_path / "run", model_dir, loss={"name": "sorl"})
    setup = set_up(config, tmp_path, None, World())
    update = PolicyUpdate.from_config(setup, config, World())
    data = UpdateData(samples, (), update.old_logprobs(samples, 1.0), None, 1.0)
    [planned] = plan_optimizer_steps(len(samples), 0, config.optim, np.random.default_rng(0))
    calls = []
    original = update._logprobs_without_grad
    update._logprobs_without_grad = lambda *args: calls.append(1) or original(*args)  # type: ignore[method-assign]
    context = update.step_context(planned, data)
    assert context is not None and context.clipped_fraction == 0.0 and not calls
    data.moved = True
    update.step_context(planned, data)
    assert calls


def test_opd_advantages_turn_balanced_weights_every_turn_alike():
    teacher = [[-1.0] * 2, [-1.0] * 6]
    student = [[-2.0] * 2, [-2.0] * 6]
    balanced = opd_advantages(teacher, student, 1.0, turn_balanced=True)
    assert [sum(row) for row in balanced] == pytest.approx([4.0, 4.0])  # mean length 4: each turn's total 4 x 1
    assert [sum(row) for row in opd_advantages(teacher, student)] == pytest.approx([2.0, 6.0])


@pytest.mark.parametrize(
    ("loss", "aggregation", "sequences", "per_turn"),
    [
        # lengths 1, 2, 4 (7 tokens); every token's gap log pi_teacher - log pi_student is 1.
        ("ppo-clip", "token-mean", None, 1 / 3),  # each token 1/7: balanced turns 7/3 tokens' worth each
        ("ppo-clip", "sequence-mean", None, 1 / 3),  # each turn already 1/3: left as it is
        ("ppo-clip", "constant", None, 7 / 72),  # each token 1/(3 x 8): balanced 7/3 / 24 each
        ("gspo", "sequence-mean", [0, 0, 1], 1 / 3),  # sequences of 3 and 4 tokens, 2 sequences: 1/6, 1/3, 1/2
    ],
)
def test_turn_balanced_opd_gives_every_turn_the_same_weight_under_each_aggregation(
    loss, aggregation, sequences, per_turn
):
    # A turn's effective weight: the sum over its tokens of d(-loss)/d log pi_new at ratio 1 (each
    # token's advantage times the weight the aggregation gives it).
    lengths = [1, 2, 4]
    student = [[-2.0] * length for length in lengths]
    teacher = [[-1.0] * length for length in lengths]
    rows = opd_advantages(teacher, student, 1.0, turn_balanced=True, aggregation=aggregation, sequences=sequences)
    mask = torch.tensor([[column < length for column in range(4)] for length in lengths])
    advantages = torch.tensor([row + [0.0] * (4 - len(row)) for row in rows])
    old = torch.where(mask, torch.tensor(-2.0), torch.tensor(0.0))
    new = old.clone().requires_grad_(True)
    settings = settings_for(loss, aggregation=aggregation, constant_normalizer=8.0)
    ids = None if sequences is None else torch.tensor(sequences)
    one_batch_loss(new, old, advantages, mask, settings, ids).loss.backward()
    weights = (-new.grad * mask).sum(dim=-1)
    assert weights.tolist() == pytest.approx([per_turn] * 3, rel=1e-5)


@pytest.fixture(scope="module")
def teacher_dir(model_dir, tmp_path_factory):  # noqa: F811
    """The student made sharper (its output layer scaled by 3): same tokenizer, a clear direction to move in."""
    folder = tmp_path_factory.mktemp("teacher")
    backend = HFBackend(model_dir, threads=1)
    with torch.no_grad():
        backend.model.lm_head.weight.mul_(3.0)
    backend.model.save_pretrained(folder)
    backend.tokenizer.save_pretrained(folder)
    return folder


def test_distillation_adds_the_teacher_term_per_token(model_dir, samples, teacher_dir, tmp_path):  # noqa: F811
    config = free_text_config(
        tmp_path / "run", model_dir, distill={"teacher": f"hf:{teacher_dir}", "weight": 0.5}, loss={"name": "ppo-clip"}
    )
    setup = set_up(config, tmp_path, None, World())
    update = PolicyUpdate.from_config(setup, config, World())
    data = UpdateData(samples, (), update.old_logprobs(samples, 1.0), None, 1.0)
    metrics = update._distill(data)
    teacher = update._logprobs_without_grad(update.teacher.model, samples, 1.0)
    for sample, old, given, advantages in zip(samples, data.old, teacher, data.token_advantages, strict=True):
        expected = [sample.advantage + 0.5 * (t - s) for t, s in zip(given, old, strict=True)]
        assert advantages == pytest.approx(expected)
    assert metrics["distill/reverse_kl"] != 0.0


def test_a_teacher_with_another_tokenizer_is_refused_before_any_model_loads(model_dir, tmp_path):  # noqa: F811
    other = build_tiny_model(tmp_path / "other", vocab_size=300, seed=1)
    config = free_text_config(tmp_path / "run", model_dir, distill={"teacher": f"hf:{other}"})
    with pytest.raises(TeacherMismatchError, match="another tokenizer than the student"):
        train(config)
    assert not (tmp_path / "run").exists()  # refused before the run folder or any model


def test_pure_opd_trains_toward_the_teacher(model_dir, teacher_dir, tmp_path):  # noqa: F811
    config = free_text_config(
        tmp_path / "run",
        model_dir,
        credit={"name": "opd"},
        sampler={"name": "uniform"},
        distill={"teacher": f"hf:{teacher_dir}"},
        rollout={"group_size": 1, "groups_per_update": 64},
        optim={"lr": 2e-3, "micro_batch_size": 64, "grad_accumulation": None},
        run={"updates": 20},
    )
    result = train(config)
    assert len([row for row in result.metrics if "distill/reverse_kl" in row]) == 20
    # Exact reverse KL of the first answer token's distribution, before and after: it shrinks.
    teacher = HFBackend(teacher_dir, threads=1)
    prompt = teacher.tokenizer.apply_chat_template(
        [{"role": "user", "content": "Say something."}], add_generation_prompt=True, tokenize=True, return_dict=True
    )["input_ids"]

    def first_token_kl(folder):
        student = HFBackend(folder, threads=1).model
        with torch.no_grad():
            ours = torch.log_softmax(student(torch.tensor([prompt])).logits[0, -1], -1)
            theirs = torch.log_softmax(teacher.model(torch.tensor([prompt])).logits[0, -1], -1)
        return float((ours.exp() * (ours - theirs)).sum())

    assert first_token_kl(result.final_model) < 0.6 * first_token_kl(model_dir)  # 0.052 -> 0.024
    check_teacher(config.distill, config.model, run_dir=tmp_path, seed=config.run.seed)  # the same tokenizer passes
