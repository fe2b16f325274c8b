"""Shared fixtures of the integration tests: those of the backend tests (a tiny model, one torch thread)."""

from tests.backends.conftest import one_torch_thread, tiny_model_dir

__all__ = ["one_torch_thread", "tiny_model_dir"]
