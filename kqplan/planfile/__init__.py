"""The saved plan file (DESIGN §3.3): ``codec`` turns a ``Plan`` into its versioned JSON and back,
checked against the pydantic ``models`` on read; ``file`` reads one (bounded). Imports ``core`` and
``files``."""
