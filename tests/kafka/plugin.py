"""Placeholder: the real-broker harness plugin (fixtures real_kafka, …) lands here."""
