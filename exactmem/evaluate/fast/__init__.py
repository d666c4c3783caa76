"""The fast exact evaluator: same values as the reference evaluator, computed with less work.

Two honest savings, both exact for every model the IR expresses:

* **Row lanes in int64.** Before each layer the engine proves, from the actual largest
  |value| of every input lane, that every partial sum of a unit stays below 2^62; such units
  run in a numba kernel over all rows. A unit that could exceed the bound never touches int64.
* **Class-shared lanes.** Rows are partitioned into classes; a *shared* lane holds one Python
  integer per class, and all rows of a class have that value. A unit reading only shared lanes
  is computed once per class (the packed integers a Lemma C.1 group selects, for instance).
  A big unit that also reads row lanes splits the classes by the exact values of the row
  functionals it reads (:func:`~exactmem.evaluate.fast.row_kernel.refine`), so the invariant holds
  after it: the split is computed, never assumed. If a functional is itself too big for int64
  every row becomes its own class — reference speed, same values.

Stage II's step layers (σ(x − t), σ(x − t − 1) of a carried key x, read through their
difference) are decided from the keys sorted once — statistics and the step's boundary by
binary search, classes as runs of the sorted rows — when the layer has exactly that shape
(:mod:`~exactmem.evaluate.fast.key_order`); otherwise row by row.

Stretches of such layers run in one compiled pass instead of layer by layer: runs of
class-shared layers (:mod:`~exactmem.evaluate.fast.shared_runs`, Stage III's peel and read-outs
while its values are short) and runs of step layers in key order
(:mod:`~exactmem.evaluate.fast.key_order`, Stage II) — their shapes checked on the structure,
every value and statistic the same (docs/fast.md, "Runs of layers in one compiled pass").

Shared lanes that peel bits off a packed integer cost a few limbs per class and layer, not its
length: exact lengths, in-place updates after their readers, difference tags and views (units
kept as an anchor's value plus a few digits) — docs/fast.md, "Keeping the packed integers
cheap"; each is an identity checked on the layer's structure, never assumed of the data.

Statistics (zeros, least non-zero |pre-activation|) count every row: a class contributes its
row count. Lanes are returned per row; the numerators equal the reference evaluator's after its
gcd reduction, and the differential tests compare the two on outputs, lanes and statistics.

The package, one idea a module: :mod:`~.evaluator` (the MLP step and :func:`run`),
:mod:`~.engine` and its parts (:mod:`~.slots`, :mod:`~.classes`, :mod:`~.row_units`,
:mod:`~.shared_layer`, :mod:`~.run_layers`, :mod:`~.key_order`), the plans
(:mod:`~.shared_runs`, :mod:`~.sorted_steps`), the values' form (:mod:`~.digits`,
:mod:`~.limb_store`), :mod:`~.mixing`, and the numba kernels, imported only when evaluating
(:mod:`~.kernels`: :mod:`~.row_kernel`, :mod:`~.fold_kernel`, :mod:`~.limb_kernel`,
:mod:`~.layer_kernel`, :mod:`~.run_kernel`, :mod:`~.step_kernel`).
"""

from __future__ import annotations

from exactmem.evaluate.fast.engine import _Engine
from exactmem.evaluate.fast.evaluator import mlp, run, run_points, threads
from exactmem.evaluate.fast.lanes import _Fallback, _Lane
from exactmem.evaluate.fast.limits import (
    LIMIT,
    PARALLEL_CLASSES,
    PARALLEL_ROWS,
    SORTED_FROM,
    STEP_RUN_LAYERS,
)
from exactmem.evaluate.fast.mixing import mix

__all__ = ["LIMIT", "mix", "mlp", "run", "run_points", "threads"]
# (the thresholds as they were at import: the engine reads them from `limits`; patch them there)
__all__ += ["PARALLEL_CLASSES", "PARALLEL_ROWS", "SORTED_FROM", "STEP_RUN_LAYERS"]
__all__ += ["_Engine", "_Fallback", "_Lane"]
