"""The HTTP API: FastAPI app, routes and the mapping of pipeline errors to statuses."""
