"""The documentation site and the pages whose code must not rot.

The site is built once per session with Sphinx into a temporary folder, warnings as errors (as
``make docs`` does); its API index must list every public name, and each method page must
carry its figures and tables. docs/model_selection.md's worked example runs as written and
prints what the page says.
"""

from __future__ import annotations

import html
import importlib
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
# The modules whose public functions (and classes) the API index must list besides thrifty.__all__.
REFERENCED = ("thrifty.metrics", "thrifty.costs", "thrifty.io", "thrifty.plot")


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for module in ("sphinx", "numpydoc", "myst_parser", "pydata_sphinx_theme"):
        pytest.importorskip(module, reason=f"{module} is not installed: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q"]
        + ["-d", str(out / "doctrees"), str(DOCS), str(out / "html")],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, f"the docs do not build without warnings:\n{proc.stderr[-4000:]}"
    return out / "html"


def _public(module_name: str) -> dict[str, object]:
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None) or [
        n
        for n, obj in vars(module).items()
        if (inspect.isfunction(obj) or inspect.isclass(obj)) and obj.__module__ == module_name
    ]
    return {n: getattr(module, n) for n in names if not n.startswith("_")}


def test_api_index_lists_every_public_name(site: Path) -> None:
    index = (site / "api" / "index.html").read_text()
    listed = set(re.findall(r'href="generated/([\w.]+)\.html"', index))
    expected = {f"thrifty.{n}" for n in _public("thrifty")}
    top = {id(obj) for obj in _public("thrifty").values()}
    for module_name in REFERENCED:
        for name, obj in _public(module_name).items():
            # A name thrifty re-exports is documented once, under thrifty.
            expected.add(f"thrifty.{name}" if id(obj) in top else f"{module_name}.{name}")
    assert len(expected) > 40
    assert not expected - listed, f"missing from the API index: {sorted(expected - listed)}"
    for full in expected:
        page = (site / "api" / "generated" / f"{full}.html").read_text()
        assert full.rsplit(".", 1)[1] in page


def test_budget_scorer_page_renders_the_numpydoc_sections(site: Path) -> None:
    page = html.unescape((site / "api" / "generated" / "thrifty.metrics.make_budget_scorer.html").read_text())
    for section in ("Parameters", "Returns", "Raises", "Examples"):
        assert f">{section}<" in page
    assert "cost_weight" in page and "BudgetScorer" in page


def _markdown_images(text: str) -> list[str]:
    return re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text) + re.findall(r'<img[^>]*src="([^"]+)"', text)


@pytest.mark.parametrize("page", sorted(p.stem for p in (DOCS / "methods").glob("*.md")))
def test_each_method_page_carries_its_figures_and_tables(site: Path, page: str) -> None:
    source = (DOCS / "methods" / f"{page}.md").read_text()
    built = site / "methods" / f"{page}.html"
    body = built.read_text()
    images = _markdown_images(source)
    assert images, f"docs/methods/{page}.md shows no figure"
    for ref in images:
        assert (DOCS / "methods" / ref).resolve().is_file(), f"{page}.md shows a missing file {ref}"
    shown = re.findall(r'<img[^>]*src="([^"]+)"', body)
    assert len(shown) == len(images)
    for src in shown:
        assert (built.parent / src).resolve().is_file(), f"{page}.html shows {src}, absent from the build"
    # Every results figure the text names is on the page.
    named = set(re.findall(r"benchmarks/results/([\w-]+\.png)", source))
    assert named <= {Path(src).name for src in shown} | {Path(ref).name for ref in images}
    # Every markdown table became an HTML table.
    tables = len(re.findall(r"^\|[-:| ]+\|$", source, re.M))
    assert body.count("<table") == tables


def test_index_links_every_page(site: Path) -> None:
    index = (site / "index.html").read_text()
    for page in sorted(DOCS.glob("*.md")) + sorted((DOCS / "methods").glob("*.md")):
        if page.stem != "index":
            rel = page.relative_to(DOCS).with_suffix(".html").as_posix()
            assert f'href="{rel}' in index, f"{rel} is not in the site's table of contents"


def test_model_selection_example_runs_and_prints_what_the_page_says(capsys) -> None:
    text = (DOCS / "model_selection.md").read_text()
    code = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "GridSearchCV(" in b)
    printed_block = re.search(r"It prints[^\n]*\n\n```text\n(.*?)```", text, re.S)
    assert printed_block is not None
    exec(compile(code, str(DOCS / "model_selection.md"), "exec"), {})
    printed = capsys.readouterr().out
    assert printed.split() == printed_block.group(1).split()
