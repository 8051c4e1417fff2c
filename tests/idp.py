"""A small identity provider for tests: real RSA and EC keys, their JSON Web Key Set served over loopback HTTP (or
written to a file), and tokens signed with them by PyJWT, good and bad."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

ISSUER = "https://idp.example.test"
AUDIENCE = "https://gateway.example.test/"


class Key:
    """One signing key of the provider's (or of someone else's)."""

    def __init__(self, kid: str, algorithm: str) -> None:
        self.kid = kid
        self.algorithm = algorithm
        if algorithm == "RS256":
            self.private: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        else:
            self.private = ec.generate_private_key(ec.SECP256R1())

    def jwk(self) -> dict[str, Any]:
        """The public key as a JWK, with its key id."""
        algorithm = jwt.algorithms.RSAAlgorithm if self.algorithm == "RS256" else jwt.algorithms.ECAlgorithm
        data: dict[str, Any] = json.loads(algorithm.to_jwk(self.private.public_key()))
        return {**data, "kid": self.kid, "use": "sig", "alg": self.algorithm}

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def token(self, subject: str = "alice", **claims: Any) -> str:
        """A token signed with this key; ``claims`` override the defaults (``None`` leaves one out)."""
        now = int(time.time())
        payload: dict[str, Any] = {"iss": ISSUER, "aud": AUDIENCE, "sub": subject, "iat": now, "exp": now + 300}
        payload.update(claims)
        payload = {k: v for k, v in payload.items() if v is not None}
        return jwt.encode(payload, self.private, algorithm=self.algorithm, headers={"kid": self.kid})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned_token(subject: str = "mallory") -> str:
    """An ``alg: none`` token (no signature at all)."""
    now = int(time.time())
    header = _b64(json.dumps({"alg": "none", "typ": "JWT"}).encode())
    payload = _b64(json.dumps({"iss": ISSUER, "aud": AUDIENCE, "sub": subject, "exp": now + 300}).encode())
    return f"{header}.{payload}."


def hmac_with_public_key(key: Key, subject: str = "mallory") -> str:
    """The classic confusion: HS256 'signed' with the provider's public key (which anyone has) as the secret."""
    now = int(time.time())
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": key.kid}).encode())
    payload = _b64(json.dumps({"iss": ISSUER, "aud": AUDIENCE, "sub": subject, "exp": now + 300}).encode())
    signature = hmac.new(key.public_pem(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64(signature)}"


class JwksServer:
    """The provider's key set over loopback HTTP (``url``); ``keys`` may be changed while it serves (rotation).

    ``max_age``: the ``Cache-Control: max-age`` it answers with (None: no such header). ``hang()``: from then on,
    every fetch gets no answer until ``release()`` (or the server's end): a provider that hangs."""

    def __init__(self, *keys: Key, max_age: int | None = None) -> None:
        self.keys = list(keys)
        self.fetches = 0
        self.max_age = max_age
        self._answering = threading.Event()
        self._answering.set()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.fetches += 1
                outer._answering.wait()
                body = json.dumps({"keys": [key.jwk() for key in outer.keys]}).encode()
                self.send_response(200)
                if outer.max_age is not None:
                    self.send_header("cache-control", f"public, max-age={outer.max_age}")
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/jwks.json"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def hang(self) -> None:
        """Answer no fetch from now on, until ``release``."""
        self._answering.clear()

    def release(self) -> None:
        """Answer the fetches that hang, and every one after."""
        self._answering.set()

    def __enter__(self) -> JwksServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def jwks_file(path: Path, *keys: Key) -> Path:
    """The key set written to ``path``."""
    path.write_text(json.dumps({"keys": [key.jwk() for key in keys]}), encoding="utf-8")
    return path


def token_flags(jwks: str, *, file: bool = False, extra: tuple[str, ...] = ()) -> list[str]:
    """`checkpoint serve`'s flags for this provider."""
    source = ["--jwks-file", jwks] if file else ["--jwks-url", jwks]
    return ["--issuer", ISSUER, "--audience", AUDIENCE, *source, *extra]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
