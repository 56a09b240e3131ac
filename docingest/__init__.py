"""The `docingest` command line, and helpers for programs that use the service.

`verify_signature` checks a webhook delivery (`docingest.webhooks`, standard library only).
"""

from docingest.webhooks import InvalidSignature, verify_signature

__all__ = ["InvalidSignature", "verify_signature"]
