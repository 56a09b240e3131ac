"""Helpers shared by the tests (and the benchmarks that reuse them), one module a job.

- `paths`: where the corpus, the examples and the repository are.
- `waiting`: `wait_until`, the one polling loop (terminal statuses: `docingest.pipeline.keys`).
- `redis_db`: the test Redis (DB 15), a unique key prefix per test and its clean-up.
- `settings`: `Settings` of an in-process test deployment.
- `jobs`: job specs and waiting on job state.
- `embedding_server`: the fake OpenAI-compatible embedding server (real HTTP).
- `uvicorn_server`: an ASGI app under real uvicorn in a thread.
- `api_app`: the real API app under uvicorn, and the contract's error shape.
- `docingest_service`: the real `docingest` commands as subprocesses.
- `http_client`: an HTTP client of a running service for the end-to-end tests.
- `compose`: docker-compose.yml and .env.example read as a deployment would.
- `browser`, `web_page`: headless Chromium and what the browser tests do on the page.
- `pdf_files`, `docx_files`, `hostile_files`: documents built at test time.
- `hostile_service`, `crash`, `load`, `load_checks`: the reliability suite's deployments.
"""
