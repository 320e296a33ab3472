"""``python -m fdbqueue``: the ``fdbqueue`` command line (:mod:`fdbqueue.cli`)."""

from fdbqueue.cli import main

main()
