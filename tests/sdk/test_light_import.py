"""`import docingest` (the SDK) loads none of the service: no `docingest.pipeline`, `.api` or
`.workers`, no Redis, Qdrant or parser library, in a fresh interpreter; and the service's own
modules never load the SDK through the package they share."""

from __future__ import annotations

import json
import subprocess
import sys

SERVICE = ("docingest.pipeline", "docingest.api", "docingest.workers")
HEAVY = ("redis", "celery", "qdrant_client", "numpy", "fastapi")


def loaded_after(code: str) -> set[str]:
    """The names in `sys.modules` after `code` runs in a fresh interpreter."""
    code += "; import json, sys; print(json.dumps(sorted(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(run.stdout.splitlines()[-1]))


def test_the_sdk_imports_nothing_of_the_service() -> None:
    loaded = loaded_after(
        "import docingest, docingest.models, docingest.errors; docingest.Client('http://127.0.0.1:9')"
    )
    assert {"httpx", "pydantic", "docingest._client"} <= loaded
    service = {m for m in loaded if m.startswith(SERVICE)}
    assert not service, sorted(service)
    heavy = {m for m in loaded if m.split(".")[0] in HEAVY}
    assert not heavy, sorted(heavy)


def test_importing_the_package_loads_no_sdk_until_a_name_is_used() -> None:
    # The service's processes import `docingest.pipeline...`, which runs docingest/__init__.py.
    loaded = loaded_after("import docingest.pipeline.settings")
    assert "docingest.pipeline.settings" in loaded
    assert not loaded & {"httpx", "docingest._client", "docingest._async_client"}


def test_every_exported_name_resolves() -> None:
    import docingest

    assert sorted(docingest.__all__) == sorted(docingest._EXPORTS)
    for name in docingest.__all__:
        assert getattr(docingest, name).__name__ == name
    assert set(docingest.__all__) <= set(dir(docingest))
