"""Fixtures shared with the provider tests."""

from tests.providers.conftest import small_model  # noqa: F401
