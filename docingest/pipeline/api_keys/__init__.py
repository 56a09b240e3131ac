"""API keys made at run time, kept hashed in Redis so every API process reads the same ones."""

from docingest.pipeline.api_keys.records import (
    CACHE_SECONDS,
    ROLES,
    SECRET_PREFIX,
    ApiKeyStore,
    KeyRecord,
    Role,
    check_grant,
    digest_of,
)

__all__ = [
    "CACHE_SECONDS",
    "ROLES",
    "SECRET_PREFIX",
    "ApiKeyStore",
    "KeyRecord",
    "Role",
    "check_grant",
    "digest_of",
]
