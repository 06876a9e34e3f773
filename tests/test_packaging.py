"""The installed distribution's metadata: one version, the licence shipped."""

import importlib.metadata
import tomllib
from pathlib import Path

import thrifty

ROOT = Path(__file__).resolve().parents[1]


def test_version_is_written_once():
    assert importlib.metadata.version("thrifty") == thrifty.__version__
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]


def test_licence_is_declared_and_shipped():
    meta = importlib.metadata.metadata("thrifty")
    assert meta["License-Expression"] == "MIT"
    assert "LICENSE" in (meta.get_all("License-File") or [])
    assert "MIT License" in (ROOT / "LICENSE").read_text()


def test_changelog_names_the_current_version():
    assert thrifty.__version__ in (ROOT / "CHANGELOG.md").read_text()
