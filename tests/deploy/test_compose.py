"""docker-compose.yml, .env.example, the Dockerfile and the monitoring files, checked against
the code they configure: commands the real CLI parser accepts, names `Settings` really reads,
health checks that exist, and the reliability settings that must hold together."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from docingest.cli import build_parser
from docingest.pipeline.settings import Settings
from tests.support.compose import (
    COMPOSE_FILE,
    DEPLOY_DIR,
    DOCKERFILE,
    ENV_EXAMPLE,
    SETTING_NAME,
    duration_seconds,
    load_compose,
    service_environment,
)
from tests.support.paths import REPO_DIR

DOCINGEST_SERVICES = ("api", "worker")
SETTINGS_FIELDS = {f"DOCINGEST_{name.upper()}" for name in Settings.model_fields}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load_compose()


def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    result: dict[str, dict[str, Any]] = compose["services"]
    return result


def test_services_and_profiles(compose: dict[str, Any]) -> None:
    found = services(compose)
    assert {"api", "worker", "redis", "qdrant"} <= set(found)
    for name in ("api", "worker", "redis", "qdrant"):
        assert "profiles" not in found[name], f"{name} must start by default"
    assert found["flower"]["profiles"] == ["flower"]
    assert found["prometheus"]["profiles"] == found["grafana"]["profiles"] == ["monitoring"]


def test_every_core_service_has_a_healthcheck(compose: dict[str, Any]) -> None:
    for name in ("api", "worker", "redis", "qdrant"):
        check = services(compose)[name]["healthcheck"]
        assert check["test"][0] == "CMD", name
        assert duration_seconds(check["interval"]) <= 30


def test_docingest_healthchecks_run_the_script_the_image_ships(compose: dict[str, Any]) -> None:
    dockerfile = DOCKERFILE.read_text()
    assert "COPY deploy/healthcheck.py /opt/docingest/healthcheck.py" in dockerfile
    assert (DEPLOY_DIR / "healthcheck.py").is_file()
    for name in DOCINGEST_SERVICES:
        test = services(compose)[name]["healthcheck"]["test"]
        assert test == ["CMD", "python", "/opt/docingest/healthcheck.py", name]


@pytest.mark.parametrize("name", DOCINGEST_SERVICES)
def test_commands_are_accepted_by_the_docingest_parser(compose: dict[str, Any], name: str) -> None:
    command = services(compose)[name]["command"]
    args = build_parser().parse_args(command)  # exits (SystemExit) on anything it rejects
    assert args.command == name


def test_worker_command_recycles_pool_processes(compose: dict[str, Any]) -> None:
    args = build_parser().parse_args(services(compose)["worker"]["command"])
    assert args.pool == "prefork"
    assert args.max_tasks_per_child and args.max_tasks_per_child > 0


def test_api_and_workers_wait_for_healthy_redis_and_qdrant(compose: dict[str, Any]) -> None:
    for name in DOCINGEST_SERVICES:
        depends = services(compose)[name]["depends_on"]
        for dependency in ("redis", "qdrant"):
            assert depends[dependency] == {"condition": "service_healthy"}, (name, dependency)
        assert services(compose)[name]["restart"] == "unless-stopped"


def test_every_docingest_name_is_a_setting() -> None:
    for path in (COMPOSE_FILE, ENV_EXAMPLE, DEPLOY_DIR / "flower" / "flowerapp.py"):
        names = set(SETTING_NAME.findall(path.read_text()))
        assert names, path
        unknown = names - SETTINGS_FIELDS
        assert not unknown, f"{path.name} names settings that do not exist: {sorted(unknown)}"


def test_env_example_documents_every_setting() -> None:
    text = ENV_EXAMPLE.read_text()
    for name in sorted(SETTINGS_FIELDS):
        match = re.search(rf"^((?:#[^\n]*\n)+)# {name}=", text, flags=re.MULTILINE)
        assert match, f"{name} is missing from .env.example (as `# {name}=<default>`)"
        assert len(match[1].strip()) > 10, f"{name} has no description above it"


def shown(value: object) -> str:
    """A default as .env.example writes it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return json.dumps(value)
    return str(getattr(value, "value", value))


def test_env_example_shows_the_defaults_or_the_compose_values() -> None:
    compose_values: dict[str, set[str]] = {}
    for name in DOCINGEST_SERVICES:
        for key, value in service_environment(name).items():
            compose_values.setdefault(key, set()).add(value)
    lines = re.findall(r"^# (DOCINGEST_[A-Z0-9_]+)=(.*)$", ENV_EXAMPLE.read_text(), re.MULTILINE)
    assert len(lines) == len(SETTINGS_FIELDS)
    for name, value in lines:
        field = Settings.model_fields[name.removeprefix("DOCINGEST_").lower()]
        default = field.get_default(call_default_factory=True)
        allowed = {shown(default)} | compose_values.get(name, set())
        if name == "DOCINGEST_DATA_DIR":
            allowed.add("/data")  # the image's ENV
        assert value in allowed, f"{name}={value} in .env.example; expected one of {allowed}"


def test_compose_settings_can_be_overridden_from_env_file(compose: dict[str, Any]) -> None:
    """A DOCINGEST_* value in compose is `${SAME_NAME:-default}` unless it is fixed wiring."""
    fixed = {"DOCINGEST_DATA_DIR", "DOCINGEST_HOST", "DOCINGEST_PORT", "DOCINGEST_METRICS_PORT"}
    for name in DOCINGEST_SERVICES:
        for key, value in services(compose)[name]["environment"].items():
            if key.startswith("DOCINGEST_") and key not in fixed:
                assert str(value).startswith(f"${{{key}:-"), (name, key, value)


def test_service_uses_the_qdrant_server_and_shared_staging(compose: dict[str, Any]) -> None:
    volumes = set()
    for name in DOCINGEST_SERVICES:
        env = service_environment(name)
        assert env["DOCINGEST_QDRANT_URL"] == "http://qdrant:6333"
        assert env["DOCINGEST_REDIS_URL"] == "redis://redis:6379/0"
        staging = Settings(data_dir=Path(env["DOCINGEST_DATA_DIR"])).staging_dir
        mounts = [m for m in services(compose)[name]["volumes"] if m.endswith(f":{staging}")]
        assert len(mounts) == 1, f"{name} does not mount a volume at {staging}"
        volumes.add(mounts[0].split(":")[0])
    assert len(volumes) == 1 and volumes <= set(compose["volumes"]), volumes


@pytest.mark.parametrize("name", DOCINGEST_SERVICES)
def test_compose_environment_makes_valid_settings(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in [k for k in os.environ if k.startswith("DOCINGEST_")]:
        monkeypatch.delenv(key)
    for key, value in service_environment(name).items():
        monkeypatch.setenv(key, value)
    settings = Settings()  # validates soft < hard limit < visibility timeout, among others
    assert settings.qdrant_url == "http://qdrant:6333"
    assert settings.log_format == "json"


def test_worker_outlasts_its_jobs_on_sigterm(compose: dict[str, Any]) -> None:
    worker = services(compose)["worker"]
    env = service_environment("worker")
    hard_limit = int(env["DOCINGEST_TASK_TIME_LIMIT_SECONDS"])
    assert int(env["DOCINGEST_TASK_SOFT_TIME_LIMIT_SECONDS"]) < hard_limit
    assert duration_seconds(worker["stop_grace_period"]) > hard_limit
    assert int(env["DOCINGEST_BROKER_VISIBILITY_TIMEOUT_SECONDS"]) > hard_limit


def test_worker_scales_and_exposes_metrics(compose: dict[str, Any]) -> None:
    worker = services(compose)["worker"]
    assert "container_name" not in worker and "ports" not in worker  # --scale worker=N works
    env = service_environment("worker")
    assert int(env["DOCINGEST_METRICS_PORT"]) > 0
    assert env["PROMETHEUS_MULTIPROC_DIR"] in worker["tmpfs"]
    assert "DOCINGEST_METRICS_PORT" not in service_environment("api")


def test_redis_is_durable_and_never_evicts(compose: dict[str, Any]) -> None:
    command = [str(part) for part in services(compose)["redis"]["command"]]
    joined = " ".join(command)
    assert "--appendonly yes" in joined
    assert "--maxmemory-policy noeviction" in joined
    assert any(volume.endswith(":/data") for volume in services(compose)["redis"]["volumes"])


def test_images_are_pinned(compose: dict[str, Any]) -> None:
    for name, spec in services(compose).items():
        if "image" in spec and "build" not in spec:
            image = spec["image"]
            tag = image.rpartition(":")[2]
            assert ":" in image and re.search(r"\d+\.\d+", tag), f"{name}: {image} is not pinned"
    assert re.fullmatch(r"qdrant/qdrant:v\d+\.\d+\.\d+", services(compose)["qdrant"]["image"])
    qdrant_volumes = services(compose)["qdrant"]["volumes"]
    assert any(v.endswith(":/qdrant/storage") for v in qdrant_volumes)


def test_prometheus_scrapes_the_ports_compose_serves(compose: dict[str, Any]) -> None:
    config = yaml.safe_load((DEPLOY_DIR / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    api_targets = jobs["docingest-api"]["static_configs"][0]["targets"]
    assert api_targets == [f"api:{service_environment('api')['DOCINGEST_PORT']}"]
    (worker_sd,) = jobs["docingest-worker"]["dns_sd_configs"]
    assert worker_sd["names"] == ["worker"]
    assert worker_sd["port"] == int(service_environment("worker")["DOCINGEST_METRICS_PORT"])


def test_grafana_dashboard_is_provisioned_from_the_prometheus_source() -> None:
    dashboard = json.loads((DEPLOY_DIR / "grafana-dashboard.json").read_text())
    datasource = yaml.safe_load(
        (DEPLOY_DIR / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text()
    )["datasources"][0]
    targets = [t for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(targets) >= 10
    for target in targets:
        assert target["datasource"]["uid"] == datasource["uid"]
        assert "docingest_" in target["expr"] or "up{" in target["expr"]


def test_dockerfile_is_multistage_unprivileged_and_secret_free() -> None:
    text = DOCKERFILE.read_text()
    stages = re.findall(r"^FROM\s+\S+\s+AS\s+(\w+)", text, flags=re.MULTILINE)
    assert len(stages) >= 2
    final = text.split(f"AS {stages[-1]}")[1]
    (user,) = re.findall(r"^USER\s+(\S+)", final, flags=re.MULTILINE)
    assert user.split(":")[0] not in ("0", "root")
    assert re.search(r"^HEALTHCHECK .*\n?.*CMD", final, flags=re.MULTILINE)
    assert re.search(r'^ENTRYPOINT \["docingest"\]', final, flags=re.MULTILINE)
    for line in re.findall(r"^(?:ARG|ENV)\s.*$", text, flags=re.MULTILINE):
        assert not re.search(r"KEY|SECRET|PASSWORD|TOKEN", line, flags=re.IGNORECASE), line


def test_docker_context_holds_what_the_dockerfile_copies_and_no_env_file() -> None:
    patterns = [
        line.strip()
        for line in (REPO_DIR / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert patterns[0] == "*", "the context is a whitelist"
    allowed = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    sources = re.findall(r"^COPY (?!--from)(.+) \S+$", DOCKERFILE.read_text(), flags=re.MULTILINE)
    for source in (s for line in sources for s in line.split()):
        assert (REPO_DIR / source).exists(), source
        assert source.rstrip("/") in allowed, f"{source} is excluded by .dockerignore"
    assert ".env" not in allowed and ".env.example" not in allowed
    assert ".env" in (REPO_DIR / ".gitignore").read_text().split()


def test_docker_compose_config_validates(tmp_path: Path) -> None:
    binary = shutil.which("docker-compose")
    if binary is None:
        if os.environ.get("REQUIRE_DOCKER_COMPOSE"):
            pytest.fail("docker-compose is not installed (CI installs Debian's package)")
        pytest.skip("docker-compose is not installed (apt-get install docker-compose)")
    # As a user would run it: the compose file in its directory, .env copied from the example.
    shutil.copy(COMPOSE_FILE, tmp_path / "docker-compose.yml")
    shutil.copy(ENV_EXAMPLE, tmp_path / ".env")
    (tmp_path / "deploy").symlink_to(DEPLOY_DIR)
    result = subprocess.run(
        [binary, "config", "-q"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


POSTGRES_COMPOSE = DEPLOY_DIR / "docker-compose.postgres.yml"


def test_the_postgres_option_points_every_docingest_process_at_pgvector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    override = yaml.safe_load(POSTGRES_COMPOSE.read_text())
    postgres = override["services"]["postgres"]
    assert re.fullmatch(r"pgvector/pgvector:\d+\.\d+\.\d+-pg\d+", postgres["image"])
    assert postgres["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    assert any(mount.endswith(":/var/lib/postgresql/data") for mount in postgres["volumes"])
    variables = {"POSTGRES_PASSWORD": "s3cret"}
    for name in DOCINGEST_SERVICES:
        spec = override["services"][name]
        assert spec["depends_on"]["postgres"] == {"condition": "service_healthy"}
        for key in [k for k in os.environ if k.startswith("DOCINGEST_")]:
            monkeypatch.delenv(key)
        merged = service_environment(name) | {
            key: re.sub(r"\$\{POSTGRES_PASSWORD:\?[^}]*\}", variables["POSTGRES_PASSWORD"], value)
            for key, value in spec["environment"].items()
        }
        for key, value in merged.items():
            monkeypatch.setenv(key, value)
        settings = Settings()
        assert settings.database_url is not None and not settings.qdrant_url
        assert settings.database_url.get_secret_value() == (
            "postgresql://docingest:s3cret@postgres:5432/docingest"
        )
        assert settings.shared_store


def test_docker_compose_config_validates_with_the_postgres_option(tmp_path: Path) -> None:
    binary = shutil.which("docker-compose")
    if binary is None:
        if os.environ.get("REQUIRE_DOCKER_COMPOSE"):
            pytest.fail("docker-compose is not installed (CI installs Debian's package)")
        pytest.skip("docker-compose is not installed (apt-get install docker-compose)")
    shutil.copy(COMPOSE_FILE, tmp_path / "docker-compose.yml")
    shutil.copy(ENV_EXAMPLE, tmp_path / ".env")
    with (tmp_path / ".env").open("a") as env:
        env.write("POSTGRES_PASSWORD=s3cret\n")
    (tmp_path / "deploy").symlink_to(DEPLOY_DIR)
    result = subprocess.run(
        [binary, "-f", "docker-compose.yml", "-f", "deploy/docker-compose.postgres.yml", "config"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    merged = yaml.safe_load(result.stdout)
    assert "postgres" in merged["services"]
    api = merged["services"]["api"]
    assert api["environment"]["DOCINGEST_DATABASE_URL"].startswith("postgresql://docingest:")
    assert set(api["depends_on"]) >= {"redis", "postgres"}
