"""The snapshot file (DESIGN §3.4): ``codec`` turns a quota state into its JSON and back, checked
against the pydantic ``models``; ``file`` reads and writes it. Imports ``core`` and ``files``."""
