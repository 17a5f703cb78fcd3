"""The memory hand-backs between an audit's phases (``core.memory``): inside
``survivors_set_aside`` each hand-back sets aside what its collection left, so the next
collections walk only what is new, and garbage made after it is still collected; the block's
end gives every object back to the collector."""

from __future__ import annotations

import gc
import weakref

from babelrun.core.memory import return_freed_memory, survivors_set_aside


class _Node:
    def __init__(self):
        self.me = self  # a cycle: only the collector frees it


def test_a_hand_back_sets_the_survivors_aside_and_still_collects_new_cycles():
    kept = _Node()
    with survivors_set_aside():
        return_freed_memory()
        assert gc.get_freeze_count() > 0
        late = _Node()
        gone = weakref.ref(late)
        del late
        return_freed_memory()  # the cycle made after the first hand-back is garbage it finds
        assert gone() is None
    assert gc.get_freeze_count() == 0
    assert kept.me is kept
