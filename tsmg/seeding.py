"""One rule from a run's seed and a decision's place in the plan to the seed its sample is drawn with.

Every sampler of the project derives its seeds here: the LAP (the seed of each generation
request), every backend (a request's own seed combined with a batch-wide one, in
:func:`combine_seeds`) and the trainer (the game seeds and sampling seed of each update). The
rule is numpy's :class:`~numpy.random.SeedSequence` over the keys, each key written in a fixed
width with a flag for None, so two different key tuples never hand ``SeedSequence`` the same
input. (The linear hash this replaced, ``episode * 10007 + round * 101 + agent * 7 + attempt``,
gave episode 1, round 0 the seed of episode 0, round 99, agent 1, attempt 1.)

A decision's keys are its *plan position*, :func:`decision_seed`: the run seed, the game seed
(the episode's index in the plan when it has none), the episode's index in its group, the
round, the agent and the attempt. So

* a group's episodes (one game seed, different group indices) sample differently;
* a request's seed does not depend on the batch it lands in (no batch position among the keys);
* the same plan replays exactly.

Example:
    >>> decision_seed(0, game_seed=1, group_index=0, round=0, agent=0, attempt=0) != decision_seed(
    ...     0, game_seed=0, group_index=0, round=99, agent=1, attempt=1
    ... )
    True
    >>> derive_seed(3, 7) == derive_seed(3, 7) and 0 <= derive_seed(3, 7) < 2**SEED_BITS
    True
"""

from __future__ import annotations

import numpy as np

#: Derived seeds lie in [0, 2**SEED_BITS): a non-negative signed 64-bit integer, which every
#: backend and server here accepts (torch generators, vLLM, OpenAI-compatible ``seed``).
SEED_BITS = 63
_WORD = 2**32


def _words(keys: tuple[int | None, ...]) -> np.ndarray:
    """Each key as three 32-bit words: a None flag, then the key modulo 2**64 (low word first)."""
    words: list[int] = []
    for key in keys:
        if key is None:
            words += [0, 0, 0]
        else:
            value = int(key) % 2**64
            words += [1, value % _WORD, value // _WORD]
    return np.array(words, dtype=np.uint32)


def seed_sequence(*keys: int | None) -> np.random.SeedSequence:
    """The :class:`~numpy.random.SeedSequence` of ``keys`` (ints taken modulo 2**64, or None)."""
    return np.random.SeedSequence(_words(keys))


def derive_seed(*keys: int | None) -> int:
    """A seed in ``[0, 2**SEED_BITS)`` determined by ``keys`` alone.

    Example:
        >>> derive_seed(1, 2) != derive_seed(2, 1) and derive_seed(None, 0) != derive_seed(0, None)
        True
    """
    state = seed_sequence(*keys).generate_state(1, dtype=np.uint64)[0]
    return int(state >> np.uint64(64 - SEED_BITS))


def seed_generator(*keys: int | None) -> np.random.Generator:
    """A numpy generator determined by ``keys`` alone (for draws that are not a backend's sample)."""
    return np.random.default_rng(seed_sequence(*keys))


def decision_seed(
    run_seed: int,
    *,
    game_seed: int | None,
    group_index: int,
    round: int,
    agent: int,
    attempt: int,
    episode_index: int = 0,
) -> int:
    """The sampling seed of one model call, from its plan position.

    Args:
        run_seed: The run's seed (``LAPConfig.seed``; the trainer gives each update its own).
        game_seed: The seed the episode's game was reset with (None: an unseeded episode).
        group_index: The episode's index in its group (0 outside groups).
        round: The game round of the decision.
        agent: The deciding agent's index in the game's agent list.
        attempt: 0 for the first answer, k for the k-th re-prompt.
        episode_index: The episode's index in the rollout plan; a key only for an unseeded
            episode, which has no game seed to tell it apart from the others.

    Returns:
        A seed in ``[0, 2**SEED_BITS)``.
    """
    index = episode_index if game_seed is None else None
    return derive_seed(run_seed, game_seed, index, group_index, round, agent, attempt)


def combine_seeds(base: int | None, own: int | None) -> int | None:
    """The seed one request samples with: its own seed and the batch's base seed (either may be None).

    Every backend uses this rule (HF, the vLLM engine, OpenAI-compatible servers), so a request's
    sample depends on its two seeds only, never on the batch it is in. A base seed alone gives
    every request of a batch the same seed (identical prompts then sample alike); give each
    request its own seed, as the LAP does, to make them differ. Neither: None (the backend
    draws fresh entropy).

    >>> combine_seeds(None, 7), combine_seeds(3, None), combine_seeds(None, None)
    (7, 3, None)
    >>> combine_seeds(1, 7) != combine_seeds(2, 7) and combine_seeds(1, 7) == derive_seed(1, 7)
    True
    """
    if base is None:
        return own
    if own is None:
        return base
    return derive_seed(base, own)
