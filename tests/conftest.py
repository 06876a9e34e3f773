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


@pytest.fixture(scope="session", autouse=True)
def compiled_code_cache(tmp_path_factory: pytest.TempPathFactory):
    """Compiled plans are cached in a folder of this test session, never the user's cache
    (where code of another thrifty version may sit under the same key)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("THRIFTY_CACHE_DIR", str(tmp_path_factory.mktemp("compiled-code")))
    yield
    mp.undo()
