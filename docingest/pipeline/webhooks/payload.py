"""The JSON a delivery carries: `{"id", "event", "created_at", "data"}`; `data` is the Job as
`GET /v1/jobs/{id}` shows it when the event happened, or the event's own object."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from docingest.pipeline.jobs.job import job_from_hash
from docingest.pipeline.outbox.store import rfc3339


def render(fields: Mapping[str, str]) -> str:
    """The body of the stored delivery `fields` (its hash in the outbox)."""
    data: Any
    if fields.get("job"):
        data = job_from_hash(json.loads(fields["job"])).model_dump(mode="json")
    else:
        data = json.loads(fields.get("data") or "{}")
    payload = {
        "id": fields["id"],
        "event": fields["event"],
        "created_at": rfc3339(fields["created_at"]),
        "data": data,
    }
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
