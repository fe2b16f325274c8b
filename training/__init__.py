"""MS-GRPO and related credit assigners, samplers, losses, and the trainer.

Importing ``training`` is light (numpy and pydantic; no torch): the torch losses live in
:mod:`training.losses`, imported on demand.
"""

from training.algorithms import list_algorithms
from training.config import IncompatibleGameError, TrainConfig, validate_against_game
from training.credit import (
    CREDIT_ASSIGNERS,
    CreditAssignment,
    CreditStats,
    StepCredit,
    TrajectoryCredit,
    assign_credit,
)
from training.loss_specs import LOSSES
from training.sampling import SAMPLERS, Sample, SampleStats, sample

__all__ = [
    "CREDIT_ASSIGNERS",
    "LOSSES",
    "SAMPLERS",
    "CreditAssignment",
    "CreditStats",
    "IncompatibleGameError",
    "Sample",
    "SampleStats",
    "StepCredit",
    "TrainConfig",
    "TrajectoryCredit",
    "assign_credit",
    "list_algorithms",
    "sample",
    "validate_against_game",
]
