"""Benchmark datasets with their real feature costs: load, verify, download and convert.

The registry (:mod:`~thrifty.datasets.registry`) says which datasets exist and what their
``meta.json`` does not hold; :mod:`~thrifty.datasets.fetch` finds them in the data home
(``$THRIFTY_DATA``, else the user cache) and downloads the originals;
:mod:`~thrifty.datasets.converters` turns each original into thrifty's layout, and
:mod:`~thrifty.datasets.dataset` loads the result.
"""

from typing import TYPE_CHECKING

from thrifty._lazy import attach

if TYPE_CHECKING:
    from thrifty.datasets.dataset import Dataset, load, load_demo, yahoo_costs
    from thrifty.datasets.fetch import ChecksumError, convert, download
    from thrifty.datasets.registry import list_datasets

__all__ = [
    "ChecksumError",
    "Dataset",
    "convert",
    "download",
    "list_datasets",
    "load",
    "load_demo",
    "yahoo_costs",
]

__getattr__, __dir__ = attach(__name__, __file__)
