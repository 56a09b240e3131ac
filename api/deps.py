"""Typed dependencies: the process's clients (built in the app's lifespan) and the caller."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from celery import Celery
from fastapi import Depends, Request

from api.auth import KeyRing, Principal
from pipeline.jobs.state import JobStore
from pipeline.services import Services
from pipeline.store import VectorStore


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


def _principal(request: Request) -> Principal:
    return app_state(request).keyring.authenticate(request)


StateDep = Annotated[AppState, Depends(app_state)]
ServicesDep = Annotated[Services, Depends(_services)]
JobsDep = Annotated[JobStore, Depends(_jobs)]
StoreDep = Annotated[VectorStore, Depends(_store)]
CeleryDep = Annotated[Celery, Depends(_celery)]
PrincipalDep = Annotated[Principal, Depends(_principal)]
