"""Shared fixtures of the backend tests: tiny models built once per session in a temporary folder."""

import pytest


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Tiny models run fastest on one thread (and a shared CI machine makes more threads spin); restored after."""
    try:
        import torch
    except ImportError:  # the HTTP backends' tests need no torch
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A ~0.15M-parameter Llama with a ChatML template, saved like any user's model."""
    from backends.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-chat"))


@pytest.fixture(scope="session")
def tiny_plain_model_dir(tmp_path_factory):
    """The same kind of model without a chat template (a model that cannot chat)."""
    from backends.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-plain"), chat_template=False, seed=1)


@pytest.fixture(scope="session")
def tiny_backend(tiny_model_dir):
    """One HFBackend over the tiny chat model, shared by the tests that do not change its weights."""
    from backends.hf import HFBackend

    return HFBackend(tiny_model_dir)


@pytest.fixture
def fresh_backend(tiny_model_dir):
    """A backend of its own, for tests that add adapters or change weights."""
    from backends.hf import HFBackend

    return HFBackend(tiny_model_dir)
