"""``python -m kqplan.sandbox ARGS`` is ``python -m kqplan sandbox ARGS``: the same program, run as
``kqplan``'s own ``__main__`` (the sandbox package knows nothing of the command line)."""

import runpy
import sys

sys.argv[1:1] = ["sandbox"]
runpy.run_module("kqplan", run_name="__main__", alter_sys=True)
