"""The fleet pipeline: every cluster of the inventory at once (snapshot, plan), with a local
engine (plain Python, the core's own diff) and a Spark engine (DataFrame joins) that must agree."""
