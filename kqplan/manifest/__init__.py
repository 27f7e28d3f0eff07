"""Manifests: discovering and reading files (``loader``, ``parse``, ``source``), checking their shape
(``shape``, ``head``, the pydantic ``models``), compiling them into the core's ``DesiredState``
(``compile``, the entry point, over ``compiler`` and its parts ``compiling``, ``values``,
``entries`` and ``bulk``), and the files kqplan writes or edits (``export``, ``yamlio``, ``fmt``);
``related`` finds a changed file's manifest set. The fast readers of the usual file (a plain
list, a big file in slices) are in ``fast``. Imports ``core``, ``config`` and ``perf``."""
