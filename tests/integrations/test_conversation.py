"""ConversationLAP: an episode as one token sequence that reproduces every sampling context exactly."""

import pytest
import torch

from backends.hf import HFBackend
from tsmg.apps.integrations.conversation import ConversationLAP, episode_sequence
from tsmg.episode import Episode
from tsmg.lap import ActionFormat, LAPConfig
from tsmg.rollout import plan_episodes, rollout


def _full_vocab_logprobs(model, sequence):
    """Log-probability of every completion token given everything before it: one forward pass, no cache."""
    ids = torch.tensor([sequence.prompt_ids + sequence.completion_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, :-1].float()
    scores = torch.log_softmax(logits, dim=-1).gather(1, ids[0, 1:, None])[:, 0]
    return scores[len(sequence.prompt_ids) - 1 :].tolist()


@pytest.mark.parametrize("reprompt", [0, 1])
def test_one_forward_pass_over_the_sequence_gives_the_sampled_logprobs(tiny_model_dir, reprompt):
    # Free text from an untrained model: invalid answers, re-prompts, the reasons in between.
    backend = HFBackend(tiny_model_dir)
    lap = ConversationLAP(backend, LAPConfig(action_format=ActionFormat(kind="raw"), max_tokens=6, reprompt=reprompt))
    episodes = rollout("FrozenLake-v0", lap, plans=plan_episodes("FrozenLake-v0", [0, 1], group_size=2))
    for episode in episodes:
        assert episode.error is None and len(episode.steps) >= 2
        sequence = episode_sequence(episode, "player")
        model_tokens = [token for token, flag in zip(sequence.completion_ids, sequence.model_mask, strict=True) if flag]
        last = episode.steps[-1]
        assert model_tokens[-len(last.token_ids) :] == last.token_ids
        assert sequence.prompt_ids + sequence.completion_ids == last.prompt_token_ids + last.token_ids
        scores = _full_vocab_logprobs(backend.model, sequence)
        columns = zip(scores, sequence.logprobs, sequence.model_mask, strict=True)
        sampled = [(score, logprob) for score, logprob, flag in columns if flag]
        assert len(sampled) == sum(len(step.token_ids) for step in episode.steps)
        assert sampled and all(abs(score - logprob) < 1e-4 for score, logprob in sampled)
        # The game's tokens carry no behaviour logprob
        assert all(lp == 0.0 for lp, flag in zip(sequence.logprobs, sequence.model_mask, strict=True) if not flag)
    if reprompt:  # a re-prompt's rejected answer stays in the context the next attempt read
        assert any(step.attempts > 1 for episode in episodes for step in episode.steps)


def test_an_answer_is_followed_by_the_templates_closing_then_the_next_message(tiny_model_dir):
    backend = HFBackend(tiny_model_dir)
    lap = ConversationLAP(backend, LAPConfig(action_format=ActionFormat(kind="choice")))
    [episode] = rollout("FrozenLake-v0", lap, seeds=[5])
    first, second = episode.steps[:2]
    between = second.prompt_token_ids[len(first.prompt_token_ids) + len(first.token_ids) :]
    text = backend.tokenizer.decode(between)
    assert text.startswith("<|im_end|>\n<|im_start|>user\nFrozen Lake") and text.endswith("<|im_start|>assistant\n")
    assert text.count("<|im_start|>") == 2  # the new observation only, not the conversation again


def test_a_record_not_played_as_one_conversation_is_refused(tiny_model_dir):
    from tsmg.lap import LAP

    backend = HFBackend(tiny_model_dir)
    [episode] = rollout("FrozenLake-v0", LAP(backend, LAPConfig(action_format=ActionFormat(kind="choice"))), seeds=[5])
    with pytest.raises(ValueError, match="does not extend the conversation"):
        episode_sequence(episode, "player")
    stripped = Episode.model_validate_json(episode.to_json(token_ids=False))
    with pytest.raises(ValueError, match="recorded without token ids"):
        episode_sequence(stripped, "player")


def test_a_model_without_token_prompts_is_refused():
    from tsmg.policies import RandomPolicy

    with pytest.raises(TypeError, match="takes token-id prompts"):
        ConversationLAP(RandomPolicy())
