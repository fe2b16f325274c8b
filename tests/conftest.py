"""Fixtures shared across the test folders (each folder's own conftest adds its own)."""

import pytest

from tests.small_lake import build_lake_model


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """The demo's tiny model (one token per grid cell), built once a session for the small-lake runs.

    A test module that needs another tiny model defines a ``tiny_model`` of its own, which takes precedence.
    """
    return build_lake_model(tmp_path_factory.mktemp("models"))
