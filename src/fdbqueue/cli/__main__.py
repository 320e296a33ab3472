"""``python -m fdbqueue.cli``: the command line, as the ``fdbqueue`` console script."""

from fdbqueue.cli import main

main()
