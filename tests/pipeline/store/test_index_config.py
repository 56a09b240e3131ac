"""An index's stored config stays readable by the previous release where it can be."""

from __future__ import annotations

import json

from docingest.pipeline.embedders.base import EmbeddingConfig
from docingest.pipeline.store import IndexConfig

CONFIG = IndexConfig(embedding=EmbeddingConfig(model="m", dimensions=3))


def test_contextual_headers_are_stored_only_when_on() -> None:
    """The previous release's config forbids unknown keys: an index without headers (which it
    can serve) must not carry the key; one with headers must (it cannot serve that)."""
    assert "contextual_headers" not in json.loads(CONFIG.model_dump_json())
    headed = CONFIG.model_copy(update={"contextual_headers": True})
    assert json.loads(headed.model_dump_json())["contextual_headers"] is True
    assert IndexConfig.model_validate_json(headed.model_dump_json()) == headed
    assert IndexConfig.model_validate_json(CONFIG.model_dump_json()) == CONFIG
    assert headed.conflicts_with(CONFIG) and "contextual_headers" in headed.conflict_message(
        "docs", CONFIG
    )
