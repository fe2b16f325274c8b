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


def _service_graph(labels: list[str], edges: list[tuple[str, int, str]], user: bool = True) -> InfluenceGraph:
    """Actions a0.. labelled by ``labels``, each with its tool message t<i> (shown at step i + 1),
    the user's opening m0; ``edges`` (source, target action index, kind)."""
    nodes = [InfluenceNode(id="m0", kind="user", step=0)] if user else []
    for i, label in enumerate(labels):
        nodes.append(InfluenceNode(id=f"a{i}", kind="action", step=i, label=label))
        nodes.append(InfluenceNode(id=f"t{i}", kind="tool", step=i + 1, produced_by=f"a{i}"))
    return InfluenceGraph(
        nodes=nodes, edges=[InfluenceEdge(source=source, target=f"a{j}", kind=kind) for source, j, kind in edges]
    )


#: The three hand-built graphs of docs/tool-games.md ("Who gets what"), as the service games write them.
#: 1. Look-up, then a refund of the wrong amount shown in the look-up's answer (the issue's example).
WRONG_AMOUNT = _service_graph(["lookup_order", "issue_refund"], [("t0", 1, "support"), ("t0", 1, "failure")])
#: 2. The user named two orders; the agent looked up the other one (a wrong order id from m0), then
#:    the right one, then refunded the right order with the other order's amount.
DECOY = _service_graph(
    ["lookup_order", "lookup_order", "issue_refund"],
    [("m0", 0, "failure"), ("m0", 1, "support"), ("t1", 2, "support"), ("t0", 2, "failure")],
)
#: 3. A success: look-up, policy check on its category, a look-up nothing used, the refund built on
#:    the first look-up and the policy.
SUCCESS = _service_graph(
    ["lookup_order", "check_policy", "lookup_order", "issue_refund"],
    [("m0", 0, "support"), ("t0", 1, "support"), ("t0", 3, "support"), ("t1", 3, "support")],
)


def test_three_hand_built_graphs_route_blame_to_the_erring_action_and_its_producer():
    """Kills: the old downstream-count rule (the erring refund got 0.67), dropping the producer
    (the look-up would get 0.67), dropping the user of an edge (the refund would get 0.67)."""
    # 1. Both the look-up (whose answer carried the wrong amount) and the refund (which used it) erred.
    assert routed_advantages(WRONG_AMOUNT, (0, 1), -1.0).tolist() == pytest.approx([-1.0, -1.0])
    # 2. The decoy look-up erred (wrong id) and produced the wrong amount; the refund used it; the
    #    right look-up is innocent: w = 3 (2, 1, 2) / 5.
    assert routing_weights(DECOY, (0, 1, 2), "failure") == pytest.approx([1.2, 0.6, 1.2])
    assert routed_advantages(DECOY, (0, 1, 2), -0.5).tolist() == pytest.approx([-0.6, -0.3, -0.6])
    # 3. Success: the unused look-up gets half the others' credit; the final refund is not last in line.
    assert routing_weights(SUCCESS, (0, 1, 2, 3), "support") == pytest.approx([8 / 7, 8 / 7, 4 / 7, 8 / 7])
    # The same graph failing has no failure edge: MS-GRPO's uniform blame.
    assert routing_weights(SUCCESS, (0, 1, 2, 3), "failure").tolist() == [1.0, 1.0, 1.0, 1.0]


def test_a_users_message_has_no_producer_and_action_edges_count_both_ends():
    # The user's message misled a1: only a1 is involved.
    graph = _service_graph(["ask", "lookup_order", "issue_refund"], [("m0", 1, "failure")])
    assert routing_weights(graph, (0, 1, 2), "failure") == pytest.approx([0.75, 1.5, 0.75])
    # An edge straight from an action (a1 continued a0's failed plan) involves both.
    direct = _chain(3, [(0, 1, "failure")])
    assert routing_weights(direct, (0, 1, 2), "failure") == pytest.approx([1.2, 1.2, 0.6])


def test_only_the_trajectorys_own_actions_count():
    # A two-seat graph: steps 0 and 2 are ours, step 1 another seat's that used our output (a0 -> a1).
    graph = _chain(3, [(0, 1, "support"), (1, 2, "support")])
    # a0's edge ends at another seat's action: not ours to credit; a2 used a1 (not ours): a2 involved.
    assert routing_weights(graph, (0, 2), "support") == pytest.approx([2 / 3, 4 / 3])
    # A step with no action node is involved in nothing.
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
        # Every action on an edge of the kind, as its user or its producer, carries at least its share.
        ends = {j for _, j, k in edges + messages if k == kind} | {i for i, _, k in edges + messages if k == kind}
        assert all(weights[i] >= 1 - 1e-12 for i in ends)
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
    win = grpo[0].advantages[0]  # a0's result used by a2: both involved, w = 3 (2, 1, 2) / 5
    assert iapo[0].advantages.tolist() == pytest.approx([win * 1.2, win * 0.6, win * 1.2])
    loss = grpo[1].advantages[0]  # a1's failure built on by a2: a1 and a2 involved
    assert iapo[1].advantages.tolist() == pytest.approx([loss * 0.6, loss * 1.2, loss * 1.2])
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
    from tsmg.apps.cli import main
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
