"""Request planning: fewest in-order requests under count and token limits; long inputs cut."""

from __future__ import annotations

import random
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
import tiktoken

from docingest.pipeline.embedders.batching import (
    Batch,
    TokenCounter,
    iter_batches,
    plan_batches,
    token_counter,
)
from docingest.pipeline.embedders.models import KNOWN_MODELS


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return token_counter("text-embedding-3-small")


@pytest.fixture(scope="module")
def paragraphs(corpus_dir: Path) -> list[str]:
    text = (corpus_dir / "txt" / "gutenberg-war-and-peace.txt").read_text(encoding="utf-8")
    return [p.strip() for p in text.split("\n\n") if len(p.strip()) > 40][:400]


def fewest_requests(tokens: list[int], *, max_batch: int, max_batch_tokens: int) -> int:
    """The optimum by exhaustive dynamic programming over every in-order packing."""

    @cache
    def best(start: int) -> int:
        if start == len(tokens):
            return 0
        options = []
        total = 0
        for end in range(start, min(start + max_batch, len(tokens))):
            total += tokens[end]
            if total > max_batch_tokens:
                break
            options.append(1 + best(end + 1))
        return min(options)

    return best(0)


def flatten(batches: list[Batch]) -> list[int]:
    return [piece.source for batch in batches for piece in batch.pieces]


def test_the_offline_encoding_is_the_real_cl100k_base(counter: TokenCounter) -> None:
    # Known counts of cl100k_base (what OpenAI's tokenizer page shows for these strings).
    assert counter.encoding.n_vocab == 100277
    assert counter.encoding.encode_ordinary("hello world") == [15339, 1917]
    assert counter.count("tiktoken is great!") == 6


def test_count_limit_gives_ceil_n_over_max_batch(counter: TokenCounter) -> None:
    texts = [f"input number {i}" for i in range(95)]
    batches = plan_batches(texts, counter=counter, max_batch=10, max_batch_tokens=300_000)
    assert [len(batch.pieces) for batch in batches] == [10] * 9 + [5]
    assert flatten(batches) == list(range(95))
    assert [piece.text for batch in batches for piece in batch.pieces] == texts


def test_token_budget_splits_batches_and_each_stays_within_it(
    counter: TokenCounter, paragraphs: list[str]
) -> None:
    tokens = [counter.count(text) for text in paragraphs]
    budget = 2000
    batches = plan_batches(paragraphs, counter=counter, max_batch=2048, max_batch_tokens=budget)
    assert len(batches) > 1
    for batch in batches:
        assert batch.tokens == sum(counter.count(piece.text) for piece in batch.pieces)
        assert batch.tokens <= budget
    assert flatten(batches) == list(range(len(paragraphs)))
    assert len(batches) == fewest_requests(tokens, max_batch=2048, max_batch_tokens=budget)


@pytest.mark.parametrize("seed", range(30))
def test_greedy_packing_is_optimal_for_random_sizes(seed: int) -> None:
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    texts = [" ".join(rng.choices(words, k=rng.randint(1, 40))) for _ in range(rng.randint(1, 60))]
    counter = token_counter("text-embedding-3-small")
    max_batch = rng.randint(1, 12)
    max_batch_tokens = rng.randint(60, 400)
    tokens = [counter.count(text) for text in texts]
    batches = plan_batches(
        texts, counter=counter, max_batch=max_batch, max_batch_tokens=max_batch_tokens
    )
    assert flatten(batches) == list(range(len(texts)))
    assert all(len(b.pieces) <= max_batch and b.tokens <= max_batch_tokens for b in batches)
    assert len(batches) == fewest_requests(
        tokens, max_batch=max_batch, max_batch_tokens=max_batch_tokens
    )


def test_batches_are_yielded_as_soon_as_full(counter: TokenCounter) -> None:
    def texts() -> Iterator[str]:
        for i in range(100):
            if i == 25:
                raise RuntimeError("planning went past the third batch")
            yield f"text {i}"

    batches = iter_batches(texts(), counter=counter, max_batch=10, max_batch_tokens=10_000)
    assert [len(next(batches).pieces) for _ in range(2)] == [10, 10]
    with pytest.raises(RuntimeError, match="past the third batch"):
        next(batches)


def test_long_input_is_cut_into_windows_within_the_limit(
    counter: TokenCounter, paragraphs: list[str]
) -> None:
    long_text = "\n\n".join(paragraphs)
    total = counter.count(long_text)
    limit = 1000
    assert total > 5 * limit
    batches = plan_batches(
        ["short one", long_text, "short two"],
        counter=counter,
        max_batch=2048,
        max_batch_tokens=300_000,
        max_input_tokens=limit,
    )
    pieces = [piece for batch in batches for piece in batch.pieces]
    windows = [piece for piece in pieces if piece.source == 1]
    assert len(windows) >= total // limit
    assert "".join(window.text for window in windows) == long_text
    assert all(counter.count(w.text) == w.tokens <= limit for w in windows)
    assert [w.last for w in windows] == [False] * (len(windows) - 1) + [True]
    assert [piece.source for piece in pieces] == [0] + [1] * len(windows) + [2]


def test_windows_never_cut_inside_a_character(counter: TokenCounter) -> None:
    # CJK and emoji take several tokens per character in cl100k_base.
    text = "日本語のテキスト🙂🙃 ë̃ " * 400
    windows = counter.pieces(text, source=0, limit=50)
    assert len(windows) > 10
    assert "".join(window.text for window in windows) == text
    assert all(0 < window.tokens <= 50 for window in windows)
    assert all("\ufffd" not in window.text for window in windows)


def test_an_input_over_the_batch_budget_is_cut_to_fit_it(counter: TokenCounter) -> None:
    text = "word " * 3000
    batches = plan_batches([text], counter=counter, max_batch=10, max_batch_tokens=700)
    assert all(batch.tokens <= 700 for batch in batches)
    assert "".join(piece.text for batch in batches for piece in batch.pieces) == text


def test_empty_input_is_refused(counter: TokenCounter) -> None:
    with pytest.raises(ValueError, match="input 1 is empty"):
        plan_batches(["a", "", "b"], counter=counter, max_batch=10, max_batch_tokens=100)


def test_known_models_table() -> None:
    assert KNOWN_MODELS["text-embedding-3-small"].dimensions == 1536
    assert KNOWN_MODELS["text-embedding-3-large"].dimensions == 3072
    assert KNOWN_MODELS["text-embedding-ada-002"].dimensions == 1536
    assert not KNOWN_MODELS["text-embedding-ada-002"].shortenable
    assert {spec.max_input_tokens for spec in KNOWN_MODELS.values()} == {8191}


def test_unknown_models_are_estimated_with_cl100k(counter: TokenCounter) -> None:
    estimate = token_counter("nomic-embed-text")
    assert estimate.encoding is counter.encoding
    assert estimate.count("hello world") == 2
    assert isinstance(estimate.encoding, tiktoken.Encoding)
