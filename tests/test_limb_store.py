"""The fast evaluator's limb store: per slot a block of its own length in one buffer."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from exactmem.evaluate.fast.limb_store import LimbStore

operation = st.tuples(
    st.sampled_from(
        ["ensure", "fresh", "shrink", "release", "reserve", "trim", "fit", "write", "write"]
    ),
    st.integers(0, 5),  # slot
    st.integers(1, 40),  # limbs, or classes
)


@given(st.lists(operation, max_size=80), st.booleans())
@settings(max_examples=300, deadline=None)
def test_blocks_keep_their_values_through_every_reshaping(ops, hold_view):
    """Against a plain (cap × width) array per slot: a kept block keeps its values (the limbs
    it still has), blocks never overlap, and the kernels' view (buffer, offset, width) reads
    what the blocks hold — whether blocks move inside the buffer (no view of it alive) or into
    a new one (``hold_view``: a resize would move memory under the view)."""
    store = LimbStore()
    store.add_slots(6)
    model = {s: np.zeros((1, 0), np.int64) for s in range(6)}
    stamp = 1
    for op, s, k in ops:
        if op == "ensure" and model[s].shape[1] < k:
            store.ensure(s, k)
            grown = np.zeros((store.cap, k), np.int64)
            grown[:, : model[s].shape[1]] = model[s]
            model[s] = grown
        elif op == "fresh" and model[s].shape[1] < k:
            store.ensure(s, k, keep=False)
            model[s] = np.zeros((store.cap, k), np.int64)
            store.block(s)[:] = 0
        elif op == "shrink" and model[s].shape[1] > k:
            store.shrink(s, k)
            model[s] = model[s][:, :k]
        elif op == "release":
            store.release(s)
            model[s] = np.zeros((store.cap, 0), np.int64)
        elif op == "reserve" and k > store.cap:
            old = store.cap
            store.reserve(k)
            for t in model:  # the new classes' limbs are not defined: compare the old ones
                grown = np.zeros((store.cap, model[t].shape[1]), np.int64)
                grown[:old] = model[t]
                model[t] = grown
                store.block(t)[old:] = 0
        elif op == "trim":
            store.trim()
        elif op == "fit":  # room for k classes only (when it gives memory back)
            store.trim(k)
            for t in model:
                model[t] = model[t][: store.cap]
        elif op == "write":
            for t in model:  # distinct values everywhere: an overlap would overwrite some
                values = np.arange(model[t].size, dtype=np.int64).reshape(model[t].shape)
                store.block(t)[:] = values + stamp
                model[t] = values + stamp
                stamp += 10**6
        # every block as the model says, and no two blocks overlap
        taken = np.zeros(len(store.buf), bool)
        buf, off, width = store.args()
        for t, want in model.items():
            assert store.block(t).shape == (store.cap, want.shape[1])
            assert (store.block(t) == want).all()
            w = int(width[t])
            span = slice(int(off[t]), int(off[t]) + store.cap * w)
            assert not taken[span].any()
            taken[span] = True
            if w:  # limb i of class c at off + c·w + i, as the kernels read it
                c = store.cap - 1
                assert buf[int(off[t]) + c * w + w - 1] == want[c, w - 1]
        assert store.live == sum(m.size for m in model.values())
        if not hold_view:
            del buf
    for t in model:  # everything freed: one stretch of room again
        store.release(t)
    assert store._holes == [] and store._top == 0


def test_freed_room_is_reused_and_trim_gives_memory_back():
    """A block placed where a freed one was (no growth); a buffer of mostly holes shrinks."""
    store = LimbStore()
    store.add_slots(3)
    store.reserve(4000)  # blocks of 4000 × 400 limbs: 13 MB each
    for s in range(3):
        store.ensure(s, 400)
    size = len(store.buf)
    store.release(1)
    store.ensure(1, 300)  # fits the hole slot 1 left
    assert len(store.buf) == size
    store.block(2)[:] = 7
    store.shrink(0, 10)
    store.shrink(1, 10)
    store.trim()
    assert len(store.buf) < 0.6 * size  # the live blocks, with room for an eighth more
    assert (store.block(2) == 7).all()
    store.trim(1000)  # room for the classes there are: a quarter of the memory
    assert store.cap == 1000 and len(store.buf) < 0.2 * size
    assert (store.block(2) == 7).all()


def test_holes_take_several_blocks_without_overlap():
    store = LimbStore()
    store.add_slots(4)
    store.reserve(10)
    for s in range(3):
        store.ensure(s, 30)
        store.block(s)[:] = s + 1
    store.release(1)  # a hole of 300 between slots 0 and 2
    store.ensure(1, 10)
    store.ensure(3, 10)
    store.block(1)[:] = 5
    store.block(3)[:] = 6
    assert [int(store.block(s)[0, 0]) for s in range(4)] == [1, 5, 3, 6]
    assert int(store.off[3]) == int(store.off[1]) + 100  # both in the hole, one after the other


def test_a_repack_moves_blocks_inside_the_buffer_without_a_second_one():
    """Blocks moving down and up (the classes grow; a hole closes) keep their values, in the
    same buffer resized in place; a view of the buffer alive makes a copy instead."""
    store = LimbStore()
    store.add_slots(4)
    store.reserve(1000)
    for s, limbs in enumerate([50, 30, 70, 20]):
        store.ensure(s, limbs)
        store.block(s)[:] = np.arange(store.cap * limbs).reshape(store.cap, limbs) + 10**6 * s
    want = {s: store.block(s).copy() for s in range(4)}
    store.release(1)  # a hole: slot 2 moves down, and (more classes) slot 3 up
    del want[1]
    assert store._repack_in_place(3000, 3000 * 140 + 64)
    assert store.cap == 3000
    for s, block in want.items():
        assert (store.block(s)[:1000] == block).all()
    held = store.buf[:1]  # a view: the buffer cannot be resized under it
    assert not store._repack_in_place(5000, 5000 * 140 + 64)
    store.reserve(5000)  # so the repack copies into a new buffer
    assert store.buf is not held.base and store.cap >= 5000
    for s, block in want.items():
        assert (store.block(s)[:1000] == block).all()
