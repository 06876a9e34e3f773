"""``python -m thrifty``: the ``thrifty`` command line."""

import sys

from thrifty.cli import main

if __name__ == "__main__":
    sys.exit(main())
