"""``kqplan.toml``: the project's model (inventory, policy, custom types, limits) in ``model``;
which file a command reads (``find``); its ``reader`` (a hand check for the usual file, the
pydantic ``schema`` for every other, ``locate`` for positions). Every problem is a located KQP190
diagnostic. Imports ``core``, and ``files`` (its bounded reader) to read the file."""
