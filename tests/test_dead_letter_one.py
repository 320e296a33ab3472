"""Requeue or purge one dead letter, as ``dead_letters`` listed it (the dashboard's buttons)."""

from __future__ import annotations

import pytest

from fdbqueue import PriorityQueue, Queue, Subspace, memory


def dead(queue: Queue[str], db: memory.Database, values: list[str]) -> None:
    queue.enqueue_many(db, values)
    for _ in values:
        lease = queue.claim(db, 30)
        assert lease is not None
        queue.dead_letter(db, lease, f"failed {lease.value}")


@pytest.mark.parametrize("shards", [1, 3])
def test_requeue_one_moves_that_one_back(shards: int) -> None:
    db = memory.open()
    queue: Queue[str] = Queue(Subspace(("one",)), shards=shards)
    dead(queue, db, ["a", "b", "c"])
    letters = queue.dead_letters(db)
    chosen = next(letter for letter in letters if letter.value == "b")
    assert queue.requeue_dead_letter(db, chosen) is True
    assert sorted(letter.value for letter in queue.dead_letters(db)) == ["a", "c"]
    assert queue.peek_many(db, None) == ["b"]
    assert queue.requeue_dead_letter(db, chosen) is False  # gone already
    assert queue.info(db).dead_letters == 2


@pytest.mark.parametrize("shards", [1, 3])
def test_purge_one_removes_that_one(shards: int) -> None:
    db = memory.open()
    queue: Queue[str] = Queue(Subspace(("one",)), shards=shards)
    dead(queue, db, ["a", "b", "c"])
    chosen = next(letter for letter in queue.dead_letters(db) if letter.value == "a")
    assert queue.purge_dead_letter(db, chosen) is True
    assert sorted(letter.value for letter in queue.dead_letters(db)) == ["b", "c"]
    assert queue.purge_dead_letter(db, chosen) is False
    assert queue.size(db) == 0


def test_a_dead_letter_of_another_queue_is_refused() -> None:
    db = memory.open()
    queue: Queue[str] = Queue(Subspace(("one",)))
    other: Queue[str] = Queue(Subspace(("two",)))
    dead(other, db, ["x"])
    (letter,) = other.dead_letters(db)
    with pytest.raises(ValueError, match="not one of"):
        queue.requeue_dead_letter(db, letter)


def test_priority_queue_requeues_one_at_its_priority() -> None:
    db = memory.open()
    queue: PriorityQueue[str] = PriorityQueue(Subspace(("p",)))
    queue.push(db, "low", 9)
    queue.push(db, "high", 1)
    for _ in range(2):
        lease = queue.claim(db, 30)
        assert lease is not None
        queue.dead_letter(db, lease, "no")
    letters = queue.dead_letters(db)
    for letter in letters:
        assert queue.requeue_dead_letter(db, letter)
    assert queue.peek_many(db, None) == ["high", "low"]


@pytest.mark.parametrize("shards", [1, 3])
def test_dead_letters_after_one_lists_the_next_page(shards: int) -> None:
    db = memory.open()
    queue: Queue[str] = Queue(Subspace(("pages",)), shards=shards)
    dead(queue, db, [f"v{n:02}" for n in range(25)])
    everything = queue.dead_letters(db, None)
    pages, after = [], None
    while True:
        page = queue.dead_letters(db, 7, after=after)
        if not page:
            break
        pages.extend(page)
        after = page[-1]
    assert [letter.id for letter in pages] == [letter.id for letter in everything]
    # the cursor still works once its dead letter is gone
    assert queue.purge_dead_letter(db, everything[3])
    assert queue.dead_letters(db, 2, after=everything[3]) == everything[4:6]
    with pytest.raises(ValueError, match="not one of"):
        other: Queue[str] = Queue(Subspace(("elsewhere",)))
        dead(other, db, ["o"])
        queue.dead_letters(db, 1, after=other.dead_letters(db)[0])
