"""The endpoints an admin key sets up (webhooks, sources, API keys) as functions that build
their `Call`s, as `docingest._operations` does for the rest; `Client` and `AsyncClient` send
these unchanged."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from docingest._core import Call, field_of, model, nothing, seg
from docingest.models import (
    ApiKey,
    CreatedKey,
    Delivery,
    DeliveryList,
    KeyList,
    KeyRequest,
    Role,
    SourceInfo,
    SourceList,
    SourceRun,
    SourceRunList,
    SourceSettings,
    Webhook,
    WebhookEventName,
    WebhookList,
    WebhookSubscription,
)

# --- webhooks ---


def put_webhook(
    index: str,
    name: str,
    url: str,
    *,
    events: list[WebhookEventName] | None = None,
    secret: str | None = None,
) -> Call[Webhook]:
    """v1.2 `PUT /v1/indexes/{index}/webhooks/{name}`: subscribe `url` to the index's events,
    signed with `secret` (check deliveries with `docingest.verify_signature`)."""
    body = WebhookSubscription.model_validate(
        {"url": url, "secret": secret} | ({"events": events} if events is not None else {})
    )
    return Call(
        "PUT", f"/v1/indexes/{seg(index)}/webhooks/{seg(name)}", model(Webhook), json=body.to_json()
    )


def list_webhooks(index: str) -> Call[list[Webhook]]:
    """v1.2 `GET /v1/indexes/{index}/webhooks`: the subscriptions, without secrets."""
    return Call("GET", f"/v1/indexes/{seg(index)}/webhooks", field_of(WebhookList, "webhooks"))


def get_webhook(index: str, name: str) -> Call[Webhook]:
    """v1.2 `GET /v1/indexes/{index}/webhooks/{name}`: one subscription, without its secret."""
    return Call("GET", f"/v1/indexes/{seg(index)}/webhooks/{seg(name)}", model(Webhook))


def delete_webhook(index: str, name: str) -> Call[None]:
    """v1.2 `DELETE /v1/indexes/{index}/webhooks/{name}`."""
    return Call("DELETE", f"/v1/indexes/{seg(index)}/webhooks/{seg(name)}", nothing)


def list_deliveries(index: str, name: str) -> Call[list[Delivery]]:
    """v1.2 `GET .../webhooks/{name}/deliveries`: recent deliveries with their status."""
    return Call(
        "GET",
        f"/v1/indexes/{seg(index)}/webhooks/{seg(name)}/deliveries",
        field_of(DeliveryList, "deliveries"),
    )


# --- sources ---


def put_source(
    index: str,
    name: str,
    type: str,
    config: Mapping[str, Any],
    *,
    every: str | None = None,
    prune: bool | None = None,
    metadata: Mapping[str, Any] | None = None,
    access: list[str] | None = None,
) -> Call[SourceInfo]:
    """v1.3 `PUT /v1/indexes/{index}/sources/{name}`: keep the index in sync with a bucket
    (`s3`), a website (`web`) or a server folder (`folder`), every `every` (`"15m"`) when
    given. Secrets in `config` are write-only: answers show them as "***"."""
    body = SourceSettings.model_validate(
        {
            "type": type,
            "config": dict(config),
            "schedule": {"every": every} if every is not None else None,
            "prune": prune,
            "metadata": dict(metadata) if metadata is not None else None,
            "access": access,
        }
    )
    return Call(
        "PUT",
        f"/v1/indexes/{seg(index)}/sources/{seg(name)}",
        model(SourceInfo),
        json=body.to_json(),
    )


def list_sources(index: str) -> Call[list[SourceInfo]]:
    """v1.3 `GET /v1/indexes/{index}/sources`: the index's sources with their last runs."""
    return Call("GET", f"/v1/indexes/{seg(index)}/sources", field_of(SourceList, "sources"))


def get_source(index: str, name: str) -> Call[SourceInfo]:
    """v1.3 `GET /v1/indexes/{index}/sources/{name}`."""
    return Call("GET", f"/v1/indexes/{seg(index)}/sources/{seg(name)}", model(SourceInfo))


def delete_source(index: str, name: str, *, delete_documents: bool = False) -> Call[None]:
    """v1.3 `DELETE /v1/indexes/{index}/sources/{name}`; `delete_documents` also deletes the
    documents it brought."""
    return Call(
        "DELETE",
        f"/v1/indexes/{seg(index)}/sources/{seg(name)}",
        nothing,
        params={"delete_documents": "true" if delete_documents else None},
    )


def sync_source(index: str, name: str) -> Call[SourceRun]:
    """v1.3 `POST .../sources/{name}/sync`: queue a run now (409 `sync_in_progress` when one
    is under way)."""
    return Call("POST", f"/v1/indexes/{seg(index)}/sources/{seg(name)}/sync", model(SourceRun))


def list_source_runs(index: str, name: str, *, limit: int | None = None) -> Call[list[SourceRun]]:
    """v1.3 `GET .../sources/{name}/runs`: the runs, newest first."""
    return Call(
        "GET",
        f"/v1/indexes/{seg(index)}/sources/{seg(name)}/runs",
        field_of(SourceRunList, "runs"),
        params={"limit": limit},
    )


def cancel_source_run(index: str, name: str, run_id: str) -> Call[SourceRun]:
    """v1.3 `DELETE .../sources/{name}/runs/{run_id}`: stop a queued or running run (it shows
    `cancelling`, then ends `cancelled`); 409 `run_state_conflict` once it ended."""
    return Call(
        "DELETE",
        f"/v1/indexes/{seg(index)}/sources/{seg(name)}/runs/{seg(run_id)}",
        model(SourceRun),
    )


# --- keys (v1.3, an admin's) ---


def create_key(
    name: str,
    *,
    role: Role,
    indexes: Sequence[str] | None = None,
    principals: Sequence[str] = (),
) -> Call[CreatedKey]:
    """`POST /v1/keys`: make a key; its secret (`key`) is in this answer only."""
    body = KeyRequest(
        name=name,
        role=role,
        indexes=None if indexes is None else list(indexes),
        principals=list(principals),
    )
    return Call("POST", "/v1/keys", model(CreatedKey), json=body.to_json())


def list_keys() -> Call[list[ApiKey]]:
    """`GET /v1/keys`: the keys made at run time, without their secrets."""
    return Call("GET", "/v1/keys", field_of(KeyList, "keys"))


def revoke_key(key_id: str) -> Call[None]:
    """`DELETE /v1/keys/{id}`: every API process refuses the key within a second."""
    return Call("DELETE", f"/v1/keys/{seg(key_id)}", nothing)
