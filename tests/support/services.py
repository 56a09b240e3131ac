"""A process's `Services` for in-process tests: the test Redis, Qdrant in memory, the fake
embedding server; closed afterwards."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from docingest.pipeline.services import Services
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.settings import service_settings

MakeServices = Callable[..., Services]


@contextmanager
def services_factory(
    data_dir: Path, prefix: str, fake: FakeEmbeddingServer | None
) -> Iterator[MakeServices]:
    """Yield a function that builds `Services` with settings overrides; close them all after."""
    built: list[Services] = []

    def make(**overrides: Any) -> Services:
        services = Services(service_settings(data_dir, prefix, fake, **overrides), owns_store=True)
        services.settings.staging_dir.mkdir(parents=True, exist_ok=True)
        built.append(services)
        return services

    try:
        yield make
    finally:
        for services in built:
            services.close()
