"""One module per ``kqplan`` command: a plain function that takes typed values and the console
streams, runs the pipeline, renders, and returns an exit code. Imports anything below it
(``pipeline``, ``fleet``, ``render``, ``apply``, …); only ``cli`` imports it."""
