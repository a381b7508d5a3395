"""Who may call a cluster's services: tokens, TLS for grpc, CURVE for zmq.

Without any of this, anyone who can reach a task's port controls the task: registers
and runs any graph, reads and resets variables, stops the cluster. A
:class:`SecurityConfig` closes that (docs/distributed.md, "Security"):

- a *cluster token*: every request carries it (the envelope's ``token`` field,
  docs/wire.md) and the server's :class:`~flowrt.distributed.rpc.ServiceHandler`
  compares it in constant time; a missing or wrong token is an
  ``UnauthenticatedError``;
- an *admin token* (the chief's): with one configured, a server answers
  :data:`ADMIN_METHODS` (shutdown and reset) only to requests carrying it, others get
  ``PermissionDeniedError``; it also passes for every other method;
- *TLS* (grpc): server and client certificates signed by the cluster's CA, mutual
  authentication; *CURVE* (zmq): a server keypair shared by the cluster's servers, and
  a directory of the client public keys they accept (checked by a ZAP handler).

Keys, certificates and tokens are read from files named in the config (or by
``FLOWRT_*`` environment variables, :data:`ENV`), never given in clear on a command
line. :func:`default` is what servers and clients of this process use when none is
given: the one set with :func:`set_default`, else the environment's.
"""
from __future__ import annotations

import datetime
import hashlib
import hmac
import ipaddress
import os
import re
import secrets
import threading
from typing import Any, Mapping, Sequence

from ..base import errors

__all__ = ["SecurityConfig", "ADMIN_METHODS", "ENV", "TLS_SCHEMES", "default",
           "set_default", "transport_scheme", "tls_required", "make_dev_keys"]

#: target schemes that mean a transport with TLS required: ``grpcs://`` is grpc whose
#: every connection uses TLS (grpc:// uses TLS too when the config has a certificate)
TLS_SCHEMES = {"grpcs": "grpc"}

#: the methods that need the admin token when a server has one
ADMIN_METHODS = frozenset({"Master/Shutdown", "Master/Reset", "Worker/Shutdown",
                           "Worker/Reset"})

#: the environment variable of each :class:`SecurityConfig` argument (each names a
#: file, ``curve_public_keys`` a directory; ``tls_server_name`` is a host name)
ENV = {"token_file": "FLOWRT_TOKEN_FILE", "admin_token_file": "FLOWRT_ADMIN_TOKEN_FILE",
       "tls_cert": "FLOWRT_TLS_CERT", "tls_key": "FLOWRT_TLS_KEY",
       "tls_ca": "FLOWRT_TLS_CA", "tls_server_name": "FLOWRT_TLS_SERVER_NAME",
       "curve_secret_key": "FLOWRT_CURVE_SECRET_KEY",
       "curve_server_key": "FLOWRT_CURVE_SERVER_KEY",
       "curve_public_keys": "FLOWRT_CURVE_PUBLIC_KEYS"}

_Z85_KEY = re.compile(r"^[0-9a-zA-Z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}$")


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ValueError(f"cannot read the {what} {path!r}: {e.strerror}") from None


def _token(path: str, what: str) -> bytes:
    data = _read(path, what).strip()
    if len(data) < 16:
        raise ValueError(f"the {what} {path!r} holds {len(data)} bytes: a token needs at "
                         "least 16 (flowrt keys writes 64 random hex digits)")
    return data


def _curve_keys(path: str, what: str) -> tuple[bytes, bytes | None]:
    """``(public, secret or None)``, Z85-encoded, from a key file as
    ``zmq.auth.create_certificates`` writes them (``public-key = "..."``, and
    ``secret-key = "..."`` in the secret one), or one bare 40-character public key."""
    text = _read(path, what).decode("utf-8", "replace")
    found = dict(re.findall(r'(public|secret)-key\s*=\s*"([^"]{40})"', text))
    if "public" not in found and _Z85_KEY.match(text.strip()):
        found["public"] = text.strip()
    if "public" not in found:
        raise ValueError(f"the {what} {path!r} holds no CURVE public key (expected a "
                         "key file of `flowrt keys` or zmq.auth.create_certificates)")
    secret = found.get("secret")
    return found["public"].encode(), None if secret is None else secret.encode()


class SecurityConfig:
    """How a process's servers and clients authenticate each other (module docstring).

    Every argument but ``tls_server_name`` and ``curve_public_keys`` names a file,
    read when the config is made (a missing or unreadable file is a ``ValueError``
    naming it). A server uses every part it has; a client sends its token and uses
    TLS or CURVE where its transport does.

    :param token_file: the cluster token (at least 16 bytes; surrounding white space
        ignored)
    :param admin_token_file: the admin token: a server with one requires it for
        :data:`ADMIN_METHODS`; a client with one sends it for those methods (and for
        every method when it has no cluster token)
    :param tls_cert: PEM certificate of this process (a server's, which its outgoing
        calls also present as a client certificate, or a client's)
    :param tls_key: PEM private key of ``tls_cert``
    :param tls_ca: PEM certificate of the cluster's CA: peers must present a
        certificate it signed
    :param tls_server_name: the name clients check the server certificate against,
        where it is not the host of the address
    :param curve_secret_key: this process's CURVE keypair (a secret key file); for a
        server, the cluster's server keypair
    :param curve_server_key: the servers' CURVE public key (a clients' setting;
        default: the public key of ``curve_secret_key``, as a server calling another
        server of its cluster needs)
    :param curve_public_keys: a directory of the client public keys (``*.key``) servers
        accept; a server's own public key is always accepted
    :param token: the cluster token itself (bytes), for programs that hold it in
        memory; ``admin_token`` likewise
    """

    def __init__(self, token_file: str | None = None, admin_token_file: str | None = None,
                 tls_cert: str | None = None, tls_key: str | None = None,
                 tls_ca: str | None = None, tls_server_name: str | None = None,
                 curve_secret_key: str | None = None, curve_server_key: str | None = None,
                 curve_public_keys: str | None = None, *, token: bytes | None = None,
                 admin_token: bytes | None = None):
        """Read every named file (see the class docstring)."""
        self.token = token if token_file is None else _token(token_file, "token file")
        self.admin_token = admin_token if admin_token_file is None else \
            _token(admin_token_file, "admin token file")
        for name, tok in (("token", self.token), ("admin_token", self.admin_token)):
            if tok is not None and (not isinstance(tok, bytes) or len(tok) < 16):
                raise ValueError(f"{name} must be bytes of at least 16")
        tls = {"tls_cert": tls_cert, "tls_key": tls_key, "tls_ca": tls_ca}
        if any(tls.values()) and not all(tls.values()):
            missing = ", ".join(k for k, v in tls.items() if not v)
            raise ValueError(f"TLS needs a certificate, its key and the cluster's CA: "
                             f"{missing} missing")
        self.tls_cert = _read(tls_cert, "TLS certificate") if tls_cert else None
        self.tls_key = _read(tls_key, "TLS key") if tls_key else None
        self.tls_ca = _read(tls_ca, "TLS CA certificate") if tls_ca else None
        self.tls_server_name = tls_server_name or None
        self.curve_public = self.curve_secret = self.curve_server = None
        if curve_secret_key:
            self.curve_public, self.curve_secret = _curve_keys(curve_secret_key,
                                                               "CURVE secret key file")
            if self.curve_secret is None:
                raise ValueError(f"the CURVE secret key file {curve_secret_key!r} holds "
                                 "no secret key (it is a public key file)")
        if curve_server_key:
            self.curve_server = _curve_keys(curve_server_key, "CURVE server key file")[0]
        elif self.curve_public:
            self.curve_server = self.curve_public
        if self.curve_server and not self.curve_secret:
            raise ValueError("CURVE needs this process's keypair (curve_secret_key) too")
        if curve_public_keys and not os.path.isdir(curve_public_keys):
            raise ValueError(f"the CURVE public keys directory {curve_public_keys!r} is "
                             "not a directory")
        self.curve_public_keys = curve_public_keys or None
        self._lock = threading.Lock()
        self._fields: dict[bool, bytes] = {}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "SecurityConfig | None":
        """The config the ``FLOWRT_*`` variables of :data:`ENV` describe (None when
        none is set)."""
        env = os.environ if environ is None else environ
        kw = {arg: env[var] for arg, var in ENV.items() if env.get(var)}
        return cls(**kw) if kw else None

    # -- what it turns on -------------------------------------------------------------
    @property
    def tls(self) -> bool:
        """Whether grpc servers and channels use TLS (mutual)."""
        return self.tls_cert is not None

    @property
    def curve(self) -> bool:
        """Whether zmq sockets use CURVE."""
        return self.curve_secret is not None

    @property
    def identity(self) -> str:
        """A digest of the transport-level material: channels with different
        credentials to one address are never shared."""
        h = hashlib.sha256()
        for part in (self.tls_cert, self.tls_key, self.tls_ca, self.curve_secret,
                     self.curve_server, (self.tls_server_name or "").encode()):
            h.update(part or b"-")
            h.update(b"\0")
        return h.hexdigest()[:16]

    def allowed_curve_keys(self) -> set[bytes]:
        """The Z85 client public keys a CURVE server accepts: every ``*.key`` of
        :attr:`curve_public_keys` (read now, so a key added later counts on the next
        handshake) and the server's own public key."""
        keys = {self.curve_public} if self.curve_public else set()
        d = self.curve_public_keys
        if d:
            for name in sorted(os.listdir(d)):
                if name.endswith(".key"):
                    try:
                        keys.add(_curve_keys(os.path.join(d, name), "public key")[0])
                    except ValueError:
                        pass  # not a key file: ignored, as zmq.auth does
        return keys

    # -- the token --------------------------------------------------------------------
    def token_for(self, method: str) -> bytes | None:
        """The token a client sends with ``method``."""
        if method in ADMIN_METHODS and self.admin_token is not None:
            return self.admin_token
        return self.token if self.token is not None else self.admin_token

    def check(self, method: str, token: bytes, where: str) -> None:
        """Refuse a request for ``method`` carrying ``token`` (empty: none) unless this
        server's tokens admit it; ``where`` names the server in the message.

        :raises UnauthenticatedError: no token, or not one of the cluster's
        :raises PermissionDeniedError: ``method`` is an admin method and the token is
            the cluster token, not the admin token
        """
        admin, member = self.admin_token, self.token
        if admin is None and member is None:
            return
        is_admin = admin is not None and hmac.compare_digest(token, admin)
        if method in ADMIN_METHODS and admin is not None:
            if is_admin:
                return
            if member is not None and hmac.compare_digest(token, member):
                raise errors.PermissionDeniedError(
                    None, None, f"{method} refused by {where}: it needs the cluster's "
                    "admin token (the server was started with --admin-token-file); this "
                    "client sent the member token")
        elif is_admin or (member is not None and hmac.compare_digest(token, member)):
            return
        why = "carries no token" if not token else "carries a wrong token"
        raise errors.UnauthenticatedError(
            None, None, f"{method} refused by {where}: the request {why} (this server "
            "requires the cluster's token: FLOWRT_TOKEN_FILE or "
            "flowrt.distributed.security.SecurityConfig(token_file=...))")

    def __repr__(self) -> str:
        on = [n for n, v in (("token", self.token), ("admin token", self.admin_token),
                             ("TLS", self.tls), ("CURVE", self.curve)) if v]
        return f"<SecurityConfig {', '.join(on) or 'nothing'}>"


_DEFAULT: list[Any] = [False, None]  # explicitly set?, the config
_ENV_CACHE: dict[tuple[str, ...], SecurityConfig | None] = {}


def set_default(config: SecurityConfig | None, *, explicit: bool = True) -> None:
    """Make ``config`` what this process's servers and clients use when given none
    (``None`` with ``explicit``: no security, whatever the environment says);
    ``explicit=False`` goes back to the environment's."""
    _DEFAULT[:] = [explicit, config]


def default() -> SecurityConfig | None:
    """The config set with :func:`set_default`, else the ``FLOWRT_*`` environment's
    (read again when those variables change)."""
    if _DEFAULT[0]:
        return _DEFAULT[1]
    key = tuple(os.environ.get(v, "") for v in ENV.values())
    if key not in _ENV_CACHE:
        cfg = SecurityConfig.from_env()
        if len(_ENV_CACHE) > 16:
            _ENV_CACHE.clear()
        _ENV_CACHE[key] = cfg
    return _ENV_CACHE[key]


def transport_scheme(scheme: str, security: Any, target: str) -> tuple[str, Any]:
    """The transport a target's ``scheme`` names and the security its calls use:
    ``grpcs`` is the grpc transport with TLS required (:func:`tls_required`); any other
    scheme is itself, with ``security`` as given."""
    base = TLS_SCHEMES.get(scheme)
    if base is None:
        return scheme, security
    return base, tls_required(security, target)


def tls_required(security: Any, target: str) -> SecurityConfig:
    """``security`` (``"default"``: :func:`default`) when it has TLS material, as a
    ``grpcs://`` target or server needs; ``target`` names it in the error.

    :raises InvalidArgumentError: naming what is missing (no config, a config without
        TLS, or TLS variables that name only part of the certificate, key and CA)"""
    try:
        sec = default() if security == "default" else security
    except ValueError as e:  # FLOWRT_TLS_* variables naming part of it, or a bad file
        raise errors.InvalidArgumentError(None, None, f"{target} means grpc with TLS, "
                                          f"and its TLS material is incomplete: {e}") from None
    if sec is not None and sec.tls:
        return sec
    have = "no security config" if sec is None else f"a security config without TLS ({sec!r})"
    raise errors.InvalidArgumentError(
        None, None, f"{target} means grpc with TLS, but this process has {have}: missing "
        "a certificate, its key and the cluster's CA (FLOWRT_TLS_CERT, FLOWRT_TLS_KEY, "
        "FLOWRT_TLS_CA, or SecurityConfig(tls_cert=..., tls_key=..., tls_ca=...); "
        "`flowrt keys DIR` makes development ones), or use a grpc:// target")


# -- development keys (flowrt keys) -----------------------------------------------------
def _write(path: str, data: bytes, private: bool) -> str:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    if private:
        os.chmod(path, 0o600)
    return path


def _certificates(out: str, hosts: Sequence[str], days: int) -> list[str]:
    """Write a CA and server and client certificates it signs into ``out`` (see
    :func:`make_dev_keys`); returns the paths."""
    try:
        # optional: the `security` extra (cryptography); only `flowrt keys` needs it
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization  # optional
        from cryptography.hazmat.primitives.asymmetric import ec  # optional
        from cryptography.x509.oid import NameOID  # optional, as above
    except ImportError:
        raise RuntimeError("making TLS certificates needs the `cryptography` package: "
                           "pip install 'flowrt[security]'") from None
    now = datetime.datetime.now(datetime.timezone.utc)
    pem = serialization.Encoding.PEM

    def name(cn: str) -> Any:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def key_pem(key: Any) -> bytes:
        return key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("flowrt development CA"))
          .issuer_name(name("flowrt development CA")).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now)
          .not_valid_after(now + datetime.timedelta(days=days))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))
    written = [_write(os.path.join(out, "ca.pem"), ca.public_bytes(pem), False),
               _write(os.path.join(out, "ca.key"), key_pem(ca_key), True)]
    sans: list[Any] = []
    for h in dict.fromkeys(["127.0.0.1", "localhost", *hosts]):
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    for role in ("server", "client"):
        key = ec.generate_private_key(ec.SECP256R1())
        b = (x509.CertificateBuilder().subject_name(name(f"flowrt {role}"))
             .issuer_name(ca.subject).public_key(key.public_key())
             .serial_number(x509.random_serial_number()).not_valid_before(now)
             .not_valid_after(now + datetime.timedelta(days=days))
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), True))
        if role == "server":  # servers also call each other: the cert serves both ways
            b = b.add_extension(x509.SubjectAlternativeName(sans), False)
        cert = b.sign(ca_key, hashes.SHA256())
        written += [_write(os.path.join(out, f"{role}.pem"), cert.public_bytes(pem), False),
                    _write(os.path.join(out, f"{role}.key"), key_pem(key), True)]
    return written


def make_dev_keys(out: str, hosts: Sequence[str] = (), tls: bool = True,
                  curve: bool = True, days: int = 365) -> list[str]:
    """Write a development cluster's secrets into the directory ``out`` (made if
    needed); returns the paths written.

    - ``token`` and ``admin-token``: 64 random hex digits each (mode 0600);
    - with ``tls`` (needs ``cryptography``): ``ca.pem``/``ca.key``, a server certificate
      ``server.pem``/``server.key`` for 127.0.0.1, localhost and ``hosts``, and a client
      certificate ``client.pem``/``client.key``, all signed by that CA;
    - with ``curve`` (needs pyzmq), in ``curve/``: ``server.key_secret`` (the servers'
      keypair) and ``server.key`` (its public key, for clients); ``client.key_secret``
      (a client's keypair) with its public key in ``curve/clients/``, the directory
      servers accept keys from.
    """
    os.makedirs(out, exist_ok=True)
    written = [_write(os.path.join(out, n), secrets.token_hex(32).encode() + b"\n", True)
               for n in ("token", "admin-token")]
    if tls:
        written += _certificates(out, hosts, days)
    if curve:
        try:
            import zmq  # optional here: only the zmq transport uses CURVE keys
        except ImportError:
            raise RuntimeError("making CURVE keys needs pyzmq") from None
        d = os.path.join(out, "curve")
        os.makedirs(os.path.join(d, "clients"), exist_ok=True)
        for role, pub_dir in (("server", d), ("client", os.path.join(d, "clients"))):
            public, secret = zmq.curve_keypair()
            head = f"# flowrt {role} CURVE key\ncurve\n    public-key = \"{public.decode()}\"\n"
            written.append(_write(os.path.join(pub_dir, f"{role}.key"), head.encode(), False))
            written.append(_write(os.path.join(d, f"{role}.key_secret"),
                                  (head + f"    secret-key = \"{secret.decode()}\"\n")
                                  .encode(), True))
    return written
