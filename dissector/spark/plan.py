"""The job's plan, made on the driver from the index the indexing tasks gave (``tasks.INDEX``: a row per file,
per reader note and per connection per file), with numpy: no Spark query. A Spark SQL query of windows and
joins did this before; for a job of three small files its planning and its stages took seconds of a 28 s run
(docs/SPARK.md), while the index of even a large rotated set is a few hundred thousand rows (25 bytes each).

- files in time order (their first packet's time, then their path), each one's offset: the packets before it,
  so a packet's number in the whole input is its file's offset plus its number in the file;
- the connections dealt to the partitions from the largest (their bytes in every file), each to the partition
  with the fewest bytes so far: hashing them would put two of a capture's few big connections in one
  partition as often as not, and dealing them in turn leaves the first partition the largest of every round;
- a partition's work: per file, in capture order, the connections of it there.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

#: The ``files`` table (docs/commands/pipeline.md), as the job writes it.
FILES = pa.schema([
    ("order", pa.int32()), ("path", pa.string()), ("packets", pa.int64()), ("first_time", pa.float64()),
    ("size", pa.int64()), ("offset", pa.int64()), ("ended_id", pa.string()), ("ended", pa.string()),
])

#: A partition's work: its slot, and the files it reads in capture order as (path, offset, connections' keys).
Work = tuple[int, list[tuple[str, int, list[int]]]]


@dataclass
class Plan:
    files: pa.Table                         # ``FILES``, in capture order
    notes: list[tuple[str, str, str]]       # the readers' notes: (path, id, parameters as JSON)
    work: list[Work]                        # a partition's work per slot, 0 to partitions - 1 (empty: none)


def least_loaded(sizes: np.ndarray, partitions: int) -> np.ndarray:
    """The partition of each of ``sizes`` (largest first): the one with the fewest bytes so far, the lowest of
    equals (the longest-processing-time rule: no partition ends more than the largest size after the others, so
    one partition per core balances as well as more would, and each further partition reads every file again)."""
    if partitions <= 1:
        return np.zeros(len(sizes), np.int64)
    loads = [(0, slot) for slot in range(partitions)]
    dealt = np.empty(len(sizes), np.int64)
    for at, size in enumerate(sizes.tolist()):
        load, slot = loads[0]
        dealt[at] = slot
        heapq.heapreplace(loads, (load + size, slot))
    return dealt


def make(index: pa.Table, paths: list[str], partitions: int) -> Plan:
    """The plan of a job over the files ``paths`` (a file's ``file_no`` is its place there) from their
    ``index`` rows, its connections spread over ``partitions``."""
    kind = index.column("kind").to_numpy(zero_copy_only=False)

    # files in time order (no packet: last), then by path; a file's offset is the packets before it
    is_file = np.flatnonzero(kind == "file")
    rows = index.take(pa.array(is_file)).to_pydict()
    in_order = sorted(range(len(is_file)), key=lambda i: (rows["time"][i] is None, rows["time"][i] or 0.0,
                                                         paths[rows["file_no"][i]]))
    files, offset = {name: [] for name in FILES.names}, 0
    order_of_file = np.zeros(len(paths), np.int64)
    offset_of_file = np.zeros(len(paths), np.int64)
    for place, i in enumerate(in_order, 1):
        no, packets = rows["file_no"][i], rows["packets"][i] or 0
        order_of_file[no], offset_of_file[no] = place, offset
        for name, value in (("order", place), ("path", paths[no]), ("packets", rows["packets"][i]),
                            ("first_time", rows["time"][i]), ("size", rows["bytes"][i]), ("offset", offset),
                            ("ended_id", rows["note_id"][i]), ("ended", rows["note"][i])):
            files[name].append(value)
        offset += packets
    files = pa.Table.from_pydict(files, schema=FILES)

    is_note = np.flatnonzero(kind == "note")
    notes = index.take(pa.array(is_note)).to_pydict()
    notes = [(paths[no], note_id, note) for no, note_id, note in zip(notes["file_no"], notes["note_id"], notes["note"])]

    # the connections, largest first (then by key), each to the partition with the fewest bytes so far
    is_flow = np.flatnonzero(kind == "flow")
    flows = index.take(pa.array(is_flow))  # without the other rows' nulls, which would make the keys floats
    keys = flows.column("flow").to_numpy().astype(np.int64, copy=False)
    sizes = flows.column("bytes").to_numpy().astype(np.int64, copy=False)
    flow_files = flows.column("file_no").to_numpy().astype(np.int64)
    unique, which = np.unique(keys, return_inverse=True)
    totals = np.zeros(len(unique), np.int64)
    np.add.at(totals, which, sizes)
    largest_first = np.lexsort((unique, -totals))
    turn = np.empty(len(unique), np.int64)
    turn[largest_first] = least_loaded(totals[largest_first], partitions)
    slot = turn[which]

    # a partition's work: its rows by file in capture order
    order = order_of_file[flow_files]
    by_slot_and_file = np.lexsort((keys, order, slot))
    work: list[Work] = [(s, []) for s in range(partitions)]
    slot, order, flow_files, keys = (a[by_slot_and_file] for a in (slot, order, flow_files, keys))
    starts = np.flatnonzero(np.r_[True, (slot[1:] != slot[:-1]) | (order[1:] != order[:-1])]) if len(keys) else []
    ends = list(starts[1:]) + [len(keys)] if len(keys) else []
    for start, end in zip(starts, ends):
        no = int(flow_files[start])
        work[int(slot[start])][1].append((paths[no], int(offset_of_file[no]), keys[start:end].tolist()))
    return Plan(files, notes, work)
