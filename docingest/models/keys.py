"""v1.3: API keys made at run time (`/v1/keys`, an admin's)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from docingest.models._base import Body, Model

Role = Literal["admin", "service", "user"]


class KeyRequest(Body):
    """The body of `POST /v1/keys`."""

    name: str
    role: Role
    indexes: list[str] | None = None
    """Indexes the key may use; None: every index."""
    principals: list[str] = Field(default_factory=list)
    """What a `user` key holds (`user:<id>`, `group:<id>`, `public`)."""


class ApiKey(Model):
    """A key as listed: never its secret."""

    id: str
    name: str
    role: str
    indexes: list[str] | None = None
    principals: list[str] = Field(default_factory=list)
    created_at: str | None = None


class CreatedKey(ApiKey):
    """The answer to `POST /v1/keys`: `key` is the secret, shown this once."""

    key: str


class KeyList(Model):
    keys: list[ApiKey]
