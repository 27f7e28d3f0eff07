"""``python -m kqplan``: the same entry point as the ``kqplan`` script."""

from kqplan.cli import main

main()
