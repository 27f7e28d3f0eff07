"""The apply protocol (DESIGN §3.5): validateOnly pre-flight, alter in batches under Kafka's record
cap, verify by describing, a per-entity outcome for every change (``protocol``, ``verify``).
Talks to a cluster only through the core's ``Cluster`` protocol. Imports ``core`` and ``console``."""
