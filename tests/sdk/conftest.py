"""One real `docingest serve` for all the SDK's tests in a test process (each module uses its
own indexes), instead of one per module: a start-up is the slowest part of these tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.docingest_service import LOADED_START_TIMEOUT, ServiceEnv, running_serve


@pytest.fixture(scope="session")
def sdk_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceEnv]:
    env = ServiceEnv(data_dir=tmp_path_factory.mktemp("sdk-serve"))
    with running_serve(env, timeout=LOADED_START_TIMEOUT):
        yield env
