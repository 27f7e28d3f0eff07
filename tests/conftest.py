"""Shared fixtures. Each plugin module owns one family of fixtures."""

pytest_plugins = ["tests.kafka.plugin", "tests.live"]
