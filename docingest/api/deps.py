"""Typed dependencies: the process's clients (built in the app's lifespan), the caller, and
the index the caller names in the path, once it is valid and theirs (`AuthorizedIndex`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from celery import Celery
from fastapi import Depends, Request

from docingest.api.auth import PRINCIPALS_HEADER, Caller, KeyRing
from docingest.pipeline.jobs.state import JobStore
from docingest.pipeline.services import Services
from docingest.pipeline.store import Reader, VectorStore, validate_index_name


@dataclass
class AppState:
    """What the lifespan builds and every request uses."""

    services: Services
    celery: Celery
    keyring: KeyRing


def app_state(request: Request) -> AppState:
    state: AppState = request.app.state.docingest
    return state


def _services(request: Request) -> Services:
    return app_state(request).services


def _jobs(request: Request) -> JobStore:
    return app_state(request).services.jobs


def _store(request: Request) -> VectorStore:
    return app_state(request).services.store


def _celery(request: Request) -> Celery:
    return app_state(request).celery


def _caller(request: Request) -> Caller:
    return app_state(request).keyring.authenticate(request)


CallerDep = Annotated[Caller, Depends(_caller)]


def _reader(request: Request, caller: CallerDep) -> Reader:
    return caller.reader(request.headers.get(PRINCIPALS_HEADER))


ReaderDep = Annotated[Reader, Depends(_reader)]
"""Whose eyes the request reads with (`Caller.reader`): pass it to every store read."""


def authorize_index(index: str, caller: CallerDep) -> str:
    """Return `index` if it is a valid name this caller may use; else 400 or 403."""
    validate_index_name(index)
    caller.check(index)
    return index


def require_admin(caller: CallerDep) -> None:
    """Refuse a caller whose key is not an admin's (for what spans every document of an
    index, such as its webhooks, whose deliveries tell of them all)."""
    caller.check_admin("This endpoint")


StateDep = Annotated[AppState, Depends(app_state)]
ServicesDep = Annotated[Services, Depends(_services)]
JobsDep = Annotated[JobStore, Depends(_jobs)]
StoreDep = Annotated[VectorStore, Depends(_store)]
CeleryDep = Annotated[Celery, Depends(_celery)]
AuthorizedIndex = Annotated[str, Depends(authorize_index)]
"""The `{index}` path parameter, checked: a valid name the caller's API key may use."""
