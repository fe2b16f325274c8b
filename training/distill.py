"""On-policy distillation (OPD; TurnOPD, arXiv 2607.05804): a teacher scores the student's own tokens.

The student plays as usual; every token y_t it wrote gets the per-token advantage
``lambda (log pi_teacher(y_t) - log pi_student(y_t))`` (the reverse KL, per token, with
pi_student the policy that sampled: pi_old), added to the RL advantage of its step
(``A = A_RL + lambda A_OPD``); the credit assigner ``opd`` sets A_RL to 0 (distillation alone).
``distill.turn_balanced`` scales each turn's term so that every turn weighs the same in the loss,
whatever its length, under the run's aggregation: by (mean tokens per turn) / (its tokens) under
``token-mean`` and ``constant`` (where a turn otherwise weighs in proportion to its length), by 1
under ``sequence-mean`` of one turn per sequence (each turn already weighs the same), and under
GSPO's sequences of several turns by the inverse of the turn's share of its sequence, normalised
(:func:`opd_advantages`).

The teacher is any local model (``hf:PATH``, ``smollm2``, ``vllm:PATH``: its HF weights) or a
trained run's folder (``hf:runs/NAME`` reads ``runs/NAME/final``). It reads the student's prompt
ids and scores the student's token ids, under the same temperature and, for a constrained
answer, the same allowed tokens (:func:`backends.scoring.score_completions`), so both models must
share a tokenizer: :func:`check_teacher` compares the two vocabularies before any model loads.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from training.loss_specs import Aggregation, row_token_weights
from tsmg.model_spec import parse_model_spec

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from backends.hf import DType
    from training.config import DistillConfig, ModelConfig

FloatArray = np.ndarray


class TeacherMismatchError(ValueError):
    """The teacher cannot score the student's tokens (its tokenizer differs); the message says how."""


def opd_advantages(
    teacher: Sequence[Sequence[float]],
    student: Sequence[Sequence[float]],
    weight: float = 1.0,
    *,
    turn_balanced: bool = False,
    aggregation: Aggregation = "token-mean",
    sequences: Sequence[Hashable] | None = None,
) -> list[list[float]]:
    """Per-token OPD advantages lambda (log pi_teacher - log pi_student) of each turn (one row per turn).

    With ``turn_balanced`` each turn's terms are scaled so that every turn's total weight in the
    loss is the same under ``aggregation``: a turn of n_k tokens, each weighed w_k by the
    aggregation (:func:`training.loss_specs.row_token_weights`), weighs n_k w_k; its scale is
    s_k = mean_j(n_j w_j) / (n_k w_k), which keeps the turns' total weight as it was.

    Args:
        teacher: The teacher's log-probability of each token, one row per turn.
        student: The student's (pi_old), the same shape.
        weight: lambda.
        turn_balanced: Weigh every turn alike (else every token alike under token-mean).
        aggregation: The loss's aggregation (how the loss weighs each token).
        sequences: Which rows form one sequence, for a sequence-level ratio (GSPO); None: one row each.

    Example:
        >>> opd_advantages([[-1.0, -2.0], [-1.0]], [[-2.0, -2.0], [-3.0]])
        [[1.0, 0.0], [2.0]]
        >>> opd_advantages([[-1.0, -2.0], [-1.0]], [[-2.0, -2.0], [-3.0]], 0.5, turn_balanced=True)
        [[0.375, 0.0], [1.5]]
        >>> teacher, student = [[-1.0, -2.0], [-1.0]], [[-2.0, -2.0], [-3.0]]
        >>> opd_advantages(teacher, student, turn_balanced=True, aggregation="sequence-mean")
        [[1.0, 0.0], [2.0]]
    """
    if len(teacher) != len(student):
        raise ValueError(f"got {len(teacher)} teacher rows for {len(student)} student rows")
    lengths = [len(row) for row in student]
    scales = [1.0] * len(lengths)
    if turn_balanced:
        turn_weights = [
            length * token_weight
            for length, token_weight in zip(lengths, row_token_weights(lengths, aggregation, sequences), strict=True)
        ]
        mean = float(np.mean([value for value in turn_weights if value > 0])) if any(turn_weights) else 0.0
        scales = [mean / value if value > 0 else 1.0 for value in turn_weights]
    rows = []
    for given, sampled, scale in zip(teacher, student, scales, strict=True):
        if len(given) != len(sampled):
            raise ValueError("the teacher scored a different number of tokens than the student wrote")
        rows.append([weight * scale * (t - s) for t, s in zip(given, sampled, strict=True)])
    return rows


def teacher_source(spec: str) -> str:
    """The folder (or hub id) of a teacher spec; a run folder means its ``final/`` model.

    Example:
        >>> teacher_source("hf:Qwen/Qwen2.5-0.5B-Instruct")
        'Qwen/Qwen2.5-0.5B-Instruct'
    """
    parsed = parse_model_spec(spec)
    if parsed.kind == "smollm2":
        from backends.embedded import embedded_model_dir

        return str(embedded_model_dir())
    if parsed.kind in ("hf", "vllm") and parsed.target:
        folder = Path(parsed.target).expanduser()
        if not (folder / "config.json").is_file() and (folder / "final" / "config.json").is_file():
            return str(folder / "final")
        return parsed.target
    raise ValueError(f"distill.teacher {spec!r} is not a local model ('hf:PATH', 'smollm2', 'vllm:PATH')")


def _tokenizer(source: str) -> PreTrainedTokenizerBase:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(source, local_files_only=True)
    except OSError as error:
        raise TeacherMismatchError(f"cannot load the tokenizer of {source!r}: {error}") from None


def student_tokenizer(model: ModelConfig, *, run_dir: Path, seed: int) -> PreTrainedTokenizerBase:
    """The student's tokenizer (``model``), without loading its weights (a tiny model's is trained as the run would).

    ``run_dir`` and ``seed`` (the run's) are where a tiny model is built and what initialises it
    (:func:`training.base_model.base_model_source`).
    """
    parsed = parse_model_spec(model.spec)
    if parsed.kind == "tiny":
        from backends.tiny import PRESETS, train_tokenizer
        from training.base_model import tiny_corpus
        from training.tiny_corpus import game_corpus

        tiny = model.tiny
        corpus = tiny_corpus(tiny)
        return train_tokenizer(corpus or list(game_corpus()), tiny.vocab_size or PRESETS[tiny.preset].vocab_size)
    from training.base_model import base_model_source

    return _tokenizer(base_model_source(model, run_dir, seed=seed))


def check_teacher(distill: DistillConfig, model: ModelConfig, *, run_dir: Path, seed: int) -> None:
    """Refuse a ``distill.teacher`` whose vocabulary differs from the student's (``model``), before any model loads.

    ``run_dir`` and ``seed`` are the run's (a tiny student's tokenizer is trained as the run would).

    Raises:
        TeacherMismatchError: The two tokenizers map some token to different ids (the message
            names one), or the teacher's tokenizer cannot be loaded.
    """
    spec = distill.teacher
    if spec is None:
        return
    teacher = _tokenizer(teacher_source(spec)).get_vocab()
    student = student_tokenizer(model, run_dir=run_dir, seed=seed).get_vocab()
    if teacher == student:
        return
    differing = next((token for token in sorted(student) if teacher.get(token) != student[token]), None)
    if differing is None:
        differing = next(token for token in sorted(teacher) if token not in student)
    raise TeacherMismatchError(
        f"distill.teacher {spec!r} has another tokenizer than the student {model.spec!r} "
        f"({len(teacher)} and {len(student)} tokens; {differing!r} is id {teacher.get(differing)} for the teacher "
        f"and {student.get(differing)} for the student): distillation compares both models' log-probabilities of "
        "the same token ids, so pick a teacher of the student's family (e.g. a run trained from the same base)"
    )


@dataclass
class Teacher:
    """The teacher model, loaded once per run, frozen (its ``model`` is scored like the student's)."""

    model: Any
    source: str

    @classmethod
    def load(cls, distill: DistillConfig, *, dtype: DType, threads: int | None) -> Teacher:
        """Load ``distill.teacher`` (HF weights, the student's ``dtype`` and torch ``threads``), in eval mode, frozen.

        Raises:
            ValueError: ``distill.teacher`` is unset (there is no teacher to load).
        """
        from backends.hf import HFBackend

        if distill.teacher is None:
            raise ValueError("distill.teacher is unset: name the teacher model to distil from")
        source = teacher_source(distill.teacher)
        backend = HFBackend(source, dtype=dtype, threads=threads)
        backend.model.eval().requires_grad_(False)
        return cls(backend.model, source)
