"""DescribeUserScramCredentials, AlterUserScramCredentials and SASL/SCRAM login on the sandbox,
over TCP (kqplan.sandbox.scram; the Kafka sources it follows are named there)."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.admin import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from kqplan.cluster.connection import config_from_properties
from kqplan.cluster.kafka import KafkaCluster
from kqplan.core.errors import KqplanError
from kqplan.sandbox import Listener, Operation, Sandbox, SandboxConfig, SaslUser
from kqplan.sandbox.scram import ScramStore
from tests.sandbox.server_test import Wire

A = AlterUserScramCredentialsRequest[0]
D = DescribeUserScramCredentialsRequest[0]
SHA256, SHA512 = 1, 2
FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"
USERS = {"admin": SaslUser("admin-secret", super_user=True),
         "reader": SaslUser("reader-secret", frozenset({Operation.DESCRIBE_CONFIGS})),
         "viewer": SaslUser("viewer-secret", frozenset({Operation.DESCRIBE}))}


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    """Listener 0: PLAINTEXT (ANONYMOUS, a super user); listener 1: SASL_PLAINTEXT."""
    config = SandboxConfig(port=0, extra_listeners=(Listener(0, sasl=True),), users=USERS,
                           scram_users={"seeded": "seeded-pw"})
    with Sandbox.start(config) as sb:
        yield sb


@pytest.fixture
def wire(sandbox: Sandbox) -> Iterator[Wire]:
    w = Wire(sandbox.address(0))
    yield w
    w.close()


def upsert(name: str, password: str, *, mechanism: int = SHA256, iterations: int = 8192,
           salt: bytes = b"salt-1") -> Any:
    """What Kafka's Admin client sends: the salted password, never the password."""
    digest = "sha512" if mechanism == SHA512 else "sha256"
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), salt, iterations) if password else b""
    return A.ScramCredentialUpsertion(name=name, mechanism=mechanism, iterations=iterations, salt=salt,
                                      salted_password=salted)


def delete(name: str, mechanism: int = SHA256) -> Any:
    return A.ScramCredentialDeletion(name=name, mechanism=mechanism)


def alter(wire: Wire, deletions: list[Any] = (),
          upsertions: list[Any] = ()) -> list[tuple[str, int, str | None]]:
    answer = wire.call(A(deletions=list(deletions), upsertions=list(upsertions)),
                       AlterUserScramCredentialsResponse)
    return [(r.user, r.error_code, r.error_message) for r in answer.results]


def describe(wire: Wire, users: list[str] | None) -> Any:
    request = D(users=None if users is None else [D.UserName(name=u) for u in users])
    return wire.call(request, DescribeUserScramCredentialsResponse)


def described(answer: Any) -> list[tuple[str, int, str | None, list[tuple[int, int]]]]:
    return [(r.user, r.error_code, r.error_message, [(c.mechanism, c.iterations) for c in r.credential_infos])
            for r in answer.results]


# -- ApiVersions -----------------------------------------------------------------------------------

def test_api_versions_advertises_50_and_51_at_version_0(wire):
    answer = wire.call(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"),
                       ApiVersionsResponse)
    versions = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert versions[50] == (0, 0)
    assert versions[51] == (0, 0)


# -- AlterUserScramCredentials ---------------------------------------------------------------------

def test_upsert_then_describe_one_and_all(wire):
    assert alter(wire, upsertions=[upsert("alice", "pw"), upsert("alice2", "pw", mechanism=SHA512,
                                                                  iterations=4096)]) == [
        ("alice", 0, None), ("alice2", 0, None)]
    assert described(describe(wire, ["alice"])) == [("alice", 0, None, [(SHA256, 8192)])]
    everyone = describe(wire, None)
    assert everyone.error_code == 0
    assert sorted(described(everyone)) == [("alice", 0, None, [(SHA256, 8192)]),
                                          ("alice2", 0, None, [(SHA512, 4096)]),
                                          ("seeded", 0, None, [(SHA256, 4096), (SHA512, 4096)])]
    assert described(describe(wire, [])) == described(everyone)  # empty means all, as null


def test_validation_messages_and_codes(wire):
    results = alter(wire, deletions=[delete("ghost"), delete("seeded", 0)], upsertions=[
        upsert("", "pw"), upsert("u-few", "pw", iterations=4095), upsert("u-many", "pw", iterations=16385),
        upsert("u-mech", "pw", mechanism=3), upsert("u-empty", "")])
    assert sorted(results) == sorted([
        ("ghost", 91, "Attempt to delete a user credential that does not exist"),
        ("seeded", 33, "Unknown SCRAM mechanism"),
        ("", 93, "Username must not be empty"),
        ("u-few", 93, "Too few iterations"),
        ("u-many", 93, "Too many iterations"),
        ("u-mech", 33, "Unknown SCRAM mechanism"),
        ("u-empty", -1, None),  # Java's SecretKeySpec refuses an empty key: an unexpected error
    ])
    assert sorted(r.user for r in describe(wire, None).results) == ["seeded"]  # nothing stored


def test_the_name_is_checked_before_the_mechanism_and_both_before_the_iterations(wire):
    assert alter(wire, upsertions=[upsert("", "pw", mechanism=9, iterations=1)]) == [
        ("", 93, "Username must not be empty")]
    assert alter(wire, upsertions=[upsert("x", "pw", mechanism=0, iterations=1)]) == [
        ("x", 33, "Unknown SCRAM mechanism")]


def test_a_user_altered_twice_fails_whole_and_others_still_apply(wire):
    results = alter(wire, deletions=[delete("seeded"), delete("seeded", SHA512)],
                    upsertions=[upsert("bob", "pw"), upsert("bob", "pw", mechanism=SHA512),
                                upsert("carol", "pw")])
    twice = "A user credential cannot be altered twice in the same request"
    # successes first (deletions, then upsertions), then the errors
    assert results == [("carol", 0, None), ("bob", 92, twice), ("seeded", 92, twice)]
    assert sorted(r.user for r in describe(wire, None).results) == ["carol", "seeded"]


def test_a_deletion_and_an_upsertion_of_one_user_are_twice(wire):
    assert alter(wire, deletions=[delete("seeded")], upsertions=[upsert("seeded", "new")]) == [
        ("seeded", 92, "A user credential cannot be altered twice in the same request")]


def test_delete_one_mechanism_then_the_other(wire):
    assert alter(wire, deletions=[delete("seeded", SHA512)]) == [("seeded", 0, None)]
    assert described(describe(wire, ["seeded"])) == [("seeded", 0, None, [(SHA256, 4096)])]
    assert alter(wire, deletions=[delete("seeded")]) == [("seeded", 0, None)]
    assert described(describe(wire, ["seeded"])) == [
        ("seeded", 91, "Attempt to describe a user credential that does not exist: seeded", [])]


def test_results_come_in_java_hashmap_order():
    # a 16-bucket HashMap: String.hashCode of a one-letter name is its code point
    store = ScramStore()
    names = ["a", "b", "p"]  # buckets 97 & 15 = 1, 98 & 15 = 2, 112 & 15 = 0
    answer = store.alter([], [_upsertion(n) for n in names])
    assert [r.user for r in answer] == ["p", "a", "b"]
    assert [r.user for r in store.describe(None).results] == ["p", "a", "b"]


def _upsertion(name: str) -> Any:
    from kqplan.sandbox.scram import Upsertion
    return Upsertion(name, SHA256, 4096, b"s", b"salted")


# -- DescribeUserScramCredentials ------------------------------------------------------------------

def test_describe_missing_and_duplicate_users(wire):
    answer = describe(wire, ["nobody", "seeded", "nobody"])
    assert answer.error_code == 0
    assert sorted(described(answer)) == [
        ("nobody", 92, "Cannot describe SCRAM credentials for the same user twice in a single request: "
                       "nobody", []),
        ("seeded", 0, None, [(SHA256, 4096), (SHA512, 4096)])]


# -- authorization on the SASL listener ------------------------------------------------------------

def plain_login(sandbox: Sandbox, user: str, password: str) -> Wire:
    w = Wire(sandbox.address(1))
    assert w.call(SaslHandshakeRequest[1](mechanism="PLAIN"), SaslHandshakeResponse).error_code == 0
    token = b"\0" + user.encode() + b"\0" + password.encode()
    assert w.call(SaslAuthenticateRequest[2](auth_bytes=token), SaslAuthenticateResponse).error_code == 0
    return w


def test_describe_needs_describe_on_the_cluster(sandbox):
    reader = plain_login(sandbox, "reader", "reader-secret")  # DESCRIBE_CONFIGS is not DESCRIBE
    try:
        answer = describe(reader, ["seeded", "x"])
        assert (answer.error_code, answer.error_message) == (31, None)
        assert described(answer) == [("", 31, None, []), ("", 31, None, [])]
    finally:
        reader.close()
    viewer = plain_login(sandbox, "viewer", "viewer-secret")
    try:
        assert described(describe(viewer, ["seeded"]))[0][1] == 0
        assert [r[1] for r in alter(viewer, upsertions=[upsert("z", "pw"), upsert("y", "pw")])] == [31, 31]
        assert [r[0] for r in alter(viewer, upsertions=[upsert("z", "pw"), upsert("y", "pw")])] == ["y", "z"]
    finally:
        viewer.close()


# -- SASL/SCRAM login ------------------------------------------------------------------------------

def scram_properties(mechanism: str, user: str, password: str) -> str:
    return ("security.protocol=SASL_PLAINTEXT\n"
            f"sasl.mechanism={mechanism}\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{password}";\n')


def kqplan_login(sandbox: Sandbox, mechanism: str, user: str, password: str) -> None:
    """kqplan's own client (kafka-python's SCRAM) logs in and describes quotas."""
    config = config_from_properties(scram_properties(mechanism, user, password),
                                    bootstrap=sandbox.address(1), source="t", env={})
    with KafkaCluster(config, attempts=1) as cluster:
        cluster.describe()


@pytest.mark.parametrize(("mechanism", "kind"), [("SCRAM-SHA-256", SHA256), ("SCRAM-SHA-512", SHA512)])
def test_a_user_created_over_the_wire_logs_in_and_a_wrong_password_fails(sandbox, wire, mechanism, kind):
    assert alter(wire, upsertions=[upsert("dave", "dave-pw", mechanism=kind)]) == [("dave", 0, None)]
    # dave has no rights (no ACLs name him): authentication works, describe is then refused
    with pytest.raises(KqplanError, match=r"authorization|not authorized|denied"):
        kqplan_login(sandbox, mechanism, "dave", "dave-pw")
    with pytest.raises(KqplanError, match=f"invalid credentials with SASL mechanism {mechanism}"):
        kqplan_login(sandbox, mechanism, "dave", "wrong")


def test_a_scram_user_gets_the_rights_of_its_principal(sandbox, wire):
    assert alter(wire, upsertions=[upsert("reader", "scram-pw", mechanism=SHA512)]) == [("reader", 0, None)]
    kqplan_login(sandbox, "SCRAM-SHA-512", "reader", "scram-pw")  # DESCRIBE_CONFIGS: describe works
    with pytest.raises(KqplanError, match="invalid credentials"):
        kqplan_login(sandbox, "SCRAM-SHA-256", "reader", "scram-pw")  # no SHA-256 credential


def test_a_deleted_credential_no_longer_logs_in(sandbox, wire):
    assert alter(wire, deletions=[delete("seeded")]) == [("seeded", 0, None)]
    with pytest.raises(KqplanError, match="invalid credentials"):
        kqplan_login(sandbox, "SCRAM-SHA-256", "seeded", "seeded-pw")


class ScramClient:
    """The client side of RFC 5802 written out, to send what kafka-python never would."""

    def __init__(self, sandbox: Sandbox, mechanism: str = "SCRAM-SHA-256") -> None:
        self.wire = Wire(sandbox.address(1))
        self.mechanism = mechanism
        self.digest = "sha512" if mechanism.endswith("512") else "sha256"
        answer = self.wire.call(SaslHandshakeRequest[1](mechanism=mechanism), SaslHandshakeResponse)
        assert answer.error_code == 0
        assert answer.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]

    def send(self, token: bytes) -> Any:
        return self.wire.call(SaslAuthenticateRequest[2](auth_bytes=token), SaslAuthenticateResponse)

    def login(self, user: str, password: str, *, authzid: str = "", nonce: str = "cnonce") -> Any:
        bare = f"n={user},r={nonce}"
        first = self.send(f"n,{'a=' + authzid if authzid else ''},{bare}".encode())
        if first.error_code:
            return first
        server_first = bytes(first.auth_bytes).decode()
        fields = dict(item.split("=", 1) for item in server_first.split(","))
        assert fields["r"].startswith(nonce)
        assert len(fields["r"]) > len(nonce)
        salted = hashlib.pbkdf2_hmac(self.digest, password.encode(), base64.b64decode(fields["s"]),
                                     int(fields["i"]))
        without_proof = f"c=biws,r={fields['r']}"
        auth = f"{bare},{server_first},{without_proof}".encode()
        client_key = hmac.new(salted, b"Client Key", self.digest).digest()
        signature = hmac.new(hashlib.new(self.digest, client_key).digest(), auth, self.digest).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        final = self.send(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
        if final.error_code == 0:
            server_key = hmac.new(salted, b"Server Key", self.digest).digest()
            expected = hmac.new(server_key, auth, self.digest).digest()
            assert bytes(final.auth_bytes) == b"v=" + base64.b64encode(expected)  # the server knows the key
        return final


def test_the_exchange_by_hand_ends_with_the_server_signature(sandbox):
    client = ScramClient(sandbox)
    try:
        answer = client.login("seeded", "seeded-pw")
        assert (answer.error_code, answer.error_message) == (0, None)
        assert described(describe(client.wire, ["seeded"]))[0][1] == 31  # seeded: no ACLs
    finally:
        client.wire.close()


@pytest.mark.parametrize(("user", "password"), [("seeded", "nope"), ("nobody", "x"), ("bad=name", "x")])
def test_failures_get_error_58_with_kafkas_generic_message_then_a_closed_connection(sandbox, user, password):
    client = ScramClient(sandbox, "SCRAM-SHA-512")
    try:
        answer = client.login(user, password)
        assert (answer.error_code, answer.error_message) == (58, FAILED.format("SCRAM-SHA-512"))
        assert client.wire.closed()
    finally:
        client.wire.close()


def test_another_authorization_id_is_refused_with_its_own_message(sandbox):
    client = ScramClient(sandbox)
    try:
        answer = client.login("seeded", "seeded-pw", authzid="admin")
        assert (answer.error_code, answer.error_message) == (
            58, "Authentication failed: Client requested an authorization id that is different from username")
    finally:
        client.wire.close()


def test_a_malformed_first_message_fails_like_a_wrong_password(sandbox):
    client = ScramClient(sandbox)
    try:
        answer = client.send(b"not scram")
        assert (answer.error_code, answer.error_message) == (58, FAILED.format("SCRAM-SHA-256"))
    finally:
        client.wire.close()


def test_credentials_stay_out_of_the_state_file(tmp_path):
    state = tmp_path / "state.json"
    with Sandbox.start(SandboxConfig(port=0, state_file=state)) as sb:
        w = Wire(sb.address(0))
        try:
            assert alter(w, upsertions=[upsert("alice", "pw")]) == [("alice", 0, None)]
        finally:
            w.close()
    assert not state.exists() or "alice" not in state.read_text()
