"""Scale-out on Dask: score a Dask collection on a cluster with exact per-example costs.

Needs the optional extra ``thrifty[dask]`` (``dask[dataframe]`` and ``distributed``).
``import thrifty`` never imports this package; ``import thrifty.dask`` does.
"""

from __future__ import annotations

try:
    import dask  # noqa: F401
    import dask.dataframe  # noqa: F401
    import distributed  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "thrifty.dask needs Dask: install the extra with "
        "`pip install 'thrifty[dask]'` (dask[dataframe] and distributed)"
    ) from exc

from thrifty.dask._cluster import cluster_client
from thrifty.dask._scoring import CostSummary, PartitionInfo, cost_summary, evaluate

__all__ = ["CostSummary", "PartitionInfo", "cluster_client", "cost_summary", "evaluate"]
