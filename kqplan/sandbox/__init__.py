"""The sandbox: a Kafka-wire-compatible client-quota broker for tests and local runs."""
