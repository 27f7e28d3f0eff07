"""SASL/OAUTHBEARER tokens for kafka-python's connection layer: :class:`TokenProvider` (OIDC
client credentials, a token file, or an unsigned token)."""

from __future__ import annotations

import base64
import json
import time
import urllib.parse
from typing import Any

from kafka.net.sasl.oauth import AbstractTokenProvider

from kqplan import deadline
from kqplan.cluster.clientfiles import MAX_PROPERTIES_BYTES, read_client_file
from kqplan.cluster.failures import AuthenticationFailed, ConnectionFailed
from kqplan.cluster.security import OAuthSettings
from kqplan.core.errors import KqplanError

# -- OAUTHBEARER ---------------------------------------------------------------------------------


class TokenProvider(AbstractTokenProvider):  # type: ignore[misc]  # kafka-python is untyped
    """Tokens for SASL/OAUTHBEARER: OIDC client credentials, a token file, or unsigned."""

    def __init__(self, settings: OAuthSettings, timeout_s: float) -> None:
        super().__init__()
        self.settings = settings
        self.timeout_s = timeout_s
        self._token: str | None = None
        self._expires = 0.0

    def token(self) -> str:
        s = self.settings
        now = time.time()
        if self._token is not None and now < self._expires - 30:
            return self._token
        if s.token_endpoint is None:  # unsigned, for brokers with the unsecured validator
            def b64(data: dict[str, Any]) -> str:
                raw = json.dumps(data, separators=(",", ":")).encode()
                return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

            claims = {"sub": s.unsecured_principal, "iat": int(now), "exp": int(now) + 3600}
            self._token, self._expires = f"{b64({'alg': 'none'})}.{b64(claims)}.", now + 3600
        elif s.token_endpoint.startswith("file://"):
            path = urllib.parse.urlparse(s.token_endpoint).path
            data = read_client_file(path, what="the OAuth token file", limit=MAX_PROPERTIES_BYTES,
                                    too_big="a token file holds one token of a few KB: check the path")
            try:
                self._token, self._expires = data.decode("utf-8").strip(), now + 60
            except UnicodeDecodeError:
                raise KqplanError(f"the OAuth token file {path} is not UTF-8 text",
                                  hint="the file must hold the token (a JWT) as text") from None
        else:
            self._token, self._expires = self._fetch(now)
        return self._token

    def _fetch(self, now: float) -> tuple[str, float]:
        """The client-credentials request, within ``timeout_s`` and what is left of the command's
        ``--timeout`` in all (:func:`kqplan.http.exchange`: every byte of the answer included)."""
        import urllib.error  # with urllib.request, 0.01 s of every connection's start-up otherwise
        import urllib.request
        from http.client import HTTPException

        from kqplan.http import TimedOut, TooLarge, exchange

        s = self.settings
        assert s.token_endpoint is not None
        assert s.client_secret is not None
        form = {"grant_type": "client_credentials"} | ({"scope": s.scope} if s.scope else {})
        basic = base64.b64encode(f"{s.client_id}:{s.client_secret.reveal()}".encode()).decode()
        request = urllib.request.Request(
            s.token_endpoint, data=urllib.parse.urlencode(form).encode(), method="POST",
            headers={"Authorization": f"Basic {basic}", "Accept": "application/json",
                     "Content-Type": "application/x-www-form-urlencoded"})
        seconds, within = self._bound()
        try:
            reply = exchange(request, seconds=seconds, limit=MAX_PROPERTIES_BYTES)
        except TimedOut:
            raise ConnectionFailed(f"the OAuth token endpoint {s.token_endpoint} did not answer {within}"
                                   ) from None
        except TooLarge:
            raise ConnectionFailed(f"the OAuth token endpoint {s.token_endpoint} answered more than "
                                   f"{MAX_PROPERTIES_BYTES // 2**20} MiB") from None
        except (urllib.error.URLError, OSError, HTTPException, ValueError) as exc:
            reason = getattr(exc, "reason", exc.__class__.__name__)
            raise ConnectionFailed(f"cannot get an OAuth token from {s.token_endpoint}: {reason}"
                                   ) from None
        if not 200 <= reply.status < 300:
            hint = ("give the URL it redirects to (kqplan follows no redirect: the client secret "
                    "would go along)" if 300 <= reply.status < 400 else "check the client id and secret")
            raise AuthenticationFailed(f"the OAuth token endpoint {s.token_endpoint} answered "
                                       f"HTTP {reply.status}", hint=hint)
        try:
            body = json.loads(reply.body)
        except ValueError:
            raise ConnectionFailed(f"cannot get an OAuth token from {s.token_endpoint}: its answer is "
                                   "not JSON") from None
        token = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str):
            raise AuthenticationFailed(f"the OAuth token endpoint {s.token_endpoint} returned no "
                                       "access_token")
        return token, now + float(body.get("expires_in", 300))

    def _bound(self) -> tuple[float, str]:
        """Seconds the token request may take in all, and how a message says it ran out."""
        left = deadline.remaining()
        if left is not None and left < self.timeout_s:
            current = deadline.current()
            if left <= 0 or current is None:
                raise ConnectionFailed("the command's time ran out before an OAuth token was asked for",
                                       hint=f"raise {current.text if current else '--timeout'}")
            return left, f"before the command's {current.text} ran out"
        return self.timeout_s, f"within {deadline.seconds_text(self.timeout_s)}"
