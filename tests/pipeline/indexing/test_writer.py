"""Windows of a streamed document and the writer that stores one while the next is embedded."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from docingest.pipeline.indexing.writer import BackgroundWriter, HeldCount, windows


class WriteFailed(Exception):
    pass


@given(st.lists(st.lists(st.integers(), max_size=7), max_size=12), st.integers(1, 9))
def test_windows_keep_every_item_in_order_in_full_windows(
    batches: list[list[int]], size: int
) -> None:
    cut = list(windows(batches, size))
    assert [item for window in cut for item in window] == [x for batch in batches for x in batch]
    assert all(len(window) == size for window in cut[:-1])
    assert all(0 < len(window) <= size for window in cut)


def test_a_window_holds_at_least_one_item() -> None:
    with pytest.raises(ValueError):
        list(windows([[1]], 0))


def test_the_writer_has_one_write_in_flight_and_waits_for_it_on_leaving() -> None:
    release = threading.Event()
    written: list[list[int]] = []

    def write(window: list[int]) -> None:
        release.wait(30)
        written.append(window)

    with BackgroundWriter(write) as writer:
        writer.put([1, 2])
        assert writer.in_flight == 2
        second = threading.Thread(target=writer.put, args=([3],))
        second.start()
        second.join(0.2)
        assert second.is_alive(), "the second window waits for the first one's write"
        assert written == []
        release.set()
        second.join(30)
    assert written == [[1, 2], [3]]  # leaving waited for the last write
    assert writer.in_flight == 0


def test_a_write_error_is_raised_by_the_next_put_or_on_leaving() -> None:
    def write(window: list[int]) -> None:
        raise WriteFailed(window)

    writer: BackgroundWriter[int] = BackgroundWriter(write)
    with pytest.raises(WriteFailed), writer:
        writer.put([1])
        writer.put([2])  # raises the first window's error
    with pytest.raises(WriteFailed), BackgroundWriter(write) as other:
        other.put([3])  # raised on leaving


def test_an_error_of_the_caller_wins_over_the_writes() -> None:
    def write(window: list[int]) -> None:
        raise WriteFailed(window)

    with pytest.raises(KeyError), BackgroundWriter(write) as writer:
        writer.put([1])
        raise KeyError("the caller's")


def test_the_held_count_follows_what_is_taken_and_written() -> None:
    seen: list[int] = []
    held = HeldCount(seen.append)
    for batch in held.taking([[1, 2, 3], [4]]):
        held.add(-len(batch))
    assert seen == [3, 0, 1, 0] and held.held == 0
