"""Hostile webhooks: URLs into the deployment's own network (in every spelling), other
schemes, credentials, huge or unknown events lists, bad names; and at delivery time, a URL
that has become private, and a redirect, which is never followed. Each gets a clear 4xx
code (RELIABILITY.md, "Webhooks"), never a 500, and no request reaches the address. A receiver
that dribbles its answer holds a sender no longer than the timeout."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from docingest.pipeline.keys import Keys
from docingest.pipeline.outbox import Outbox, Subscription
from docingest.pipeline.webhooks.connections import Connections, key_for
from docingest.pipeline.webhooks.dispatcher import Dispatcher
from docingest.pipeline.webhooks.sender import attempt
from docingest.pipeline.webhooks.urls import check_url
from tests.support.api_app import api_client, is_contract_error, upload
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.redis_db import TestRedis, private_redis, unique_prefix
from tests.support.settings import FAKE_DIMENSIONS, service_settings
from tests.support.waiting import wait_until
from tests.support.webhook_receiver import receiving

PRIVATE_URLS = [
    "http://127.0.0.1/hook",
    "http://127.1/hook",  # short form
    "http://2130706433/hook",  # 127.0.0.1 as one decimal number
    "http://0x7f000001/hook",  # and in hex
    "http://localhost:8000/hook",
    "http://10.0.0.5/hook",
    "http://172.16.3.4/hook",
    "http://192.168.1.1/hook",
    "http://169.254.169.254/latest/meta-data/",  # the cloud metadata endpoint
    "http://100.64.0.1/hook",  # carrier-grade NAT
    "http://0.0.0.0:6379/",  # unspecified: Redis on this host
    "http://224.0.0.1/hook",  # multicast
    "http://[::1]/hook",
    "http://[::ffff:127.0.0.1]/hook",  # IPv4-mapped loopback
    "http://[fe80::1]/hook",
    "http://[fd00::1]/hook",
    "https://127.0.0.1:6333/collections",  # Qdrant
]
BAD_URLS = [
    "ftp://example.com/hook",
    "file:///etc/passwd",
    "gopher://127.0.0.1:6379/_FLUSHALL",
    "javascript:alert(1)",
    "//example.com/hook",
    "http:///hook",
    "http://user:pass@example.com/hook",
    "http://example.com:99999/hook",
    "http://exa mple.com/hook",
    "http://example.com/\r\nX-Injected: 1",
]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    prefix = unique_prefix("hostile-webhooks")
    with FakeEmbeddingServer(dimensions=FAKE_DIMENSIONS) as fake, private_redis(prefix):
        settings = service_settings(tmp_path_factory.mktemp("hostile-webhooks"), prefix, fake)
        assert not settings.webhook_allow_private  # the default
        with api_client(settings) as client:
            yield client


def put(client: httpx.Client, url: str, **body: object) -> httpx.Response:
    payload = {"url": url, "events": ["job.completed"], "secret": "s" * 20} | body
    return client.put("/v1/indexes/docs/webhooks/hook", json=payload)


@pytest.mark.parametrize("url", PRIVATE_URLS)
def test_a_private_address_is_refused_at_put(client: httpx.Client, url: str) -> None:
    response = put(client, url)
    assert is_contract_error(response, status=400, code="webhook_url_not_allowed")
    assert "DOCINGEST_WEBHOOK_ALLOW_PRIVATE" in response.json()["error"]["message"]


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_url_that_is_not_public_http_is_refused(client: httpx.Client, url: str) -> None:
    assert is_contract_error(put(client, url), status=400, code="invalid_webhook_url")


def test_a_private_callback_url_is_refused_at_upload(client: httpx.Client) -> None:
    for url in ("http://127.0.0.1:6379/", "http://169.254.169.254/", "http://[::1]/"):
        response = upload(client, "docs", b"Some notes.", callback_url=url)
        assert is_contract_error(response, status=400, code="webhook_url_not_allowed")
    response = upload(client, "docs", b"Some notes.", callback_url="file:///etc/passwd")
    assert is_contract_error(response, status=400, code="invalid_webhook_url")
    jobs = client.get("/v1/jobs", params={"index": "docs"}).raise_for_status().json()["jobs"]
    assert jobs == []  # no job was recorded for a refused upload


@pytest.mark.parametrize(
    "events",
    [[], ["job.done"], ["*"], ["job.completed", 7], ["job.completed"] * 10_000],
    ids=["empty", "unknown", "wildcard", "not-a-string", "huge"],
)
def test_an_events_list_must_be_short_and_known(client: httpx.Client, events: list) -> None:
    response = put(client, "http://93.184.215.14/hook", events=events)
    assert response.status_code in (400, 422), response.text
    code = response.json()["error"]["code"]
    assert code in ("invalid_webhook", "validation_error")


@pytest.mark.parametrize(
    "name", ["a" * 65, "-starts-with-dash", "has:colon", "has space", "ünïcode", "%2e%2e"]
)
def test_a_bad_name_is_refused(client: httpx.Client, name: str) -> None:
    response = client.put(
        f"/v1/indexes/docs/webhooks/{name}",
        json={"url": "http://93.184.215.14/", "events": ["job.failed"], "secret": "s" * 20},
    )
    assert is_contract_error(response, status=400, code="invalid_webhook")


def test_secrets_too_short_or_too_long_and_unknown_fields_are_refused(
    client: httpx.Client,
) -> None:
    assert is_contract_error(
        put(client, "http://93.184.215.14/", secret="short"), status=400, code="invalid_webhook"
    )
    too_long = put(client, "http://93.184.215.14/", secret="s" * 300)
    assert is_contract_error(too_long, status=422, code="validation_error")
    extra = put(client, "http://93.184.215.14/", headers={"X-Evil": "1"})
    assert is_contract_error(extra, status=422, code="validation_error")
    huge_url = put(client, "http://93.184.215.14/" + "a" * 5000)
    assert is_contract_error(huge_url, status=422, code="validation_error")


def test_the_check_resolves_names_and_refuses_every_address_it_finds() -> None:
    with pytest.raises(Exception) as refused:
        check_url("http://localhost/", allow_private=False)
    assert getattr(refused.value, "code", None) == "webhook_url_not_allowed"
    allowed = check_url("http://localhost:8080/x", allow_private=True)
    assert allowed.port == 8080 and allowed.addresses


def test_a_url_that_became_private_is_refused_at_delivery(
    tmp_path: Path, redis_db: TestRedis
) -> None:
    """The subscription was stored while private addresses were allowed (or its name
    resolved elsewhere then); the dispatcher checks again and never calls it."""
    settings = service_settings(tmp_path, redis_db.prefix, None, webhook_backoff_base_seconds=5)
    keys = Keys(redis_db.prefix)
    outbox = Outbox(redis_db.client, keys=keys, log_size=10, keep_seconds=60)
    with receiving() as receiver:
        now = time.time()
        outbox.put(Subscription(name="hook", index="docs", url=receiver.url,
                                events=["document.deleted"], secret="s" * 20,
                                created_at=now, updated_at=now))  # fmt: skip
        outbox.emit_deleted("docs", "a.txt", now)
        dispatcher = Dispatcher(outbox, settings)
        dispatcher.start()
        try:
            entry = wait_until(
                lambda: [r for r in outbox.recent("docs", "hook", 10) if r.get("last_error")],
                what="the refused attempt",
            )[0]
        finally:
            dispatcher.stop()
        assert entry["last_error"].startswith("webhook_url_not_allowed")
        assert entry["status"] == "pending"  # retried later: DNS may change
        assert receiver.received == []


def test_a_redirect_to_a_private_address_is_not_followed(
    tmp_path: Path, redis_db: TestRedis
) -> None:
    settings = service_settings(
        tmp_path, redis_db.prefix, None, webhook_allow_private=True,
        webhook_backoff_base_seconds=5,
    )  # fmt: skip
    outbox = Outbox(redis_db.client, keys=Keys(redis_db.prefix), log_size=10, keep_seconds=60)
    with receiving() as inside, receiving("redirect", redirect_to=inside.url) as redirecting:
        now = time.time()
        outbox.put(Subscription(name="hook", index="docs", url=redirecting.url,
                                events=["document.deleted"], secret="s" * 20,
                                created_at=now, updated_at=now))  # fmt: skip
        outbox.emit_deleted("docs", "a.txt", now)
        dispatcher = Dispatcher(outbox, settings)
        dispatcher.start()
        try:
            wait_until(lambda: redirecting.received, what="the attempt")
            entry = wait_until(
                lambda: [r for r in outbox.recent("docs", "hook", 10) if r.get("last_code")],
                what="the attempt logged",
            )[0]
        finally:
            dispatcher.stop()
        assert entry["last_code"] == "302" and "not followed" in entry["last_error"]
        assert inside.received == []


class DribblingReceiver:
    """A raw TCP receiver that accepts each delivery's headers with 200 and then sends the
    declared body (or endless chunks) a byte every DRIBBLE_SECONDS."""

    DRIBBLE_SECONDS = 0.3

    def __init__(self, answer: bytes) -> None:
        self._answer = answer
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}/hook"
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while not self._stop.is_set():
                connection, _ = self._listener.accept()
                threading.Thread(target=self._dribble, args=(connection,), daemon=True).start()

    def _dribble(self, connection: socket.socket) -> None:
        with connection, contextlib.suppress(OSError):
            connection.recv(65536)
            connection.sendall(self._answer)
            while not self._stop.wait(self.DRIBBLE_SECONDS):
                connection.sendall(b"1\r\nx\r\n" if b"chunked" in self._answer else b"x")

    def close(self) -> None:
        self._stop.set()
        self._listener.close()


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n",  # 30 s to send it all
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",  # never ends
    ],
    ids=["slow-body", "endless-chunks"],
)
def test_a_receiver_dribbling_its_answer_holds_a_sender_no_longer_than_the_timeout(
    answer: bytes,
) -> None:
    """The delivery counts (a 2xx came), and its connection is not kept: reading the body to
    keep it would let the receiver hold the sender for as long as it likes."""
    receiver = DribblingReceiver(answer)
    pool = Connections(most=4)
    try:
        started = time.monotonic()
        result = attempt(receiver.url, b"{}", {}, timeout=1.0, allow_private=True,
                         connections=pool)  # fmt: skip
        elapsed = time.monotonic() - started
        assert result.delivered and result.code == 200
        assert elapsed < 20  # the whole body would take 30 s, or forever
        assert pool.take(key_for(check_url(receiver.url, allow_private=True))) is None
    finally:
        receiver.close()
        pool.close()
