"""The pure domain: entities, quota keys and units, quota state, the plan (diff), effective-quota
resolution (Kafka's level table), blast radius, ownership, policy, lint, version rules,
diagnostics, errors, the apply report's values, and the ``Cluster`` protocol every backend
implements. Pure functions over frozen values: no file, socket, console or clock. It imports
nothing of kqplan outside ``core`` (the standard library, and nothing heavy at import time)."""
