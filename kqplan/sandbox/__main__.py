"""``python -m kqplan.sandbox ARGS`` is ``kqplan sandbox ARGS``."""

import sys

from kqplan.cli import main

main(["sandbox", *sys.argv[1:]])
