"""Shared pytest fixtures."""

import os
from pathlib import Path

import pytest


@pytest.fixture
def data_home() -> Path:
    """The shared datasets folder given by $THRIFTY_DATA; skips the test when it is not set."""
    value = os.environ.get("THRIFTY_DATA")
    if not value or not Path(value).is_dir():
        pytest.skip("set THRIFTY_DATA to the shared datasets folder (../shared/data) to run this test")
    return Path(value)
