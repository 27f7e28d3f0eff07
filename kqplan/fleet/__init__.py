"""The fleet: every cluster of the inventory at once (snapshot, plan, impact, rightsize), with a
local engine (plain Python, the core's own diff and resolution) and a Spark engine (DataFrame
joins) that must agree, reading usage of one schema (``usage_schema``: the sample's columns,
written once, checked in as ``schemas/usage-v1.json``). Imports ``core``, ``config``,
``manifest``, ``snapshot``, ``pipeline``, ``files`` and ``console``; never ``commands`` or ``cli``."""
