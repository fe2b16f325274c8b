"""Shared fixtures of the integration tests: a tiny model built once per session, one torch thread."""

import pytest


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Tiny models run fastest on one thread (a shared machine makes more threads spin); restored after."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A ~0.15M-parameter Llama with a ChatML template, saved like any user's model."""
    from backends.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-chat"))
