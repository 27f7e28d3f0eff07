"""kqplan: Kafka client quotas as code (validate, plan, apply, resolve)."""

__version__ = "0.3.0"
