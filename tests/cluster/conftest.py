"""Fixtures for the cluster backends: test certificates."""

from __future__ import annotations

import pytest

from tests.cluster.tls import Pki, make_pki


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))
