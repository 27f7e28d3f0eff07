"""The fast readers of the usual manifest, behind one door (``read.read_apart``, which the loader
calls): a plain entity list read from its text by one regex split (``plain``), a big file read a
slice at a time (``slices``). Each must change nothing but speed and memory: the differential
tests in ``tests/manifest/fast/`` compare them with the general path (a whole parse and the
shape check) on generated files. Imports the manifest's lower modules (``head``, ``items``,
``parse``, ``shape``, ``source``); the loader and compile import it, never the reverse."""
