"""The ``kqplan`` command line: parse options into typed values, call a command, map errors.

Thin by design: each command lives in ``kqplan/commands/`` as a function returning an exit
code; this package is its only importer, and imports it lazily inside each command function so
that ``kqplan --help`` and every start-up stay fast. The modules:

- :mod:`~kqplan.cli.app`: the ``typer`` app, its global options and the helpers every command
  uses (the console streams, colour, the project config, ``choice``);
- :mod:`~kqplan.cli.boundary`: the one error boundary (:func:`~kqplan.cli.boundary.run`);
- :mod:`~kqplan.cli.options`: the option and argument types several commands share;
- one module per group of commands, registering them on the app: :mod:`~kqplan.cli.plan`
  (validate, plan, apply), :mod:`~kqplan.cli.intent` (test), :mod:`~kqplan.cli.show` (show a saved
  plan), :mod:`~kqplan.cli.cluster` (init, export, describe, alter, resolve),
  :mod:`~kqplan.cli.sandbox`, :mod:`~kqplan.cli.manifests` (schema, fmt, import),
  :mod:`~kqplan.cli.throttled` (what Kafka throttled, from Prometheus) and
  :mod:`~kqplan.cli.fleet` (the ``fleet`` sub-app);
- :mod:`~kqplan.cli.main`: the console entry point, which imports every group module.
"""
