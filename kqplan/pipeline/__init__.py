"""The steps every command and every fleet job share: which cluster a command talks to (``target``:
a snapshot, a Kafka cluster, an in-process sandbox), what it reads (``inputs``: manifest layers,
declared Kafka rules, a principals file), and a guarded plan of one cluster (``guarded``: guards,
version rules, diff, guardrails). Imports ``core``, ``config``, ``manifest``, ``snapshot``,
``cluster``, ``sandbox`` and the small top-level modules; never ``commands``, ``cli`` or ``fleet``."""
