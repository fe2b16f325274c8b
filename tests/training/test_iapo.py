"""IAPO credit: the routing rule's invariants, hand-computed graphs, the assigner and its configuration."""

from __future__ import annotations

import numpy as np
import pytest

from training.annotators import annotate
from training.config import IncompatibleGameError, TrainConfig, validate_against_game
from training.credit import assign_credit
from training.iapo import routed_advantages, routing_weights
from tsmg.episode import Episode, StepRecord
from tsmg.influence import InfluenceEdge, InfluenceGraph, InfluenceNode


def _chain(
    n: int,
    edges: list[tuple[int, int, str]],
    messages: tuple[tuple[int, int, str], ...] | list[tuple[int, int, str]] = (),
) -> InfluenceGraph:
    """Actions a0..a(n-1); ``edges`` (i, j, kind) from action i to action j, ``messages`` from i's tool result."""
    nodes = [InfluenceNode(id=f"a{i}", kind="action", step=i) for i in range(n)]
    nodes += [
        InfluenceNode(id=f"t{i}", kind="tool", step=i + 1, produced_by=f"a{i}")
        for i in sorted({i for i, _, _ in messages})
    ]
    return InfluenceGraph(
        nodes=nodes,
        edges=[InfluenceEdge(source=f"a{i}", target=f"a{j}", kind=kind) for i, j, kind in edges]
        + [InfluenceEdge(source=f"t{i}", target=f"a{j}", kind=kind) for i, j, kind in messages],
    )


def test_hand_computed_graphs():
    # lookup (a0) -> its result used by check (a1) and refund (a3); a1's result used by a3; a2 unrelated.
    graph = _chain(4, [], [(0, 1, "support"), (0, 3, "support"), (1, 3, "support")])
    # d = [2, 1, 0, 0] -> raw [3, 2, 1, 1], sum 7, w = 4 * raw / 7
    assert routing_weights(graph, (0, 1, 2, 3), "support") == pytest.approx([12 / 7, 8 / 7, 4 / 7, 4 / 7])
    assert routed_advantages(graph, (0, 1, 2, 3), 0.7).tolist() == pytest.approx([1.2, 0.8, 0.4, 0.4])
    # A failure propagated from a1 into a2 and, through a2, into a3: d = [0, 2, 1, 0] -> raw [1, 3, 2, 1].
    failing = _chain(4, [(1, 2, "failure"), (2, 3, "failure"), (0, 1, "support")])
    assert routed_advantages(failing, (0, 1, 2, 3), -1.4).tolist() == pytest.approx([-0.8, -2.4, -1.6, -0.8])
    # The same trajectory succeeding routes along support edges only: a0 -> a1.
    assert routing_weights(failing, (0, 1, 2, 3), "support") == pytest.approx([8 / 5, 4 / 5, 4 / 5, 4 / 5])


def test_only_the_trajectorys_own_actions_count_downstream():
    # A two-seat graph: steps 0 and 2 are ours, step 1 another seat's that used our output.
    graph = _chain(3, [(0, 1, "support"), (1, 2, "support")])
    assert routing_weights(graph, (0, 2), "support") == pytest.approx([4 / 3, 2 / 3])  # a2 downstream of a0 via a1
    # A step with no action node: downstream of nothing, weight 1 before normalising.
    sparse = InfluenceGraph(nodes=[InfluenceNode(id="a0", kind="action", step=0)])
    assert routing_weights(sparse, (0, 1), "support").tolist() == [1.0, 1.0]


@pytest.mark.parametrize("seed", range(40))
def test_invariants_on_random_graphs(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 8))
    edges = [(i, j, str(rng.choice(["support", "failure"]))) for j in range(n) for i in range(j) if rng.random() < 0.35]
    messages = [(i, j, "failure") for j in range(n) for i in range(j) if rng.random() < 0.15]
    graph = _chain(n, edges, messages)
    steps = tuple(range(n))
    for advantage in (1.3, -0.4, 0.0):
        routed = routed_advantages(graph, steps, advantage)
        assert routed.sum() == pytest.approx(n * advantage)  # mass conserved
        assert np.all(np.sign(routed) == np.sign(advantage))  # every action keeps L's sign
    for kind in ("support", "failure"):
        weights = routing_weights(graph, steps, kind)
        assert np.all(weights > 0) and weights.sum() == pytest.approx(n)
    bare = _chain(n, [])
    assert routed_advantages(bare, steps, 0.9).tolist() == pytest.approx([0.9] * n)  # no edges: MS-GRPO


def _episode(name: str, returns: float, graph: InfluenceGraph | None, steps: int = 3) -> Episode:
    return Episode(
        episode_id=name,
        game_id="g",
        group_id="g0",
        agents=["player"],
        policies={"player": "p"},
        steps=[StepRecord(index=i, round=i, agent="player", observation="") for i in range(steps)],
        returns={"player": returns},
        influence={} if graph is None else {"exact": graph},
    )


def test_the_assigner_routes_ms_grpo_advantages_and_conserves_each_trajectorys_total():
    used = _chain(3, [], [(0, 2, "support")])
    failed = _chain(3, [(1, 2, "failure")])
    episodes = [_episode("win", 1.0, used), _episode("loss", 0.0, failed), _episode("loss2", 0.0, _chain(3, []))]
    iapo = assign_credit("iapo", episodes).trajectories
    grpo = assign_credit("ms-grpo", episodes).trajectories
    for routed, flat in zip(iapo, grpo, strict=True):
        assert routed.advantages.sum() == pytest.approx(flat.advantages.sum())
        assert np.all(np.sign(routed.advantages) == np.sign(flat.advantages))
    win = grpo[0].advantages[0]
    assert iapo[0].advantages.tolist() == pytest.approx([win * 1.5, win * 0.75, win * 0.75])
    loss = grpo[1].advantages[0]
    assert iapo[1].advantages.tolist() == pytest.approx([loss * 0.75, loss * 1.5, loss * 0.75])
    assert iapo[2].advantages.tolist() == pytest.approx(grpo[2].advantages.tolist())
    # Equal returns: zero advantage stays zero whatever the graph.
    ties = [_episode("a", 1.0, used), _episode("b", 1.0, failed)]
    assert all(not credit.advantages.any() for credit in assign_credit("iapo", ties).trajectories)


def test_an_episode_without_the_graph_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="influence graph 'exact', and an episode has none"):
        assign_credit("iapo", [_episode("a", 1.0, None), _episode("b", 0.0, None)])
    with pytest.raises(ValueError, match="has none"):
        annotate(["exact"], [_episode("a", 1.0, None)])
    annotate(["exact"], [_episode("a", 1.0, _chain(3, []))])
    with pytest.raises(ValueError, match="beyond the episode's 2 step"):
        annotate(["exact"], [_episode("a", 1.0, _chain(3, []), steps=2)])


def test_configuration_defaults_to_the_exact_annotator_and_refuses_a_game_without_a_record():
    config = TrainConfig(rollout={"game_id": "FrozenLake-v0"}, model={"spec": "tiny"}, credit={"name": "iapo"})
    assert config.rollout.annotators == ["exact"]
    with pytest.raises(IncompatibleGameError, match="FrozenLake-v0 keeps no influence record of its own"):
        validate_against_game(config)
    with pytest.raises(ValueError, match="influence graph 'model', and no annotator in rollout.annotators"):
        TrainConfig(
            rollout={"game_id": "FrozenLake-v0"},
            model={"spec": "tiny"},
            credit={"name": "iapo", "params": {"graph": "model"}},
        )


def test_tsmg_train_iapo_on_a_service_game_runs_as_typed(tmp_path, capsys):
    """The exact annotator is the default on a game with its own record; credit moves along the graph."""
    pytest.importorskip("torch")
    from tsmg.cli import main
    from tsmg.episode import read_episodes

    out = tmp_path / "run"
    code = main(
        [
            "train",
            "--game",
            "ServiceRefund-Easy-v0",
            "--algo",
            "iapo",
            "--model",
            "tiny",
            "--updates",
            "1",
            "--groups",
            "2",
            "--group-size",
            "4",
            "--action-format",
            "choice",
            "--eval-every",
            "0",
            "--checkpoint-every",
            "0",
            "--quiet",
            "--set",
            "run.episodes_every=1",
            "--out",
            str(out),
        ]
    )
    assert code == 0, capsys.readouterr().err
    assert "- exact" in (out / "config.yaml").read_text()
    episodes = list(read_episodes(out / "episodes.jsonl"))
    assert episodes and all("exact" in episode.influence for episode in episodes)
    assert (
        main(["train", "--game", "FrozenLake-v0", "--algo", "iapo", "--model", "tiny", "--out", str(tmp_path / "x")])
        == 2
    )
    assert "FrozenLake-v0 keeps no influence record of its own" in capsys.readouterr().err
