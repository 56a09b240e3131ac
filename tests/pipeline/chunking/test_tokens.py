"""Length functions: characters, and tokens of the bundled MiniLM tokenizer."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from docingest.pipeline.chunking import chunk_text
from docingest.pipeline.chunking.tokens import (
    DEFAULT_TOKENIZER_PATH,
    MAX_TOKEN_CHARS,
    TokenCounter,
    char_length,
    length_function_for,
)
from docingest.pipeline.settings import ChunkUnit


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter()


@pytest.fixture(scope="module")
def rfc_text(corpus_dir: Path) -> str:
    return (corpus_dir / "txt" / "rfc6455-websocket.txt").read_text(encoding="utf-8")


def test_char_length_counts_code_points() -> None:
    assert char_length("naïve 東京 😀") == 10
    assert char_length.batch(["ab", "", "東京"]) == [2, 0, 2]
    spans = char_length.measure_spans("hello world", [(0, 11)])
    assert spans(6, 11) == 5
    assert spans.end_within(2, 4) == 6
    assert spans.start_within(11, 5) == 6


def test_token_counter_counts_wordpieces_without_special_tokens(counter: TokenCounter) -> None:
    # BertPreTokenizer splits punctuation off: hello , world !
    assert counter("Hello, world!") == 4
    assert counter("") == 0
    assert counter.batch(["Hello, world!", "websocket"]) == [
        4,
        len(counter.tokenizer.encode("websocket", add_special_tokens=False).ids),
    ]


def test_token_counter_neither_truncates_nor_pads(counter: TokenCounter) -> None:
    # The bundled tokenizer.json asks for truncation and padding to 128; both are switched off.
    words = " ".join(["protocol"] * 300)
    assert counter(words) == 300
    assert counter("protocol") == 1


def test_a_long_unknown_word_counts_once_per_max_token_chars(counter: TokenCounter) -> None:
    # WordPiece maps a word over 100 characters to one [UNK]: counted by its characters.
    word = "x" * 480
    assert len(counter.tokenizer.encode(word, add_special_tokens=False).ids) == 1
    assert counter(word) == 480 // MAX_TOKEN_CHARS
    assert counter(f"fuel {word} valve") == 2 + 480 // MAX_TOKEN_CHARS
    spans = counter.measure_spans(word, [(0, len(word))])
    assert spans(0, len(word)) == counter(word)
    assert spans.end_within(0, 3) == 3 * MAX_TOKEN_CHARS  # a cut inside the word is possible


def test_token_chunks_of_unknown_words_stay_within_the_character_bound() -> None:
    text = ("x" * 480 + " fuel valve ") * 200
    chunks = chunk_text(text, chunk_size=512, chunk_overlap=0, length=TokenCounter())
    assert len(chunks) > 1
    assert all(len(chunk.text) <= MAX_TOKEN_CHARS * 512 for chunk in chunks)
    assert all(chunk.text == text[chunk.start : chunk.end] for chunk in chunks)


def test_span_lengths_match_tokenising_each_span_alone(
    counter: TokenCounter, rfc_text: str
) -> None:
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", rfc_text) if p.strip()][:120]
    text = "\n\n".join(paragraphs)
    regions, position = [], 0
    for paragraph in paragraphs:
        regions.append((position, position + len(paragraph)))
        position += len(paragraph) + 2
    spans = counter.measure_spans(text, regions)
    word_starts = [m.start() for m in re.finditer(r"(?<=\s)\S", text)]
    word_ends = [m.end() for m in re.finditer(r"\S(?=\s)", text)]
    rng = random.Random(6455)
    for _ in range(300):
        start = rng.choice(word_starts)
        end = rng.choice([e for e in word_ends[-400:] if e > start] or [len(text)])
        assert spans.exact_at(start) and spans.exact_at(end)
        assert spans(start, end) == counter(text[start:end])
    # The budget helpers agree with the count.
    for start in rng.sample(word_starts, 50):
        end = spans.end_within(start, 40)
        assert spans(start, end) <= 40
        if end < len(text):
            assert spans(start, end + 1) > 40
        back = spans.start_within(end, 25)
        assert spans(back, end) <= 25 < spans(back - 1, end)


def test_exact_only_at_word_boundaries(counter: TokenCounter) -> None:
    text = "alpha beta。gamma\x0cdelta"
    spans = counter.measure_spans(text, [(0, len(text))])
    assert spans.exact_at(6)  # after a space
    assert spans.exact_at(11)  # after CJK punctuation
    assert not spans.exact_at(2)  # inside "alpha"
    assert not spans.exact_at(17)  # after \x0c, which the Bert normaliser deletes


def test_byte_level_tokenizer_is_not_word_bounded(rfc_text: str) -> None:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train_from_iterator([rfc_text], trainer)
    counter = TokenCounter.from_tokenizer(tokenizer)
    assert counter("Hello world") > 0
    assert not counter.word_bounded
    spans = counter.measure_spans("Hello world", [(0, 11)])
    assert not spans.exact_at(6)


def test_length_function_for_units() -> None:
    assert length_function_for(ChunkUnit.CHARS) is char_length
    tokens = length_function_for(ChunkUnit.TOKENS)
    assert isinstance(tokens, TokenCounter)
    assert length_function_for(ChunkUnit.TOKENS) is tokens  # cached, tokenizer loaded once
    explicit = length_function_for(ChunkUnit.TOKENS, DEFAULT_TOKENIZER_PATH)
    assert explicit("Hello, world!") == 4
