"""The SDK looks for the service where the command line does: DOCINGEST_URL, else
DOCINGEST_HOST and DOCINGEST_PORT (docs/guides/command-line.md)."""

from __future__ import annotations

import pytest

import docingest
from docingest._core import default_base_url


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DOCINGEST_URL", "DOCINGEST_HOST", "DOCINGEST_PORT"):
        monkeypatch.delenv(name, raising=False)


def test_without_environment_it_is_the_serve_default() -> None:
    assert default_base_url() == "http://127.0.0.1:8000"


def test_port_and_host_are_read_as_the_cli_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCINGEST_PORT", "8123")
    assert default_base_url() == "http://127.0.0.1:8123"
    monkeypatch.setenv("DOCINGEST_HOST", "0.0.0.0")  # listening everywhere: this machine
    assert default_base_url() == "http://127.0.0.1:8123"
    monkeypatch.setenv("DOCINGEST_HOST", "::1")
    with docingest.Client() as client:
        assert client.base_url == "http://[::1]:8123"


def test_url_wins_over_host_and_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCINGEST_PORT", "8123")
    monkeypatch.setenv("DOCINGEST_URL", "http://svc.example:9000/")
    assert default_base_url() == "http://svc.example:9000"


def test_a_port_that_is_not_one_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCINGEST_PORT", "80a")
    with pytest.raises(ValueError, match="DOCINGEST_PORT"):
        default_base_url()
