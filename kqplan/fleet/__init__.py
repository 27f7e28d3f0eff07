"""The fleet: every cluster of the inventory at once (snapshot, plan, impact, rightsize), with a
local engine (plain Python, the core's own diff and resolution) and a Spark engine (DataFrame
joins) that must agree. Imports ``core``, ``config``, ``manifest``, ``snapshot``, ``pipeline``,
``files`` and ``console``; never ``commands`` or ``cli``."""
