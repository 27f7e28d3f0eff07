"""SCRAM users in the sandbox: DescribeUserScramCredentials (50), AlterUserScramCredentials (51)
and SASL/SCRAM-SHA-256/512 login, as a KRaft Kafka 4.3 broker serves them.

Sources (apache/kafka; the mirror read was trunk of October 2024, the 4.0 line):

- ``metadata/.../controller/ScramControlManager.java``: alter validation, its order and texts,
  the result order (deletions, then upsertions, then errors, each in ``HashMap`` order).
- ``metadata/.../image/ScramImage.java`` (``describe``), reached from
  ``KafkaApis.handleDescribeUserScramCredentialsRequest``: served by the broker from its image.
- ``clients/.../requests/{Describe,Alter}UserScramCredentialsRequest.java`` (``getErrorResponse``)
  and ``core/.../server/{KafkaApis,ControllerApis}.scala``: DESCRIBE (describe) and ALTER (alter)
  on the cluster, checked before anything else.
- ``clients/.../security/scram/internals/{ScramSaslServer,ScramFormatter,ScramMessages}.java``
  and ``SaslServerAuthenticator.handleSaslToken``: the login exchange and what a client sees
  when it fails.

Credentials live in memory only: quota snapshots (``--state``) stay quota-only, so a restarted
sandbox has no SCRAM users but the ones its config seeds (see ``ScramStore.seed``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from kafka.protocol.admin import AlterUserScramCredentialsResponse, DescribeUserScramCredentialsResponse

from kqplan.sandbox.engine import _java_hash, _table_size

# Error codes (clients/.../protocol/Errors.java).
NONE = 0
UNKNOWN_SERVER_ERROR = -1
CLUSTER_AUTHORIZATION_FAILED = 31
UNSUPPORTED_SASL_MECHANISM = 33
DUPLICATE_RESOURCE = 92
RESOURCE_NOT_FOUND = 91
UNACCEPTABLE_CREDENTIAL = 93

# clients/.../admin/ScramMechanism.java: the wire's int8 type; anything else is UNKNOWN (0).
MECHANISMS: dict[int, str] = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_TYPES: dict[str, int] = {name: t for t, name in MECHANISMS.items()}
_HASHES: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096  # internals/ScramMechanism.java, both mechanisms
MAX_ITERATIONS = 16384  # ScramControlManager.MAX_ITERATIONS

MSG_TWICE = "A user credential cannot be altered twice in the same request"
MSG_EMPTY_NAME = "Username must not be empty"
MSG_UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"
MSG_FEW = "Too few iterations"
MSG_MANY = "Too many iterations"
MSG_NO_SUCH = "Attempt to delete a user credential that does not exist"
MSG_DESCRIBE_TWICE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
MSG_DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist: "
# ControllerApis: authorizeClusterOperation throws ClusterAuthorizationException("Request
# $request is not authorized."), and getErrorResponse passes that text on (it is not the generic
# one); $request is the controller's RequestChannel.Request, which a client cannot predict.
MSG_ALTER_DENIED: str | None = "Request is not authorized."


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the broker keeps (UserScramCredentialRecord): never the password or salted password."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted(cls, mechanism: str, salt: bytes, salted_password: bytes,
                    iterations: int) -> ScramCredential:
        """``ScramControlManager.finishUpsertion``: storedKey and serverKey from the salted password."""
        digest = _HASHES[mechanism]
        client_key = hmac.new(salted_password, b"Client Key", digest).digest()
        return cls(salt, hashlib.new(digest, client_key).digest(),
                   hmac.new(salted_password, b"Server Key", digest).digest(), iterations)

    @classmethod
    def from_password(cls, mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                      salt: bytes | None = None) -> ScramCredential:
        """``ScramFormatter.generateCredential``: a random salt (base-36 text, as Kafka makes one)."""
        salt = salt if salt is not None else _random_string().encode()
        salted = hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode(), salt, iterations)
        return cls.from_salted(mechanism, salt, salted, iterations)


class Deletion(NamedTuple):
    name: str
    mechanism: int


class Upsertion(NamedTuple):
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


class UserResult(NamedTuple):
    """One ``AlterUserScramCredentialsResult`` (or a describe result without credentials)."""

    user: str
    error_code: int
    error_message: str | None


class DescribeResult(NamedTuple):
    user: str
    error_code: int
    error_message: str | None
    credentials: tuple[tuple[int, int], ...]  # (mechanism type, iterations)


class DescribeAnswer(NamedTuple):
    error_code: int
    error_message: str | None
    results: tuple[DescribeResult, ...]


# -- Java HashMap<String, …> iteration order ----------------------------------------------------

class _JavaKeys:
    """The keys of a ``new HashMap<>()`` in iteration order: by bucket, then insertion.

    Buckets never shrink, so the table size follows the largest size the map ever had; a
    removed and re-added key goes to the end of its bucket, which a Python dict's order gives.
    (Tree bins need 8 keys in one bucket: their order is not reproduced.)
    """

    def __init__(self) -> None:
        self._keys: dict[str, None] = {}
        self._peak = 0

    def put(self, key: str) -> None:
        self._keys.setdefault(key, None)
        self._peak = max(self._peak, len(self._keys))

    def remove(self, key: str) -> bool:
        """``remove(key) != null``: whether the key was there."""
        if key not in self._keys:
            return False
        del self._keys[key]
        return True

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __iter__(self) -> Iterator[str]:
        mask = _table_size(None, self._peak) - 1
        return iter(sorted(self._keys, key=lambda k: _java_hash(k) & mask))


# -- the store ------------------------------------------------------------------------------------

class ScramStore:
    """The cluster's SCRAM credentials: user -> mechanism type -> credential."""

    def __init__(self) -> None:
        self._users: dict[str, dict[int, ScramCredential]] = {}

    def seed(self, user: str, password: str, mechanisms: Iterable[str] = tuple(MECHANISM_TYPES),
             iterations: int = MIN_ITERATIONS) -> None:
        """A user that exists from the start (as ``kafka-storage format --add-scram`` makes one)."""
        for mechanism in mechanisms:
            self._users.setdefault(user, {})[MECHANISM_TYPES[mechanism]] = ScramCredential.from_password(
                mechanism, password, iterations)

    def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(MECHANISM_TYPES.get(mechanism, 0))

    def __len__(self) -> int:
        return len(self._users)

    def describe(self, users: Sequence[str] | None) -> DescribeAnswer:
        """``ScramImage.describe``: null or empty means every user; results in HashMap order."""
        unique = _JavaKeys()
        repeated: set[str] = set()
        if not users:
            # the image walks each mechanism's user map; SHA-256's first here (Kafka's mechanism
            # map is keyed by an enum, whose identity hash varies from one JVM run to the next)
            for mechanism in MECHANISMS:
                for user, held in self._users.items():
                    if mechanism in held:
                        unique.put(user)
        else:
            for user in users:
                if user in unique:
                    repeated.add(user)
                unique.put(user)
        results = []
        for user in unique:
            if user in repeated:
                results.append(DescribeResult(user, DUPLICATE_RESOURCE, MSG_DESCRIBE_TWICE + user, ()))
                continue
            held = self._users.get(user, {})
            infos = tuple((t, held[t].iterations) for t in MECHANISMS if t in held)
            if infos:
                results.append(DescribeResult(user, NONE, None, infos))
            else:
                results.append(DescribeResult(user, RESOURCE_NOT_FOUND, MSG_DESCRIBE_MISSING + user, ()))
        return DescribeAnswer(NONE, None, tuple(results))

    @staticmethod
    def describe_denied(users: Sequence[str] | None) -> DescribeAnswer:
        """No DESCRIBE on the cluster: ``getErrorResponse`` with the generic exception, so a null
        message (``ApiError.fromThrowable``) and one nameless result per requested user."""
        return DescribeAnswer(CLUSTER_AUTHORIZATION_FAILED, None, tuple(
            DescribeResult("", CLUSTER_AUTHORIZATION_FAILED, None, ()) for _ in users or ()))

    @staticmethod
    def alter_denied(deletions: Sequence[Deletion], upsertions: Sequence[Upsertion],
                     message: str | None) -> list[UserResult]:
        """No ALTER on the cluster: ``getErrorResponse`` gives each named user, sorted, the error."""
        names = sorted({d.name for d in deletions} | {u.name for u in upsertions}, key=_utf16)
        return [UserResult(name, CLUSTER_AUTHORIZATION_FAILED, message) for name in names]

    def alter(self, deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]) -> list[UserResult]:
        """``ScramControlManager.alterCredentials``, then the records replayed (all or nothing:
        the records of the users that passed are committed together)."""
        to_delete: dict[str, Deletion] = {}
        to_delete_keys = _JavaKeys()
        to_upsert: dict[str, Upsertion] = {}
        to_upsert_keys = _JavaKeys()
        errors: dict[str, tuple[int, str | None]] = {}
        error_keys = _JavaKeys()

        def fail(name: str, code: int, message: str | None) -> None:
            errors[name] = (code, message)
            error_keys.put(name)

        for deletion in deletions:
            if deletion.name in errors:
                continue
            if to_delete_keys.remove(deletion.name):
                del to_delete[deletion.name]
                fail(deletion.name, DUPLICATE_RESOURCE, MSG_TWICE)
            elif (error := self._deletion_error(deletion)) is not None:
                fail(deletion.name, *error)
            else:
                to_delete[deletion.name] = deletion
                to_delete_keys.put(deletion.name)
        for upsertion in upsertions:
            if upsertion.name in errors:
                continue
            # Java's `remove(...) != null || remove(...) != null`: the second runs only if the
            # first found nothing
            if to_delete_keys.remove(upsertion.name) or to_upsert_keys.remove(upsertion.name):
                to_delete.pop(upsertion.name, None)
                to_upsert.pop(upsertion.name, None)
                fail(upsertion.name, DUPLICATE_RESOURCE, MSG_TWICE)
            elif (error := _upsertion_error(upsertion)) is not None:
                fail(upsertion.name, *error)
            else:
                to_upsert[upsertion.name] = upsertion
                to_upsert_keys.put(upsertion.name)
        results = [UserResult(name, NONE, None) for name in to_delete_keys]
        made: list[tuple[Upsertion, ScramCredential]] = []
        for name in to_upsert_keys:
            upsertion = to_upsert[name]
            if not upsertion.salted_password:
                # javax.crypto's SecretKeySpec refuses an empty key: IllegalArgumentException,
                # which ApiError.fromThrowable turns into UNKNOWN_SERVER_ERROR without a message
                fail(name, UNKNOWN_SERVER_ERROR, None)
                continue
            made.append((upsertion, ScramCredential.from_salted(
                MECHANISMS[upsertion.mechanism], upsertion.salt, upsertion.salted_password,
                upsertion.iterations)))
            results.append(UserResult(name, NONE, None))
        results += [UserResult(name, *errors[name]) for name in error_keys]
        for name in to_delete_keys:
            held = self._users[name]
            del held[to_delete[name].mechanism]
            if not held:
                del self._users[name]
        for upsertion, credential in made:
            self._users.setdefault(upsertion.name, {})[upsertion.mechanism] = credential
        return results

    def _deletion_error(self, deletion: Deletion) -> tuple[int, str] | None:
        """``validateDeletion``."""
        error = _name_and_mechanism_error(deletion.name, deletion.mechanism)
        if error is None and deletion.mechanism not in self._users.get(deletion.name, {}):
            return RESOURCE_NOT_FOUND, MSG_NO_SUCH
        return error


def _name_and_mechanism_error(name: str, mechanism: int) -> tuple[int, str] | None:
    """``validateScramUsernameAndMechanism``: the name first, then the mechanism."""
    if not name:
        return UNACCEPTABLE_CREDENTIAL, MSG_EMPTY_NAME
    if mechanism not in MECHANISMS:
        return UNSUPPORTED_SASL_MECHANISM, MSG_UNKNOWN_MECHANISM
    return None


def _upsertion_error(upsertion: Upsertion) -> tuple[int, str] | None:
    """``validateUpsertion``: name, mechanism, then the iteration bounds (salt and salted
    password are not looked at)."""
    error = _name_and_mechanism_error(upsertion.name, upsertion.mechanism)
    if error is not None:
        return error
    if upsertion.iterations < MIN_ITERATIONS:
        return UNACCEPTABLE_CREDENTIAL, MSG_FEW
    if upsertion.iterations > MAX_ITERATIONS:
        return UNACCEPTABLE_CREDENTIAL, MSG_MANY
    return None


def _utf16(text: str) -> bytes:
    """Java's String order: UTF-16 code units."""
    return text.encode("utf-16-be", "surrogatepass")


# -- the wire (kafka-python's classes, generated from Kafka's JSON schemas) -----------------------

def describe_request(request: Any) -> list[str] | None:
    return None if request.users is None else [u.name for u in request.users]


def alter_request(request: Any) -> tuple[list[Deletion], list[Upsertion]]:
    return ([Deletion(d.name, d.mechanism) for d in request.deletions],
            [Upsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
             for u in request.upsertions])


def describe_response(answer: DescribeAnswer) -> bytes:
    R = DescribeUserScramCredentialsResponse[0]
    results = [R.DescribeUserScramCredentialsResult(
        user=r.user, error_code=r.error_code, error_message=r.error_message,
        credential_infos=[R.DescribeUserScramCredentialsResult.CredentialInfo(mechanism=m, iterations=i)
                          for m, i in r.credentials]) for r in answer.results]
    return bytes(R(throttle_time_ms=0, error_code=answer.error_code, error_message=answer.error_message,
                   results=results).encode())


def alter_response(results: Sequence[UserResult]) -> bytes:
    R = AlterUserScramCredentialsResponse[0]
    return bytes(R(throttle_time_ms=0, results=[
        R.AlterUserScramCredentialsResult(user=r.user, error_code=r.error_code, error_message=r.error_message)
        for r in results]).encode())


# -- SASL/SCRAM login (RFC 5802, RFC 7677) ----------------------------------------------------------

# ScramMessages.AbstractScramMessage's patterns; Java's `[\x01-\x7F&&[^=,]]` spelled out
_VALUE_SAFE = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_SASLNAME = rf"(?:{_VALUE_SAFE}|=2C|=3D)+"
_B64 = "[a-zA-Z0-9/+]"
_BASE64 = rf"(?:{_B64}{{4}})*(?:{_B64}{{3}}=|{_B64}{{2}}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
                           rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS})")
_CLIENT_FINAL = re.compile(rf"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS},"
                           rf"p=(?P<proof>{_BASE64})")


class ScramFailure(Exception):
    """The login failed: SaslAuthenticate answers SASL_AUTHENTICATION_FAILED with ``message``,
    then the broker closes the connection."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ScramAbort(Exception):
    """Java throws something other than a SaslException (a proof of the wrong length makes
    ``ScramFormatter.xor`` throw IllegalArgumentException): the broker hangs up without answering."""


def failure_message(mechanism: str) -> str:
    """``SaslServerAuthenticator.handleSaslToken``: a SaslException's own text never reaches the
    client ("it may contain sensitive data like the existence of the user")."""
    return ("Authentication failed during authentication due to invalid credentials with SASL "
            f"mechanism {mechanism}")


MSG_AUTHZID = "Authentication failed: Client requested an authorization id that is different from username"


class ScramServer:
    """One connection's ``ScramSaslServer``: client-first -> server-first, client-final ->
    server-final. Failures are :class:`ScramFailure`; Kafka never sends an ``e=`` server-final."""

    def __init__(self, mechanism: str, lookup: Callable[[str, str], ScramCredential | None]) -> None:
        self.mechanism = mechanism
        self._digest = _HASHES[mechanism]
        self._lookup = lookup
        self._first_bare = ""
        self._server_first = ""
        self._credential: ScramCredential | None = None
        self.username: str | None = None
        self.complete = False

    def evaluate(self, token: bytes) -> bytes:
        if self._credential is None:
            return self._first(token)
        return self._final(token, self._credential)

    def _fail(self) -> ScramFailure:
        return ScramFailure(failure_message(self.mechanism))

    def _first(self, token: bytes) -> bytes:
        found = _CLIENT_FIRST.fullmatch(token.decode("utf-8", "replace"))
        if found is None:
            raise self._fail()
        username = _username(found["saslname"])
        extensions = found["extensions"]
        if username is None or _token_auth(extensions):
            raise self._fail()  # Invalid username / no delegation tokens here: no credential
        credential = self._lookup(username, self.mechanism)
        if credential is None:
            raise self._fail()
        authzid = found["authzid"] or ""
        if authzid and authzid != username:
            raise ScramFailure(MSG_AUTHZID)  # a SaslAuthenticationException: its text is sent
        if credential.iterations < MIN_ITERATIONS:
            raise self._fail()
        # ClientFirstMessage.clientFirstMessageBare rebuilds it from the parts it kept
        self._first_bare = f"n={found['saslname']},r={found['nonce']}{extensions}"
        nonce = found["nonce"] + _random_string()
        self._server_first = (f"r={nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._credential, self.username = credential, username
        return self._server_first.encode()

    def _final(self, token: bytes, credential: ScramCredential) -> bytes:
        if self.complete:
            raise ScramAbort  # never reached: the broker stops passing tokens once complete
        found = _CLIENT_FINAL.fullmatch(token.decode("utf-8", "replace"))
        server_nonce = self._server_first.split(",", 1)[0][2:]
        if found is None or not found["nonce"].endswith(server_nonce):
            raise self._fail()
        channel = base64.b64encode(base64.b64decode(found["channel"])).decode()
        auth_message = f"{self._first_bare},{self._server_first},c={channel},r={found['nonce']}".encode()
        proof = base64.b64decode(found["proof"])
        signature = hmac.new(credential.stored_key, auth_message, self._digest).digest()
        if len(proof) != len(signature):
            raise ScramAbort
        client_key = bytes(a ^ b for a, b in zip(signature, proof, strict=True))
        if not hmac.compare_digest(hashlib.new(self._digest, client_key).digest(), credential.stored_key):
            raise self._fail()  # "Invalid client credentials": a wrong password
        self.complete = True
        server_signature = hmac.new(credential.server_key, auth_message, self._digest).digest()
        return b"v=" + base64.b64encode(server_signature)


def _username(sasl_name: str) -> str | None:
    """``ScramFormatter.username``: ``=2C`` is a comma, ``=3D`` an equals sign, any other ``=``
    makes the name invalid (None)."""
    name = sasl_name.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        return None
    return name.replace("=3D", "=")


def _token_auth(extensions: str) -> bool:
    """``ScramExtensions.tokenAuthenticated``: ``tokenauth`` parsed by Boolean.parseBoolean."""
    pairs = dict(item.partition("=")[::2] for item in extensions.split(",") if item)
    return pairs.get("tokenauth", "").lower() == "true"


def _random_string() -> str:
    """``ScramFormatter.secureRandomString``: a 130-bit random number in base 36."""
    n = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if not n:
            return out
