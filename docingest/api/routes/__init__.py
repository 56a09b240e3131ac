"""One router per resource of the HTTP contract (../shared/API.md)."""
