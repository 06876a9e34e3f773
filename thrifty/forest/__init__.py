"""Forest: the flat representation of any tree ensemble, its importers and JSON io."""

from thrifty.forest._forest import Forest
from thrifty.forest.links import raw_to_proba

__all__ = ["Forest", "raw_to_proba"]
