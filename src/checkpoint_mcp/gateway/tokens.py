"""Access tokens from an identity provider: their settings, the provider's key set, and the check of one token.

`checkpoint serve --issuer ISS --audience AUD (--jwks-url URL | --jwks-file FILE)` accepts JSON Web Tokens the
provider signed, as the MCP authorization specification asks of a resource server: the signature by a key of the
provider's JSON Web Key Set (RS256 or ES256 only: ``none`` and every HMAC algorithm are refused, so a public key
can never be used as an HMAC secret), the issuer, the audience, and the expiry and not-before times with a small
leeway. PyJWT checks the token; this module only chooses the key and reads who the token names.

The key set is fetched (or read) once at start and kept for as long as the provider's ``Cache-Control: max-age``
says, at most ``KEYS_TTL`` seconds (at least ``REFRESH_AT_MOST_EVERY``). Once it is older, the next request that
needs it starts a fetch in the background and is checked with the keys already held: a provider that is slow or
hangs never delays a request whose key is known. A token naming a key id the set lacks (the provider rotated its
keys) waits for a fetch, the one under way or a new one at most every ``REFRESH_AT_MOST_EVERY`` seconds, so that
tokens with made-up key ids cannot make the gateway hammer the provider; only such a token (or any token, before
the first fetch worked) ever waits for the provider, for at most ``FETCH_TIMEOUT`` seconds.

A token that passed is remembered (``VerifiedTokens``) until its expiry: an agent sends the same token with each
request, and checking it again costs ~100 µs of the event loop's CPU for nothing new (docs/benchmarks.md, *The
gateway with tokens*). The memory is keyed by the whole token, so only that exact string is taken on trust, and it
holds the key that verified it: once a fetch of the key set no longer holds that key, the token is checked again
(and refused). Refused tokens are never remembered.

A token is never logged, stored or sent on: errors say why a token was refused, never what it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import jwt
from jwt import PyJWK

from checkpoint_mcp.errors import InvalidToken, KeySetUnavailable, UsageError

logger = logging.getLogger(__name__)

ALGORITHMS = ("RS256", "ES256")
"""The signature algorithms accepted; ``none`` and HMAC (``HS*``) never are."""
DEFAULT_LEEWAY = 30.0  # seconds of clock difference allowed on exp and nbf
KEYS_TTL = 600.0  # seconds a fetched key set is used at most before it is fetched again (less if the provider says)
REFRESH_AT_MOST_EVERY = 2.0  # seconds between two fetches: the shortest lifetime, and the pace of unknown key ids
FETCH_TIMEOUT = 10.0
MAX_PRINCIPAL = 256  # characters: a subject longer than this is not a usable principal
MAX_REMEMBERED = 4096  # verified tokens remembered at once (the one used longest ago is forgotten first)
METADATA_PATH = "/.well-known/oauth-protected-resource"


@dataclass(frozen=True)
class TokenSettings:
    """What `checkpoint serve` was told about the identity provider (validated by ``token_settings``)."""

    issuer: str
    audiences: tuple[str, ...]
    jwks_url: str | None = None
    jwks_file: str | None = None
    authorization_servers: tuple[str, ...] = ()
    principal_claim: str = "sub"
    operator_scope: str | None = None
    operator_claim: tuple[str, str] | None = None  # (claim, value): e.g. ("roles", "checkpoint-operator")
    leeway: float = DEFAULT_LEEWAY

    @property
    def resource(self) -> str | None:
        """The resource the tokens are for, when the audience is the gateway's URL (RFC 8707's resource)."""
        first = self.audiences[0]
        return first if urlsplit(first).scheme in ("http", "https") else None

    def resource_for(self, base: str) -> str:
        """The ``resource`` of the metadata document: the audience if it is a URL, else the gateway's ``base``."""
        return self.resource or base.rstrip("/") + "/"

    def metadata_url(self, base: str) -> str:
        """Where the protected-resource metadata is, for a request to the gateway at ``base`` (scheme://host)."""
        resource = self.resource
        if resource is not None:
            parts = urlsplit(resource)
            base = f"{parts.scheme}://{parts.netloc}"
        return base.rstrip("/") + METADATA_PATH

    def metadata(self, base: str) -> dict[str, Any]:
        """The RFC 9728 document: the resource, its authorization servers (the issuer unless named), how tokens
        are sent.

        It never lists the operator's scope (``scopes_supported``): MCP clients ask their authorization server for
        every scope the resource advertises when a 401 names none, so listing it would have every agent ask for the
        operator's view, and get it wherever the provider grants what is asked. An operator asks for it by name.
        """
        servers = list(self.authorization_servers or (self.issuer,))
        return {
            "resource": self.resource_for(base),
            "authorization_servers": servers,
            "bearer_methods_supported": ["header"],
            "resource_signing_alg_values_supported": list(ALGORITHMS),
        }


def token_settings(
    *,
    issuer: str | None,
    audiences: tuple[str, ...],
    jwks_url: str | None,
    jwks_file: str | None,
    authorization_servers: tuple[str, ...] = (),
    principal_claim: str = "sub",
    operator_scope: str | None = None,
    operator_claim: str | None = None,
) -> TokenSettings | None:
    """The identity provider's settings from `checkpoint serve`'s flags, or None when none was given.

    Raises:
        UsageError: a flag is missing, contradicts another, or has a value that cannot work.
    """
    given = issuer is not None or audiences or jwks_url is not None or jwks_file is not None
    if not given:
        extra = authorization_servers or operator_scope or operator_claim or principal_claim != "sub"
        if extra:
            raise UsageError("--authorization-server, --principal-claim and --operator-* need --issuer")
        return None
    if issuer is None or not audiences:
        raise UsageError("tokens from an identity provider need both --issuer and --audience")
    if (jwks_url is None) == (jwks_file is None):
        raise UsageError("give exactly one of --jwks-url and --jwks-file (the identity provider's keys)")
    if jwks_url is not None and urlsplit(jwks_url).scheme not in ("http", "https"):
        raise UsageError(f"--jwks-url {jwks_url!r} is not an http(s) URL")
    for server in authorization_servers:
        if urlsplit(server).scheme not in ("http", "https"):
            raise UsageError(f"--authorization-server {server!r} is not an http(s) URL")
    if not principal_claim.strip():
        raise UsageError("--principal-claim must name a claim")
    pair: tuple[str, str] | None = None
    if operator_claim is not None:
        name, equals, value = operator_claim.partition("=")
        if not equals or not name.strip() or not value:
            raise UsageError(f"--operator-claim must look like NAME=VALUE (got {operator_claim[:60]!r})")
        pair = (name.strip(), value)
    return TokenSettings(
        issuer=issuer,
        audiences=audiences,
        jwks_url=jwks_url,
        jwks_file=jwks_file,
        authorization_servers=authorization_servers,
        principal_claim=principal_claim.strip(),
        operator_scope=operator_scope,
        operator_claim=pair,
    )


class Identity(NamedTuple):
    """Who a valid token speaks for."""

    principal: str
    operator: bool  # it carries the operator's role (``--operator-scope`` or ``--operator-claim``)


def _keys(document: Any, source: str) -> dict[str | None, PyJWK]:
    """The signing keys of a JWKS document by key id (keys for encryption, or of an unknown type, are skipped).

    Raises:
        KeySetUnavailable: the document is not a key set.
    """
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise KeySetUnavailable(f"{source} is not a JSON Web Key Set (no 'keys' list)")
    keys: dict[str | None, PyJWK] = {}
    for entry in document["keys"]:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
            continue
        try:
            key = PyJWK(entry)
        except jwt.PyJWTError as exc:
            logger.debug("a key of %s was skipped: %s", source, exc)
            continue
        if key.algorithm_name in ALGORITHMS:
            keys[entry.get("kid") if isinstance(entry.get("kid"), str) else None] = key
    return keys


class KeySet:
    """The identity provider's signing keys, fetched from ``--jwks-url`` or read from ``--jwks-file``, kept, and
    fetched again in the background when old, or at once (rate-limited) when a token names a key they lack."""

    def __init__(self, url: str | None, path: str | None) -> None:
        self._url = url
        self._path = path
        self._keys: dict[str | None, PyJWK] = {}
        self._fetched = float("-inf")  # when the keys were last fetched (monotonic)
        self._lifetime = KEYS_TTL  # how long they are used before a fetch is started (the provider's max-age)
        self._tried = float("-inf")  # when a fetch was last started, whether it worked or not
        self._fetching: asyncio.Task[None] | None = None  # the fetch under way: one at a time
        self._failure: KeySetUnavailable | None = None  # why the last fetch failed, if it did

    @property
    def source(self) -> str:
        """Where the keys come from, for messages."""
        return f"the key set at {self._url}" if self._url is not None else f"the key file {self._path}"

    def load_file(self) -> None:
        """Read ``--jwks-file`` now.

        Raises:
            KeySetUnavailable: it cannot be read, or holds no usable key.
        """
        assert self._path is not None
        try:
            with open(self._path, encoding="utf-8") as file:
                document = json.load(file)
        except (OSError, ValueError) as exc:
            raise KeySetUnavailable(f"cannot read {self.source}: {exc}") from exc
        keys = _keys(document, self.source)
        if not keys:
            raise KeySetUnavailable(f"{self.source} holds no RS256 or ES256 signing key")
        self._keys = keys
        self._fetched = self._tried = time.monotonic()

    async def _fetch(self) -> None:
        """Fetch the key set again (or read the file again).

        Raises:
            KeySetUnavailable: it cannot be had.
        """
        if self._path is not None:
            await asyncio.to_thread(self.load_file)
            return
        import aiohttp

        assert self._url is not None
        try:
            timeout = aiohttp.ClientTimeout(total=FETCH_TIMEOUT)
            async with aiohttp.ClientSession(timeout=timeout) as client, client.get(self._url) as response:
                if response.status != 200:
                    raise KeySetUnavailable(f"{self.source} answered HTTP {response.status}")
                document = await response.json(content_type=None)
                lifetime = max_age(response.headers.get("cache-control"))
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise KeySetUnavailable(f"cannot fetch {self.source}: {exc or type(exc).__name__}") from exc
        self._keys = _keys(document, self.source)
        self._fetched = time.monotonic()
        self._lifetime = KEYS_TTL if lifetime is None else min(KEYS_TTL, max(lifetime, REFRESH_AT_MOST_EVERY))
        logger.info("fetched %s: %d signing key(s)", self.source, len(self._keys))

    async def _fetch_logged(self) -> None:
        """``_fetch``, its failure kept for the requests that wait for it and logged (never raised: it may run in
        the background, with nobody to raise to)."""
        try:
            await self._fetch()
        except KeySetUnavailable as exc:
            self._failure = exc
            if self._keys:
                logger.warning("cannot refresh %s; using the keys fetched before: %s", self.source, exc)
            else:
                logger.warning("%s; tokens are refused until it can be fetched", exc)
        else:
            self._failure = None

    def _refresh(self) -> asyncio.Task[None]:
        """The fetch under way, or a new one started."""
        if self._fetching is None or self._fetching.done():
            self._tried = time.monotonic()
            self._fetching = asyncio.get_running_loop().create_task(self._fetch_logged())
        return self._fetching

    async def start(self) -> None:
        """Have the keys before the first request: a file must be readable; a URL is fetched if it can be (the
        provider may come up later: a token is then checked once its keys can be had).

        Raises:
            KeySetUnavailable: the file cannot be read, or holds no usable key.
        """
        if self._path is not None:
            self.load_file()
            return
        await self._refresh()

    async def close(self) -> None:
        """Stop a fetch under way (the gateway is shutting down)."""
        fetching, self._fetching = self._fetching, None
        if fetching is not None and not fetching.done():
            fetching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await fetching

    async def key(self, kid: str | None, algorithm: str) -> PyJWK:
        """The key that must have signed a token with key id ``kid`` and ``algorithm``. A key the set holds is
        returned at once (a set past its lifetime is fetched again in the background meanwhile); for any other,
        the set is fetched first (the fetch under way, or a new one at most every ``REFRESH_AT_MOST_EVERY``).

        Raises:
            InvalidToken: no key of the set fits (after fetching the set again, at most every few seconds).
            KeySetUnavailable: the set cannot be had at all.
        """
        now = time.monotonic()
        found = self._find(kid, algorithm)
        if found is not None:
            if now - self._fetched > self._lifetime and now - self._tried >= REFRESH_AT_MOST_EVERY:
                self._refresh()  # in the background: the keys held serve this request and those meanwhile
            return found
        fetching = self._refresh() if now - self._tried >= REFRESH_AT_MOST_EVERY else self._fetching
        if fetching is not None and not fetching.done():
            await asyncio.shield(fetching)  # a request that goes away does not stop the fetch others wait for
        found = self._find(kid, algorithm)
        if found is None:
            if not self._keys:
                why = f": {self._failure}" if self._failure is not None else ""
                raise KeySetUnavailable(f"{self.source} could not be fetched yet{why}")
            named = f"key id {kid!r}" if kid is not None else "no key id"
            raise InvalidToken(f"the token names {named}, which the identity provider's key set does not hold")
        return found

    def _find(self, kid: str | None, algorithm: str) -> PyJWK | None:
        if kid is not None:
            key = self._keys.get(kid)
        else:  # a token without a key id: only a set with one key of its algorithm can say which
            fitting = [key for key in self._keys.values() if key.algorithm_name == algorithm]
            key = fitting[0] if len(fitting) == 1 else None
        return key if key is not None and key.algorithm_name == algorithm else None


class _Verified(NamedTuple):
    identity: Identity
    until: float  # wall-clock seconds after which it is expired: its ``exp`` plus the leeway
    kid: str | None
    algorithm: str
    key: PyJWK  # the key that verified it


class VerifiedTokens:
    """Tokens that passed, each until it expires, at most ``size`` of them (the one used longest ago is forgotten
    first)."""

    def __init__(self, size: int = MAX_REMEMBERED) -> None:
        self._size = size
        self._tokens: dict[str, _Verified] = {}

    def __len__(self) -> int:
        return len(self._tokens)

    def take(self, token: str, now: float) -> _Verified | None:
        """What is remembered of ``token``, taken out (``put`` it back if it still passes); None when nothing is, or
        it has expired since."""
        found = self._tokens.pop(token, None)
        return found if found is not None and now < found.until else None

    def put(self, token: str, verified: _Verified) -> None:
        if len(self._tokens) >= self._size:
            del self._tokens[next(iter(self._tokens))]
        self._tokens[token] = verified


class TokenVerifier:
    """Checks one bearer token against the settings and the key set."""

    def __init__(self, settings: TokenSettings) -> None:
        self.settings = settings
        self.keys = KeySet(settings.jwks_url, settings.jwks_file)
        self.verified = VerifiedTokens()

    async def verify(self, token: str) -> Identity:
        """Who ``token`` speaks for, if it is valid for this gateway.

        Raises:
            InvalidToken: it is not a JWT, has a refused algorithm, a bad signature, another issuer or audience, is
                expired or not yet valid, or names no usable principal.
            KeySetUnavailable: the provider's keys cannot be had to check it.
        """
        known = self.verified.take(token, time.time())
        if known is not None and await self.keys.key(known.kid, known.algorithm) is known.key:
            self.verified.put(token, known)  # last used now
            return known.identity
        # not remembered, expired, or its key is no longer the provider's (the set was fetched again): checked anew
        settings = self.settings
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidToken("the bearer token is not a JSON Web Token") from None
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS:
            raise InvalidToken(f"the token's algorithm {str(algorithm)[:20]!r} is not accepted (only RS256, ES256)")
        kid = header.get("kid")
        key = await self.keys.key(kid if isinstance(kid, str) else None, algorithm)
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key.key,
                algorithms=[algorithm],
                audience=list(settings.audiences),
                issuer=settings.issuer,
                leeway=settings.leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidToken("the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise InvalidToken("the token is not valid yet (nbf or iat in the future)") from None
        except jwt.InvalidAudienceError:
            raise InvalidToken("the token is for another audience") from None
        except jwt.InvalidIssuerError:
            raise InvalidToken("the token is from another issuer") from None
        except jwt.InvalidSignatureError:
            raise InvalidToken("the token's signature does not verify") from None
        except jwt.MissingRequiredClaimError as exc:
            raise InvalidToken(f"the token has no {exc.claim!r} claim") from None
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"the token is not valid: {type(exc).__name__}") from None
        identity = Identity(self._principal(claims), self._operator(claims))
        until = int(claims["exp"]) + settings.leeway  # required, and PyJWT read it with int() too
        self.verified.put(token, _Verified(identity, until, kid if isinstance(kid, str) else None, algorithm, key))
        return identity

    def _principal(self, claims: dict[str, Any]) -> str:
        name = self.settings.principal_claim
        value = claims.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_PRINCIPAL or not value.isprintable():
            raise InvalidToken(f"the token's {name!r} claim names no principal (a printable string is needed)")
        return value

    def _operator(self, claims: dict[str, Any]) -> bool:
        settings = self.settings
        if settings.operator_scope is not None:
            granted: set[str] = set()
            for name in ("scope", "scp"):
                value = claims.get(name)
                if isinstance(value, str):
                    granted.update(value.split())
                elif isinstance(value, list):
                    granted.update(item for item in value if isinstance(item, str))
            if settings.operator_scope in granted:
                return True
        if settings.operator_claim is not None:
            name, wanted = settings.operator_claim
            value = claims.get(name)
            if value == wanted or (isinstance(value, list) and wanted in value):
                return True
        return False


def max_age(cache_control: str | None) -> float | None:
    """The ``max-age`` of a ``Cache-Control`` header in seconds (None: none, or ``no-store``/``no-cache``: 0)."""
    if cache_control is None:
        return None
    for directive in cache_control.lower().split(","):
        name, _, value = directive.strip().partition("=")
        if name in ("no-store", "no-cache"):
            return 0.0
        if name == "max-age" and value.strip().strip('"').isdigit():
            return float(value.strip().strip('"'))
    return None


def request_base(scheme: str, host: str | None, server: tuple[str, int] | None) -> str:
    """``scheme://host`` of the gateway as the request reached it (its Host header, else the listening address)."""
    if host is None and server is not None:
        name, port = server
        host = f"[{name}]:{port}" if ":" in name else f"{name}:{port}"
    return f"{scheme}://{host or 'localhost'}"
