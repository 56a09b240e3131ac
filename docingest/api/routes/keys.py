"""`/v1/keys`: API keys made, listed and revoked at run time (an admin's, not limited to some
indexes). A key is kept hashed in Redis (`docingest.pipeline.api_keys`): its secret is in
the creating answer only, and a revoked key is refused by every API process within a second.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response
from pydantic import BaseModel, ConfigDict, Field, field_validator

from docingest.api.auth import Caller
from docingest.api.deps import CallerDep, ServicesDep
from docingest.pipeline.api_keys import KeyRecord, Role
from docingest.pipeline.store import validate_index_name
from docingest.pipeline.store.access import MAX_READER_PRINCIPALS


def _admin_of_every_index(caller: CallerDep) -> Caller:
    caller.check_admin("Managing API keys", every_index=True)
    return caller


router = APIRouter(prefix="/v1/keys", tags=["keys"], dependencies=[Depends(_admin_of_every_index)])


class KeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    role: Role
    indexes: list[str] | None = Field(default=None, max_length=1000)
    """Indexes the key may use; null: every index."""
    principals: list[str] = Field(default_factory=list, max_length=MAX_READER_PRINCIPALS)
    """What a `user` key holds (`user:<id>`, `group:<id>`, `public`); none for other roles."""

    @field_validator("indexes")
    @classmethod
    def _index_names(cls, value: list[str] | None) -> list[str] | None:
        for name in value or []:
            validate_index_name(name)
        return value


class ApiKeyInfo(BaseModel):
    """A key as listed: never its secret."""

    id: str
    name: str
    role: Role
    indexes: list[str] | None
    principals: list[str]
    created_at: str

    @classmethod
    def of(cls, record: KeyRecord) -> ApiKeyInfo:
        return cls(
            id=record.id,
            name=record.name,
            role=record.role,
            indexes=record.indexes,
            principals=record.principals,
            created_at=record.created_at,
        )


class CreatedKey(ApiKeyInfo):
    key: str
    """The secret: send it as `Authorization: Bearer <key>`. Shown in this answer only."""


class KeyList(BaseModel):
    keys: list[ApiKeyInfo]


@router.post("", response_model=CreatedKey, status_code=201)
def create_key(body: KeyCreate, services: ServicesDep) -> CreatedKey:
    """Make a key; its secret is in this answer only (stored as its sha256)."""
    record, secret = services.api_keys.create(
        name=body.name, role=body.role, indexes=body.indexes, principals=body.principals
    )
    return CreatedKey(**ApiKeyInfo.of(record).model_dump(), key=secret)


@router.get("", response_model=KeyList)
def list_keys(services: ServicesDep) -> KeyList:
    """The keys made at run time, oldest first, without their secrets (the settings' keys
    are the operator's and are not listed)."""
    return KeyList(keys=[ApiKeyInfo.of(record) for record in services.api_keys.list()])


@router.delete("/{id}", status_code=204)
def revoke_key(id: str, services: ServicesDep) -> Response:
    """Revoke a key: every API process refuses it within a second."""
    services.api_keys.revoke(id)
    return Response(status_code=204)
