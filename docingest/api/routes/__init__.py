"""One router per resource of the HTTP contract (docs/reference/http-api.md)."""
