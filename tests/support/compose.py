"""Read docker-compose.yml and .env.example as a deployment would; environment and Redis
clean-up helpers of the deploy tests."""

from __future__ import annotations

import os
import re
from typing import Any

import yaml

from tests.support.paths import REPO_DIR

COMPOSE_FILE = REPO_DIR / "docker-compose.yml"
ENV_EXAMPLE = REPO_DIR / ".env.example"
DEPLOY_DIR = REPO_DIR / "deploy"
DOCKERFILE = DEPLOY_DIR / "Dockerfile"

_VARIABLE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}")
SETTING_NAME = re.compile(r"\bDOCINGEST_[A-Z0-9_]+\b")


def load_compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())
    return data


def env_example_values() -> dict[str, str]:
    """The variables .env.example sets (uncommented lines), as `env_file` reads them."""
    values = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            values[name.strip()] = value
    return values


def interpolate(value: str, variables: dict[str, str]) -> str:
    """Resolve `${NAME}` and `${NAME:-default}` as compose does (set-and-non-empty wins)."""

    def resolve(match: re.Match[str]) -> str:
        given = variables.get(match["name"])
        return given if given else (match["default"] or "")

    return _VARIABLE.sub(resolve, value)


def service_environment(service: str, variables: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a container of `service` gets from a copy of .env.example as .env:
    the env_file first, then `environment:` on top (compose's order of precedence)."""
    variables = env_example_values() if variables is None else variables
    spec = load_compose()["services"][service]
    env = dict(variables) if spec.get("env_file") else {}
    for name, value in (spec.get("environment") or {}).items():
        env[name] = interpolate(str(value), variables)
    return env


def duration_seconds(text: str) -> float:
    """Compose's duration format (`62m`, `1h30m`, `40s`, `500ms`) in seconds."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a compose duration: {text!r}")
    return sum(float(number) * units[unit] for number, unit in parts)


def clean_environ() -> dict[str, str]:
    """This process's environment without any docingest or multiprocess-metrics setting."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("DOCINGEST_") and k != "PROMETHEUS_MULTIPROC_DIR"
    }
