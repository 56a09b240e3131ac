"""The base of every SDK model: tolerant of what a newer server adds."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    """A contract shape. Fields a newer server adds are kept (`extra="allow"`), so a client
    built for v1.2 reads a v1.3 answer; fields a v1.1 server omits have defaults."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def to_json(self) -> dict[str, Any]:
        """The fields as the server sent them (defaults it did not send left out)."""
        return self.model_dump(mode="json", exclude_unset=True)


class Body(BaseModel):
    """A request body: only the fields the caller set are sent, so an older server that does
    not know a v1.2 field is never sent it unasked."""

    model_config = ConfigDict(extra="forbid")

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class ErrorInfo(Model):
    """`{"code", "message"}`: a failed job's error, or an error response's body."""

    code: str
    message: str
