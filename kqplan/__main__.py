"""``python -m kqplan``: the same entry point as the ``kqplan`` script."""

from kqplan.cli.main import main

main()
