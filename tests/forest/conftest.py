"""Fixtures of the importer tests: a generator, and ``case``, one fitted model per entry of the test
module's ``BUILDERS`` (name -> function of a generator returning a case with ``model``)."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest

from tests._helpers.importers import split_values
from thrifty.forest import Forest


@pytest.fixture(scope="module")
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "case" in metafunc.fixturenames:
        metafunc.parametrize("case", list(metafunc.module.BUILDERS), indirect=True, scope="module")


@pytest.fixture(scope="module")
def case(request: pytest.FixtureRequest) -> Any:
    # One generator per case, so a case's model does not depend on which cases ran before.
    built = request.module.BUILDERS[request.param](np.random.default_rng(zlib.crc32(request.param.encode())))
    # The forest lives in the case (not in a fixture of its own) so it can never be paired
    # with another case's model.
    built.forest = Forest.from_model(built.model)
    built.thresholds = split_values(built.forest)
    return built
