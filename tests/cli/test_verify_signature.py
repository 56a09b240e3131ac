"""`docingest.verify_signature` against a delivery recorded from the real service (saved by
tests/reliability/test_webhook_crash.py with DOCINGEST_RECORD_DELIVERY set): it accepts the
delivery as sent, and refuses a changed body, another secret, and a replay outside the window.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import docingest
from docingest.pipeline.webhooks.signing import signature
from docingest.webhooks import DEFAULT_TOLERANCE_SECONDS, InvalidSignature, verify_signature

RECORDED = Path(__file__).with_name("recorded_delivery.json")


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    record: dict[str, Any] = json.loads(RECORDED.read_text())
    return record


def sent_at(recorded: dict[str, Any]) -> int:
    return int(recorded["headers"]["x-docingest-timestamp"])


def test_the_recorded_delivery_verifies(recorded: dict[str, Any]) -> None:
    body, headers, secret = recorded["body"].encode(), recorded["headers"], recorded["secret"]
    verify_signature(body, headers, secret, now=sent_at(recorded) + 10)
    verify_signature(recorded["body"], headers, secret, now=sent_at(recorded))  # str body
    upper = {name.title(): value for name, value in headers.items()}  # any header case
    verify_signature(body, upper, secret, now=sent_at(recorded))
    assert docingest.verify_signature is verify_signature  # exported by the package


def test_a_changed_body_or_another_secret_is_refused(recorded: dict[str, Any]) -> None:
    body, headers = recorded["body"].encode(), recorded["headers"]
    now = sent_at(recorded)
    with pytest.raises(InvalidSignature, match="does not match"):
        verify_signature(body.replace(b"completed", b"failed"), headers, recorded["secret"],
                         now=now)  # fmt: skip
    with pytest.raises(InvalidSignature, match="does not match"):
        verify_signature(body, headers, "another-secret-entirely", now=now)
    forged = dict(headers, **{"x-docingest-timestamp": str(now + 1)})
    with pytest.raises(InvalidSignature, match="does not match"):
        verify_signature(body, forged, recorded["secret"], now=now)


def test_a_replay_outside_the_window_is_refused(recorded: dict[str, Any]) -> None:
    body, headers, secret = recorded["body"].encode(), recorded["headers"], recorded["secret"]
    late = sent_at(recorded) + DEFAULT_TOLERANCE_SECONDS + 1
    with pytest.raises(InvalidSignature, match="window"):
        verify_signature(body, headers, secret, now=late)
    verify_signature(body, headers, secret, now=late, tolerance=DEFAULT_TOLERANCE_SECONDS + 5)
    with pytest.raises(InvalidSignature, match="window"):  # from the future, too
        verify_signature(body, headers, secret, now=sent_at(recorded) - 3600)


def test_missing_or_malformed_headers_are_refused(recorded: dict[str, Any]) -> None:
    body, secret = recorded["body"].encode(), recorded["secret"]
    for headers in ({}, {"X-Docingest-Timestamp": "1"}, {"X-Docingest-Signature": "sha256=00"}):
        with pytest.raises(InvalidSignature):
            verify_signature(body, headers, secret)
    bad_time = {"X-Docingest-Timestamp": "soon", "X-Docingest-Signature": "sha256=00"}
    with pytest.raises(InvalidSignature, match="Unix time"):
        verify_signature(body, bad_time, secret)


def test_the_server_and_the_sdk_agree_on_the_signature(recorded: dict[str, Any]) -> None:
    headers = recorded["headers"]
    expected = signature(recorded["secret"], headers["x-docingest-timestamp"],
                         recorded["body"].encode())  # fmt: skip
    assert expected == headers["x-docingest-signature"]


def test_the_module_uses_the_standard_library_only() -> None:
    source = Path(docingest.webhooks.__file__).read_text()
    imports = {line.split()[1].split(".")[0] for line in source.splitlines()
               if line.startswith(("import ", "from "))}  # fmt: skip
    assert imports <= {"__future__", "hashlib", "hmac", "time", "collections"}, imports
