"""Forest: the flat representation of any tree ensemble, its importers and JSON io."""

from typing import TYPE_CHECKING

from thrifty._lazy import attach

if TYPE_CHECKING:
    from thrifty.forest._forest import Forest
    from thrifty.forest._inputs import to_matrix
    from thrifty.forest._traverse import next_node
    from thrifty.forest.links import raw_to_proba
    from thrifty.forest.names import is_dataframe

__all__ = ["Forest", "is_dataframe", "next_node", "raw_to_proba", "to_matrix"]

__getattr__, __dir__ = attach(__name__, __file__)
