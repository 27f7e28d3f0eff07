"""The pure domain: entities, quota keys and units, quota state, the plan (diff), effective-quota
resolution (Kafka's level table), quota buckets, Kafka's quota sensors and the judge of what they
show after a change, blast radius, ownership, policy, lint, version
rules, diagnostics, errors, the apply report's values, and the ``Cluster`` protocol every backend
implements. Functions over frozen values: no file, console or clock, and the one question put to
the operating system is ``ipnames``'s (is this host name an address, as Kafka's controller asks
the resolver). It imports nothing of kqplan outside ``core`` (the standard library, and nothing
heavy at import time)."""
