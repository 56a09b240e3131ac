"""The check that an endpoint serves the index's model before it embeds anything.

Vectors of two models share no space, so a fallback that serves another model would corrupt
the index without an error. Before an endpoint's first batch (and on start,
`OpenAICompatibleEmbedder.check_endpoints`), it embeds `PROBE_TEXT`, and is refused for good
when its reply

- has vectors of another size than the index's;
- names a model that is not the one asked for (a reply may name a revision of it, as
  OpenAI's `text-embedding-ada-002-v2` does for `text-embedding-ada-002`);
- is a fallback's vector that is not the primary's for the same text (cosine below
  `SAME_MODEL_COSINE`), when the primary has answered its own probe: another model under
  the same name. While the primary has not answered, this part cannot be checked.

A refusal by the endpoint itself (404 for an unknown model, 401 for a wrong key) refuses it
too; one that does not answer (down, timing out, 429) stays unchecked and is tried again
before its next batch.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import numpy as np
import openai

from docingest.pipeline.embedders.backoff import BadReply, Reply, describe, is_retryable
from docingest.pipeline.embedders.endpoints import Endpoint, cosine

log = logging.getLogger(__name__)

PROBE_TEXT = "dimensions probe"
"""What an endpoint is asked to embed when it is checked (and an unknown size is learnt)."""
SAME_MODEL_COSINE = 0.99
"""Least cosine between a fallback's probe vector and the primary's for the same text
(replicas of one model agree far closer than that; two models' vectors share no space)."""


class EndpointRefused(Exception):
    """The endpoint serves something else than the index's model; never retried there."""


class SameModelCheck:
    """Checks each endpoint once per process; thread-safe."""

    def __init__(
        self, model: str, *, probe: Callable[[Endpoint], Reply], size: Callable[[int], int]
    ) -> None:
        """`probe(endpoint)` embeds `PROBE_TEXT` there; `size(observed)` is the index's
        vector size (learnt from `observed` while unknown)."""
        self.model = model
        self._probe = probe
        self._size = size
        self._lock = threading.Lock()
        self._reference: np.ndarray | None = None  # the primary's probe vector

    def check(self, endpoint: Endpoint) -> str | None:
        """None once `endpoint` is checked, else why it cannot be used now."""
        try:
            self.require(endpoint)
        except EndpointRefused as exc:
            return str(exc)
        except Exception as exc:
            return describe(exc)
        return None

    def require(self, endpoint: Endpoint) -> None:
        """Return once `endpoint` is checked; raise `EndpointRefused` if it never may be
        used, or the probe's error (retryable: it did not answer) if it cannot tell yet."""
        with endpoint.lock:
            if endpoint.checked:
                return
            if endpoint.refused is not None:
                raise EndpointRefused(endpoint.refused)
            try:
                reply = self._probe(endpoint)
            except Exception as exc:
                if isinstance(exc, openai.APIStatusError | BadReply) and not is_retryable(exc):
                    endpoint.refuse(f"it answered the check for {self.model}: {describe(exc)}")
                    raise EndpointRefused(endpoint.refused) from exc
                log.warning("embedding endpoint %s (%s) could not be checked: %s",
                            endpoint.label, endpoint.url, describe(exc))  # fmt: skip
                raise
            if (reason := self.mismatch(endpoint, reply)) is not None:
                endpoint.refuse(reason)
                raise EndpointRefused(reason)
            endpoint.breaker.succeeded()
            endpoint.checked = True
            log.info("embedding endpoint %s (%s) serves %s with %d dimensions",
                     endpoint.label, endpoint.url, self.model, reply.vectors.shape[1])  # fmt: skip

    def mismatch(self, endpoint: Endpoint, reply: Reply) -> str | None:
        """Why a probe's reply shows another model than the index's, or None."""
        observed = reply.vectors.shape[1]
        expected = self._size(observed)
        if observed != expected:
            return (
                f"it answers {self.model} with {observed}-dimensional vectors; the index holds "
                f"{expected}-dimensional ones"
            )
        if reply.model is not None and not reply.model.startswith(self.model):
            return f"it answers {self.model} with vectors of {reply.model}"
        vector = reply.vectors[0]
        with self._lock:
            if not endpoint.is_fallback:
                self._reference = vector
                return None
            reference = self._reference
        if reference is not None and (similarity := cosine(vector, reference)) < SAME_MODEL_COSINE:
            return (
                f"its vector for a probe text is not the primary's (cosine {similarity:.3f}): "
                f"another model under the name {self.model}"
            )
        return None
