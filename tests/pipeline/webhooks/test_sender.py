"""One delivery attempt against a real local receiver (HTTP, and HTTPS with a certificate made
here), and the connections kept between attempts: reused for the same checked address,
replaced without a failed attempt when the receiver hung up, never kept after a refusal, and
closed when idle or beyond the bound."""

from __future__ import annotations

import http.client
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from docingest.pipeline.webhooks import connections as connections_module
from docingest.pipeline.webhooks import sender
from docingest.pipeline.webhooks.connections import Connections, key_for
from docingest.pipeline.webhooks.sender import Attempt, attempt, headers_for
from docingest.pipeline.webhooks.urls import Target
from tests.support.tls import self_signed_for_loopback
from tests.support.webhook_receiver import receiving

BODY = b'{"id":"dlv_1","event":"job.completed"}'


@pytest.fixture
def pool() -> Iterator[Connections]:
    kept = Connections(most=4)
    yield kept
    kept.close()


def send(url: str, pool: Connections | None, number: int = 1) -> Attempt:
    headers = headers_for(event="job.completed", delivery_id=f"dlv_{number}", body=BODY,
                          secret="s" * 16, attempt=1, now=time.time())  # fmt: skip
    return attempt(url, BODY, headers, timeout=5.0, allow_private=True, connections=pool)


def test_deliveries_to_one_receiver_share_one_kept_connection(pool: Connections) -> None:
    with receiving() as receiver:
        results = [send(receiver.url, pool, number) for number in range(5)]
        assert all(result.delivered for result in results)
        assert len(receiver.accepted()) == 5
        assert receiver.connections_opened == 1


def test_without_a_pool_every_attempt_has_its_own_connection() -> None:
    with receiving() as receiver:
        assert all(send(receiver.url, None, number).delivered for number in range(3))
        assert receiver.connections_opened == 3


def test_a_kept_connection_the_receiver_hung_up_is_replaced_within_the_attempt(
    pool: Connections,
) -> None:
    with receiving() as receiver:
        assert send(receiver.url, pool, 1).delivered
        receiver.stop()  # hangs up on the kept connection
        receiver.start()  # the same port again
        second = send(receiver.url, pool, 2)
        assert second.delivered, second.error
        assert [r.delivery_id for r in receiver.accepted()] == ["dlv_1", "dlv_2"]
        assert receiver.connections_opened == 2


def test_a_receiver_that_is_down_is_a_failed_attempt_even_with_a_kept_connection(
    pool: Connections,
) -> None:
    with receiving() as receiver:
        assert send(receiver.url, pool, 1).delivered
    failed = send(receiver.url, pool, 2)  # stopped: it hung up the kept connection too
    assert not failed.delivered
    assert failed.error is not None and failed.error.startswith("connection:")


def test_a_refusal_does_not_keep_its_connection(pool: Connections) -> None:
    with receiving("fail") as receiver:
        results = [send(receiver.url, pool, number) for number in range(3)]
        assert [result.code for result in results] == [500, 500, 500]
        assert receiver.connections_opened == 3


def test_https_deliveries_verify_the_certificate_and_keep_the_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pool: Connections
) -> None:
    certificate = self_signed_for_loopback(tmp_path)
    with receiving(tls=certificate.server_context()) as receiver:
        untrusted = send(receiver.url, pool, 1)  # the system's authorities do not know it
        assert not untrusted.delivered
        assert untrusted.error is not None and "CERTIFICATE_VERIFY_FAILED" in untrusted.error

        monkeypatch.setattr(sender, "_TLS", certificate.client_context())
        results = [send(receiver.url, pool, number) for number in range(2, 5)]
        assert all(result.delivered for result in results), [r.error for r in results]
        assert [r.delivery_id for r in receiver.accepted()] == ["dlv_2", "dlv_3", "dlv_4"]
        assert receiver.connections_opened == 1  # one kept (the refused handshake got no handler)


def target(address: str, host: str = "hooks.example.com") -> Target:
    return Target(url=f"https://{host}/hook", scheme="https", host=host, port=443,
                  addresses=(address,))  # fmt: skip


def test_a_kept_connection_is_only_for_the_address_it_was_opened_to(pool: Connections) -> None:
    kept = http.client.HTTPConnection("203.0.113.7", 443)
    pool.give_back(key_for(target("203.0.113.7")), kept)
    assert pool.take(key_for(target("198.51.100.9"))) is None  # the name resolved elsewhere
    assert pool.take(key_for(target("203.0.113.7", host="other.example.com"))) is None
    assert pool.take(key_for(target("203.0.113.7"))) is kept
    assert pool.take(key_for(target("203.0.113.7"))) is None  # taken: not handed out twice


def test_an_idle_connection_is_closed_not_reused(
    monkeypatch: pytest.MonkeyPatch, pool: Connections
) -> None:
    with receiving() as receiver:
        assert send(receiver.url, pool, 1).delivered
        monkeypatch.setattr(connections_module, "IDLE_SECONDS", 0.0)
        time.sleep(0.01)
        assert send(receiver.url, pool, 2).delivered
        assert receiver.connections_opened == 2


def test_the_pool_keeps_at_most_its_bound_closing_the_oldest() -> None:
    pool = Connections(most=2)
    opened = [http.client.HTTPConnection("203.0.113.7", 443) for _ in range(3)]
    key = key_for(target("203.0.113.7"))
    for connection in opened:
        pool.give_back(key, connection)
    assert pool.take(key) is opened[2]  # the most recently used first
    assert pool.take(key) is opened[1]
    assert pool.take(key) is None  # the oldest was closed when the third came back
