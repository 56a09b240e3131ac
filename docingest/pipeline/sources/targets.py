"""The address rule for every URL a source reads (an S3 endpoint, a web page): the webhooks'
rule and parser (`docingest.pipeline.webhooks.urls`, over the one guard in
`docingest.common.addresses`): http(s), a host that resolves, and only to public addresses
unless `sources_allow_private`."""

from __future__ import annotations

from docingest.pipeline.errors import InvalidSource, InvalidWebhookUrl, WebhookUrlNotAllowed
from docingest.pipeline.settings import Settings
from docingest.pipeline.webhooks.urls import Target, check_url


def check_source_url(url: str, settings: Settings, *, what: str) -> Target:
    """The checked target of `url`; `InvalidSource` unless a source may read it (`what` names
    it in the message)."""
    try:
        return check_url(url, allow_private=settings.sources_allow_private)
    except WebhookUrlNotAllowed as exc:
        reason = exc.message.split(" resolves to ", 1)[-1].split(";", 1)[0]
        raise InvalidSource(
            f"The {what} {url!r} resolves to {reason}; sources may only read public addresses "
            "(an operator may allow private ones with DOCINGEST_SOURCES_ALLOW_PRIVATE)."
        ) from exc
    except InvalidWebhookUrl as exc:
        message = exc.message.replace("A webhook URL", f"The {what}").replace(
            "The webhook URL", f"The {what}"
        )
        raise InvalidSource(
            message.replace("; use the webhook's secret to authenticate", "")
        ) from exc
