"""The pipeline's numbering task (``dissector/spark/tasks.number``): the counts of several partitions, merged in
packet order a block at a time, give the numbers one running sum over the whole input gives (computed here
directly, on random interleavings and block sizes); and the count of the whole input at once (the prepass's),
shared out to the partitions by each row's connection (``tasks.number_whole``), gives the same files."""
from __future__ import annotations

import pytest

np = pytest.importorskip("numpy")
pa = pytest.importorskip("pyarrow")

from dissector.spark import tasks  # noqa: E402


def _write(into, kind, slot, *columns):
    out = tasks._NumbersOut(str(into), kind, slot)
    out.write(*columns)
    out.close()


@pytest.mark.parametrize("way", ["partitions", "whole"])
@pytest.mark.parametrize("seed", range(12))
def test_merged_numbers_equal_one_running_sum(tmp_path, monkeypatch, seed, way):
    rng = np.random.default_rng(seed)
    packets = int(rng.integers(0, 2500)) if seed else 0  # seed 0: nothing counted at all
    slots = int(rng.integers(1, 6))
    p = np.sort(rng.permutation(10 * packets + 10)[:packets])
    owner = rng.integers(0, slots, packets)
    frames = rng.integers(0, 3, packets)
    opened = (rng.random(packets) < 0.05).astype(np.int64)
    monkeypatch.setattr(tasks, "MERGE_ROWS", int(rng.integers(1, 64)))
    key = 1000 + owner  # a connection's key: here one per partition
    ends, whole_ends = {}, []
    for slot in range(slots):
        mine = owner == slot
        _write(tmp_path, "counts", slot, p[mine], frames[mine], opened[mine], key[mine])
        opening = p[mine][opened[mine] > 0]
        left = opening[rng.random(len(opening)) < 0.7]
        left_frames = rng.integers(1, 4, len(left))
        # a connection whose first packet the task never saw (-1) is not numbered, as the join left it out
        _write(tmp_path, "ends", slot, np.append(left, -1), np.append(left_frames, 5))
        ends[slot] = list(zip(left.tolist(), left_frames.tolist()))
        whole_ends += ends[slot]

    if way == "partitions":
        rows = list(tasks.number([pa.RecordBatch.from_pydict({"slot": list(range(slots))})], str(tmp_path)))
        assert sorted(r for b in rows for r in b.column("slot").to_pylist()) == list(range(slots))
    else:  # one count of every connection, in packet order, its ends in the order they came
        _write(tmp_path, "counts", tasks.WHOLE, p, frames, opened, key)
        rng.shuffle(whole_ends)
        _write(tmp_path, "ends", tasks.WHOLE, [q for q, _ in whole_ends], [f for _, f in whole_ends])
        work = [(slot, [("capture.pcap", 0, [1000 + slot])] if (owner == slot).any() else []) for slot in range(slots)]
        tasks.number_whole(str(tmp_path), work)
    before = np.cumsum(frames) - frames
    conn = np.where(opened > 0, np.cumsum(opened), -1)
    for slot in range(slots):
        mine = owner == slot
        if way == "whole" and not mine.any():
            continue  # a partition without work has no files: it decodes nothing
        got = tasks._numbers(str(tmp_path), "numbers", slot)
        assert got[:, 0].tolist() == p[mine].tolist()
        assert got[:, 1].tolist() == before[mine].tolist()
        assert got[:, 2].tolist() == conn[mine].tolist()
    conn_of = dict(zip(p[opened > 0].tolist(), conn[opened > 0].tolist()))
    base, expected = int(frames.sum()), {}
    for conn_id, left, slot in sorted((conn_of[q], f, s) for s in ends for q, f in ends[s]):
        expected.setdefault(slot, []).append([conn_id, base])
        base += left
    for slot in range(slots):
        assert tasks._numbers(str(tmp_path), "bases", slot).tolist() == expected.get(slot, [])


def test_a_missing_or_empty_file_is_no_numbers(tmp_path):
    assert tasks._numbers(str(tmp_path), "numbers", 3).shape == (0, 3)
    _write(tmp_path, "bases", 3, [], [])
    assert tasks._numbers(str(tmp_path), "bases", 3).shape == (0, 2)
