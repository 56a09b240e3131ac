"""The long-running commands: `serve` (embedded default), `api` and `worker` (scaled out).

Each checks its dependencies before it starts and exits with one clear line when a bundled
data file does not match its pinned sha256, Redis cannot be reached or the store cannot be
used, rather than starting and failing every request. A store server (PostgreSQL, Qdrant) that
does not answer yet is the exception: in compose, Kubernetes or systemd the database often
comes up after us, so it is logged, `/readyz` says why and jobs wait for it.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import uvicorn
from celery import Celery
from celery.signals import worker_ready, worker_shutdown

from docingest._core import DEFAULT_BASE_URL
from docingest.api.app import create_app
from docingest.api.errors import JsonErrorProtocol
from docingest.common.urls import redact_url
from docingest.pipeline.embedders.artifacts import verify_bundled_files
from docingest.pipeline.errors import DependencyUnavailable, IngestError
from docingest.pipeline.isolation.parent import start_fork_servers
from docingest.pipeline.keys import HOUSEKEEPING_QUEUE, INGEST_QUEUE
from docingest.pipeline.log import configure_logging
from docingest.pipeline.services import Services
from docingest.pipeline.settings import Settings
from docingest.pipeline.webhooks.dispatcher import Dispatcher
from docingest.redis_server import RedisBinary, RedisStartError, ensure_redis
from docingest.workers import context
from docingest.workers import metrics as worker_metrics
from docingest.workers.app import create_celery_app
from docingest.workers.embedded import EmbeddedWorker
from docingest.workers.sources import SourceScheduler
from docingest.workers.ticker import HousekeepingTicker

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

log = logging.getLogger("docingest")

GRACEFUL_SHUTDOWN_SECONDS = 30
"""Open requests get this long to finish when the server is stopped."""
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
CELERY_PER_TASK_LOGGERS = ("celery.worker.strategy", "celery.app.trace")
"""Celery's "received" / "succeeded" lines, one pair per task: quiet in `serve`, whose terminal
also shows the seed summary (every housekeeping sweep would print two lines)."""


class _Server(uvicorn.Server):
    """uvicorn's server, minus re-raising the stop signal after shutdown.

    uvicorn re-raises a captured SIGTERM/SIGINT once it has stopped, which kills the process
    before `serve` can stop its in-process worker; here the signal only asks it to exit.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


class StartupError(Exception):
    """A dependency is unreachable or misconfigured; the message says which and what to do."""

    exit_status = 1


class _BadWorkerOptions(StartupError):
    """The worker's command-line options cannot work with this store (a usage error)."""

    exit_status = 2


def check_dependencies(services: Services, *, store: bool) -> None:
    """Raise `StartupError` unless the bundled data files are intact and Redis (and, if
    `store`, Qdrant) answers."""
    try:
        verify_bundled_files()
    except IngestError as exc:
        raise StartupError(exc.message) from exc
    settings = services.settings
    problem = services.redis_ok()
    if problem is not None:
        raise StartupError(
            f"Redis at {redact_url(settings.redis_url)} does not answer ({problem}); start it or "
            "set DOCINGEST_REDIS_URL."
        )
    if store:
        try:
            services.store.ping()
        except IngestError as exc:
            where = settings.qdrant_url or f"embedded store in {settings.data_dir / 'edge'}"
            what = f"Qdrant ({where})"
            if settings.database_url is not None:
                what = f"PostgreSQL ({redact_url(settings.database_url.get_secret_value())})"
            if not (settings.shared_store and isinstance(exc, DependencyUnavailable)):
                raise StartupError(f"{what} is not usable: {exc.message}") from exc
            log.warning("%s does not answer yet, starting anyway (/readyz answers 503 and jobs "
                        "wait for it): %s", what, exc.message)  # fmt: skip
    check_embedding_endpoints(services)


def check_embedding_endpoints(services: Services) -> None:
    """With fallback endpoints: check each serves the default model (logged); raise
    `StartupError` when every one of them is refused, since none could ever be used."""
    try:
        outcome = services.check_embedding_endpoints()
    except IngestError as exc:
        raise StartupError(f"The embedding endpoints cannot be used: {exc.message}") from exc
    if outcome and all(state.startswith("refused") for state in outcome.values()):
        details = "; ".join(f"{label} {state}" for label, state in outcome.items())
        raise StartupError(f"No embedding endpoint serves the configured model: {details}")


def serve(settings: Settings, *, on_ready: Callable[[str], None] | None = None) -> int:
    """Run the API, an in-process worker and the housekeeping ticker in this process.

    Uses the Redis at `redis_url`, starting a private one when none answers there (local URLs
    only). `on_ready(base_url)` runs in a thread once the server accepts requests.
    """
    configure_logging("INFO", log_format=settings.log_format)
    for per_task in CELERY_PER_TASK_LOGGERS:  # the job runner logs one line per job already
        logging.getLogger(per_task).setLevel(logging.WARNING)
    try:
        with ensure_redis(settings.redis_url, data_dir=settings.data_dir) as redis_handle:
            if redis_handle.binary is not None:
                _report_private_redis(redis_handle.binary, redis_handle.pid, settings)
            return _serve(settings, on_ready=on_ready)
    except (RedisStartError, StartupError) as exc:
        print(f"docingest serve: {exc}", file=sys.stderr)
        return 1


def _report_private_redis(binary: RedisBinary, pid: int | None, settings: Settings) -> None:
    """Say which redis-server `serve` started, and warn when it is an outdated one."""
    log.info("started a private Redis: %s, pid %s, data in %s", binary, pid,
             settings.data_dir / "redis")  # fmt: skip
    if binary.outdated:
        log.warning(
            "%s predates the fixes for CVE-2024-46981 and CVE-2025-49844; it listens on this "
            "machine only, but install redis-server >= 7 on PATH (Debian: apt-get install "
            "redis-server) and serve will prefer it",
            binary,
        )


def _serve(settings: Settings, *, on_ready: Callable[[str], None] | None) -> int:
    services = Services(settings, owns_store=True)
    try:
        check_dependencies(services, store=True)
        services.default_index_config()  # load the default model now, not on the first upload
    except BaseException:
        services.close()
        raise
    context.install(services)
    if settings.isolate_extraction:
        start_fork_servers(settings.worker_concurrency)
    celery_app = create_celery_app(settings)
    worker = EmbeddedWorker(celery_app, concurrency=settings.worker_concurrency)
    ticker = HousekeepingTicker(celery_app, services)
    dispatcher = Dispatcher(services.outbox, settings) if settings.webhook_dispatcher else None
    sources = SourceScheduler(celery_app, services) if settings.source_scheduler else None
    app = create_app(services=services, celery=celery_app)
    server = _Server(_http_config(app, settings, log_level="warning"))
    base_url = f"http://{settings.host}:{settings.port}"
    worker.start()
    ticker.start()
    if dispatcher is not None:
        dispatcher.start()
    if sources is not None:
        sources.start()
    if on_ready is not None:
        threading.Thread(
            target=_when_started, args=(server, on_ready, base_url), daemon=True
        ).start()
    print(f"docingest: serving on {base_url} (data in {settings.data_dir})", file=sys.stderr)
    if base_url != DEFAULT_BASE_URL:  # a client without DOCINGEST_PORT would look at :8000
        print(
            f"docingest: client commands need `docingest --url {base_url} ...` "
            f"(or DOCINGEST_URL={base_url})",
            file=sys.stderr,
        )
    ocr_problem = ocr_unavailable(settings)
    if ocr_problem is not None:
        print(
            f"docingest: OCR is off, so scans and images fail with no_text_found: {ocr_problem}",
            file=sys.stderr,
        )
    try:
        server.run()
    finally:
        if sources is not None:
            sources.stop()
        if dispatcher is not None:
            dispatcher.stop()
        ticker.stop()
        worker.stop()
        context.shutdown()
    return 0


def ocr_unavailable(settings: Settings) -> str | None:
    """Say why this machine cannot OCR (None when it can), as a fresh clone without Debian's
    Tesseract finds out only when a scan fails."""
    if settings.ocr == "off":
        return "DOCINGEST_OCR=off."
    from docingest.pipeline.extract.ocr import OcrOptions, tessdata_dir

    try:
        import tesserocr  # noqa: F401
    except ImportError:
        return "the tesserocr package is not installed (reinstall docingest with its dependencies)."
    try:
        tessdata_dir(OcrOptions.from_settings(settings))
    except IngestError as exc:
        return exc.message.removeprefix("This file needs OCR, but ")
    return None


def _when_started(server: uvicorn.Server, callback: Callable[[str], None], base_url: str) -> None:
    import time

    while not server.started and not server.should_exit:
        time.sleep(0.05)
    if server.started:
        try:
            callback(base_url)
        except Exception:
            log.exception("the start-up callback failed")


def _uvicorn_log_config(settings: Settings) -> dict[str, Any] | None:
    """uvicorn's own handlers for text logs; none for JSON, so its lines reach ours."""
    return None if settings.log_format == "json" else uvicorn.config.LOGGING_CONFIG


def run_api(settings: Settings) -> int:
    """Run the API alone; workers run elsewhere (`docingest worker`)."""
    configure_logging("INFO", log_format=settings.log_format)
    services = Services(settings, owns_store=settings.shared_store)
    try:
        check_dependencies(services, store=services.owns_store)
    except StartupError as exc:
        print(f"docingest api: {exc}", file=sys.stderr)
        return 1
    finally:
        services.close()
    if not services.owns_store:
        log.warning(
            "embedded store owned by the worker: this API only accepts uploads and reports jobs; "
            "searches and document listings need `docingest serve`, DOCINGEST_QDRANT_URL or "
            "DOCINGEST_DATABASE_URL"
        )
    app = create_app(settings, owns_store=services.owns_store)
    uvicorn.Server(_http_config(app, settings, log_level="info")).run()
    return 0


def _http_config(app: Any, settings: Settings, *, log_level: str) -> uvicorn.Config:
    """uvicorn's settings for `serve` and `api` alike: address, logging, graceful stop."""
    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        log_config=_uvicorn_log_config(settings),
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        http=JsonErrorProtocol,
    )


def run_worker(
    settings: Settings,
    *,
    concurrency: int | None = None,
    pool: str | None = None,
    max_tasks_per_child: int | None = None,
    loglevel: str = "INFO",
) -> int:
    """Run a Celery worker on the ingest and housekeeping queues.

    With the embedded store the worker owns its directory, so it is one process: a thread pool
    (default) or prefork with one child (the child owns the store; a crash costs the child, not
    the worker). With a Qdrant server it defaults to prefork. With `metrics_port` set, the
    main process serves the metrics of every pool process there (`docingest/workers/metrics.py`).
    """
    configure_logging(loglevel, log_format=settings.log_format)
    try:
        pool, concurrency = _worker_pool(settings, pool, concurrency or settings.worker_concurrency)
        _open_worker_clients(settings, pool)
        metrics_server = _start_worker_metrics(settings, pool)
    except StartupError as exc:
        print(f"docingest worker: {exc}", file=sys.stderr)
        return exc.exit_status
    celery_app = create_celery_app(settings)
    _tick_while_running(celery_app, settings, metrics_server)
    argv = _worker_argv(
        settings,
        pool=pool,
        concurrency=concurrency,
        loglevel=loglevel,
        max_tasks_per_child=max_tasks_per_child,
    )
    try:
        celery_app.worker_main(argv)
    finally:
        context.shutdown()
    return 0


def _worker_pool(settings: Settings, pool: str | None, concurrency: int) -> tuple[str, int]:
    """The pool kind and size to run, or `StartupError` if they cannot work here."""
    local = not settings.shared_store
    if local and pool == "prefork" and concurrency != 1:
        raise _BadWorkerOptions(
            "the embedded store allows one process per directory; use --pool threads, --pool "
            "prefork --concurrency 1, or set DOCINGEST_QDRANT_URL to a Qdrant server or "
            "DOCINGEST_DATABASE_URL to PostgreSQL."
        )
    pool = pool or ("threads" if local else "prefork")
    if settings.metrics_port is not None:
        problem = worker_metrics.setup_problem(pool)
        if problem is not None:
            raise StartupError(problem)
    return pool, concurrency


def _open_worker_clients(settings: Settings, pool: str) -> None:
    """Check Redis and Qdrant answer; keep the clients for a thread pool, not for prefork."""
    context.configure(owns_store=True)
    probe = Services(settings, owns_store=True)
    try:
        check_dependencies(probe, store=True)
    except StartupError:
        probe.close()
        raise
    if pool == "prefork":
        probe.close()  # children build their own clients (and own the local store); none
        # may cross a fork, and the parent must not hold the embedded store's lock
    else:
        context.install(probe)  # one process: keep the clients (and the store) it opened


def _start_worker_metrics(settings: Settings, pool: str) -> WSGIServer | None:
    """Serve the metrics of every pool process when `metrics_port` is set."""
    if settings.metrics_port is None:
        return None
    try:
        server = worker_metrics.serve(settings.metrics_port, host=settings.host)
    except OSError as exc:
        context.shutdown()
        raise StartupError(
            f"cannot serve metrics on {settings.host}:{settings.metrics_port} "
            f"({exc.strerror or exc}); set DOCINGEST_METRICS_PORT to a free port"
        ) from exc
    worker_metrics.install(pool)
    log.info("metrics on http://%s:%s/metrics", settings.host, settings.metrics_port)
    return server


def _tick_while_running(
    celery_app: Celery, settings: Settings, metrics_server: WSGIServer | None
) -> None:
    """Run the housekeeping ticker and the webhook dispatcher from worker start to shutdown,
    then stop the metrics."""
    tickers: list[HousekeepingTicker] = []
    dispatchers: list[Dispatcher] = []
    schedulers: list[SourceScheduler] = []

    def start_ticker(**_: Any) -> None:
        services = context.current(settings)
        ticker = HousekeepingTicker(celery_app, services)
        ticker.start()
        tickers.append(ticker)
        if settings.webhook_dispatcher:
            dispatcher = Dispatcher(services.outbox, settings)
            dispatcher.start()
            dispatchers.append(dispatcher)
        if settings.source_scheduler:
            scheduler = SourceScheduler(celery_app, services)
            scheduler.start()
            schedulers.append(scheduler)

    def stop_ticker(**_: Any) -> None:
        for scheduler in schedulers:
            scheduler.stop()
        for dispatcher in dispatchers:
            dispatcher.stop()
        for ticker in tickers:
            ticker.stop()
        if metrics_server is not None:
            metrics_server.shutdown()

    worker_ready.connect(start_ticker, weak=False)
    worker_shutdown.connect(stop_ticker, weak=False)


def _worker_argv(
    settings: Settings,
    *,
    pool: str,
    concurrency: int,
    loglevel: str,
    max_tasks_per_child: int | None,
) -> list[str]:
    """The `celery worker` command line."""
    argv = [
        *(["--quiet"] if settings.log_format == "json" else []),  # no plain-text banner
        "worker",
        f"--pool={pool}",
        f"--concurrency={concurrency}",
        f"--queues={INGEST_QUEUE},{HOUSEKEEPING_QUEUE}",
        f"--loglevel={loglevel}",
        "--hostname=docingest@%h",
        "--without-mingle",
        "--without-gossip",
    ]
    if max_tasks_per_child:
        argv.append(f"--max-tasks-per-child={max_tasks_per_child}")
    return argv
