"""A growing embedding table keyed by raw 64-bit ids (issue 31): the rows a pserver holds.

``DynamicTable`` creates a row the first time an id is admitted, updates it with a per-row
optimizer and evicts it again by age or by a decayed sighting count. It knows nothing of
programs: a pserver (a later slice) calls ``pull``, ``push`` and ``end_round`` under its lock.
Thread-safety: none.

NOTE(dynamic-table-determinism): nothing a row holds depends on which table (shard) holds it,
on when it was created or on its row number. Initial values and probability draws are
counter-based on (seed, id, counter) (``counter_uniform``); a row's update reads only its own
state; counts and ages are per id. So one table and the same calls split over shards by
``mix64(id) % n`` hold the same numbers, and ``shard`` can re-split a checkpoint onto any
number of shards, bit for bit.
"""
from __future__ import annotations

import dataclasses
import json

import numpy as np

from placegroup import config as settings
from placegroup.util.key_index import KeyIndex, as_ids, mix64
from placegroup.util.key_index import kernels as key_kernels
from placegroup.util.normal_ppf import PHI_HI, PHI_LO, normal_ppf
from placegroup.values import SelectedRows

_PHI = np.uint64(0x9E3779B97F4A7C15)
_S11 = np.uint64(11)
_STREAM_INIT, _STREAM_ADMIT = 1, 2
_MAX_STEP = 2 ** 31 - 1  # last-seen steps are int32
ID_SPACE = 2 ** 63 - 1  # the height of a SelectedRows keyed by raw ids


def counter_uniform(seed: int, stream: int, ids: np.ndarray, counters: np.ndarray) -> np.ndarray:
    """Uniform [0, 1) float64 draws, a pure function of (seed, stream, id, counter).

    ``k = mix64(mix64(seed) ^ stream)``; ``x = mix64(mix64(id ^ k) + (counter + 1)·φ)`` mod 2**64
    with φ = 0x9E3779B97F4A7C15 (splitmix64's increment); the draw is ``(x >> 11)·2**-53``.
    ``ids`` [n] int64 and ``counters`` (uint64-castable, broadcast against ``ids[:, None]``).

    Example: ``counter_uniform(0, 1, np.array([5]), np.arange(3))`` is three draws in [0, 1).
    """
    k = mix64(mix64(np.array([seed], np.uint64)) ^ np.uint64(stream))
    h = mix64(np.asarray(ids, np.int64).view(np.uint64) ^ k)
    x = mix64(h[:, None] + (np.asarray(counters, np.uint64) + np.uint64(1)) * _PHI)
    return (x >> _S11).astype(np.float64) * 2.0 ** -53


def _normal_rows(c: "TableConfig", ids: np.ndarray) -> np.ndarray:
    """``init_mean + init_std·z`` [len(ids), dim], float64: z by Box-Muller on the draws
    (seed, 1, id, 2j) and (seed, 1, id, 2j + 1) ("normal"), or by the inverse CDF of the draw
    (seed, 1, id, j) restricted to [-2, 2] ("truncated_normal", Paddle's large-scale tables)."""
    if c.init == "normal":
        u = counter_uniform(c.seed, _STREAM_INIT, ids, np.arange(2 * c.dim))
        z = np.sqrt(-2.0 * np.log1p(-u[:, 0::2])) * np.cos(2.0 * np.pi * u[:, 1::2])
    else:
        u = counter_uniform(c.seed, _STREAM_INIT, ids, np.arange(c.dim))
        z = np.clip(normal_ppf(np, PHI_LO + (PHI_HI - PHI_LO) * u), -2.0, 2.0)
    return c.init_mean + c.init_std * z


def initial_rows(c: "TableConfig", ids: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The initial rows ``[len(ids), dim]`` of ``ids``: ``init_low + (init_high - init_low)·u``,
    a pure function of (seed, id) (``init`` "uniform"; "normal" and "truncated_normal" draw
    ``init_mean + init_std·z`` instead, ``_normal_rows``).

    float64 tables draw each element from ``counter_uniform(seed, 1, id, j)`` (53 bits).
    float32 tables take two elements from each 64-bit draw ``x_j = mix64(mix64(id ^ k) +
    (j + 1)·φ)`` (as ``counter_uniform``): element 2j is ``(x_j >> 40)·2**-24`` and element 2j + 1
    is ``((x_j >> 8) & (2**24 - 1))·2**-24``, 24 bits each (a float32's precision), computed in
    float32: half the mixing, a third of the memory traffic. ``out``: a C-contiguous float32
    ``[len(ids), dim]`` to write them into (a table's own rows).
    """
    if c.dtype == "float64" or c.init != "uniform":
        if c.init == "uniform":
            rows = c.init_low + (c.init_high - c.init_low) * counter_uniform(c.seed, _STREAM_INIT, ids, np.arange(c.dim))
        else:
            rows = _normal_rows(c, ids)
        rows = rows.astype(c.dtype, copy=False)
        if out is not None:
            out[...] = rows
        return rows
    k = mix64(mix64(np.array([c.seed], np.uint64)) ^ np.uint64(_STREAM_INIT))[0]
    if out is None:
        out = np.empty((ids.size, c.dim), np.float32)
    key_kernels().uniform24(k, np.ascontiguousarray(ids, np.int64), out, np.float32(c.init_low),
                            np.float32(2.0 ** -24 * (c.init_high - c.init_low)))
    return out


def _need(ok: bool, msg: str) -> None:
    if not ok:
        raise ValueError(msg)


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


@dataclasses.dataclass(frozen=True)
class CountFilterEntry:
    """Admit an id once it has been seen ``count_filter`` times (Paddle's name; an int >= 0,
    and 0 or 1 admit at first sight)."""
    count_filter: int

    def __post_init__(self):
        _need(_is_int(self.count_filter) and self.count_filter >= 0,
              f"CountFilterEntry.count_filter must be an int >= 0, got {self.count_filter!r}")

    @property
    def count(self) -> int:
        return self.count_filter

    def admit(self, seed: int, ids: np.ndarray, sightings: np.ndarray, step: int) -> np.ndarray:
        return sightings >= self.count


@dataclasses.dataclass(frozen=True)
class ProbabilityEntry:
    """Admit an id, at each update that sees it, with ``probability`` (in (0, 1]).

    At update ``step`` an unadmitted id of the gradient is admitted when
    ``counter_uniform(seed, 2, [id], [step]) < probability``: deterministic for a table's seed
    and the same on whichever shard holds the id, yet, as in Paddle's entry, an id seen in k
    updates is admitted with probability 1 - (1 - p)**k.
    """
    probability: float

    def __post_init__(self):
        _need(isinstance(self.probability, (int, float)) and 0 < self.probability <= 1,
              f"ProbabilityEntry.probability must be in (0, 1], got {self.probability!r}")

    def admit(self, seed: int, ids: np.ndarray, sightings: np.ndarray, step: int) -> np.ndarray:
        return counter_uniform(seed, _STREAM_ADMIT, ids, np.array([step]))[:, 0] < self.probability


@dataclasses.dataclass(frozen=True)
class ShowClickEntry:
    """Admit an id by its show/click score, as Paddle's ``ShowClickEntry`` with its CTR
    accessor: ``show_name`` and ``click_name`` name the program's per-example show and click
    vars (fed, or computed), shape [batch, 1].

    Each occurrence of an id in example i is a sighting of weight ``(show_i - click_i)·
    nonclk_coeff + click_i·click_coeff`` (Paddle's show/click score, whose defaults these
    are), so an id's count is its summed, decayed score. An id is admitted once that count
    reaches ``threshold`` (0, Paddle's default for these tables: at its first update);
    ``SparseTableConfig.min_count`` and ``decay`` then act on the score as on a count
    (Paddle's delete threshold and show/click decay rate).
    """
    show_name: str
    click_name: str
    threshold: float = 0.0
    nonclk_coeff: float = 0.1
    click_coeff: float = 1.0

    def __post_init__(self):
        for name in ("show_name", "click_name"):
            v = getattr(self, name)
            _need(isinstance(v, str) and bool(v), f"ShowClickEntry.{name} must be a var's name (a non-empty str), got {v!r}")
        for name in ("threshold", "nonclk_coeff", "click_coeff"):
            v = getattr(self, name)
            _need(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0,
                  f"ShowClickEntry.{name} must be a number >= 0, got {v!r}")

    def admit(self, seed: int, ids: np.ndarray, sightings: np.ndarray, step: int) -> np.ndarray:
        return sightings >= np.float32(self.threshold)


_ENTRIES = {"count": CountFilterEntry, "probability": ProbabilityEntry, "show_click": ShowClickEntry}
_EPSILON = {"sgd": 0.0, "adagrad": 1e-6, "adam": 1e-8}  # the kernels' defaults


@dataclasses.dataclass(frozen=True)
class TableConfig:
    """Everything a ``DynamicTable`` is, validated on construction (ValueError names the field).

    Args:
        dim: values per row (>= 1). dtype: "float32" or "float64".
        seed: 0 to 2**64 - 1; with the id it fixes initial values and probability draws.
        init: how a new row is drawn: "uniform" in [init_low, init_high) (low <= high; equal:
            a constant), "normal" or "truncated_normal" (within 2 std) of init_mean and
            init_std (>= 0).
        optimizer: "sgd", "adagrad" or "adam"; lr (> 0); epsilon (>= 0, default the kernel's:
            adagrad 1e-6, adam 1e-8); initial_accumulator (adagrad's first moment, >= 0);
            beta1, beta2 (adam, in [0, 1)).
        entry: CountFilterEntry, ProbabilityEntry, ShowClickEntry or None (admit at first
            sight).
        ttl: evict a row unseen for ttl steps (an int >= 1) or None.
        min_count: evict a row whose decayed count is below it (> 0) or None; decay in (0, 1].
        round_steps: a round ends (eviction, then decay) after every round_steps updates (>= 1).
    """
    dim: int
    dtype: str = "float32"
    seed: int = 0
    init_low: float = -0.1
    init_high: float = 0.1
    init: str = "uniform"
    init_mean: float = 0.0
    init_std: float = 1.0
    optimizer: str = "sgd"
    lr: float = 0.01
    epsilon: float | None = None
    initial_accumulator: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.999
    entry: CountFilterEntry | ProbabilityEntry | ShowClickEntry | None = None
    ttl: int | None = None
    min_count: float | None = None
    decay: float = 1.0
    round_steps: int = 100

    def __post_init__(self):
        num = (int, float)
        _need(_is_int(self.dim) and self.dim >= 1, f"TableConfig.dim must be an int >= 1, got {self.dim!r}")
        _need(self.dtype in ("float32", "float64"), f"TableConfig.dtype must be float32 or float64, got {self.dtype!r}")
        _need(_is_int(self.seed) and 0 <= self.seed < 2 ** 64, f"TableConfig.seed must be an int in 0 to 2**64 - 1, got {self.seed!r}")
        _need(isinstance(self.init_low, num) and isinstance(self.init_high, num) and self.init_low <= self.init_high,
              f"TableConfig needs init_low <= init_high, got {self.init_low!r} and {self.init_high!r}")
        _need(self.init in ("uniform", "normal", "truncated_normal"),
              f"TableConfig.init must be uniform, normal or truncated_normal, got {self.init!r}")
        _need(isinstance(self.init_mean, num) and isinstance(self.init_std, num) and self.init_std >= 0,
              f"TableConfig needs a number init_mean and init_std >= 0, got {self.init_mean!r} and {self.init_std!r}")
        _need(self.optimizer in _EPSILON, f"TableConfig.optimizer must be one of {sorted(_EPSILON)}, got {self.optimizer!r}")
        _need(isinstance(self.lr, num) and self.lr > 0, f"TableConfig.lr must be > 0, got {self.lr!r}")
        _need(self.epsilon is None or (isinstance(self.epsilon, num) and self.epsilon >= 0),
              f"TableConfig.epsilon must be >= 0 or None, got {self.epsilon!r}")
        _need(isinstance(self.initial_accumulator, num) and self.initial_accumulator >= 0,
              f"TableConfig.initial_accumulator must be >= 0, got {self.initial_accumulator!r}")
        for name in ("beta1", "beta2"):
            v = getattr(self, name)
            _need(isinstance(v, num) and 0 <= v < 1, f"TableConfig.{name} must be in [0, 1), got {v!r}")
        _need(self.entry is None or isinstance(self.entry, tuple(_ENTRIES.values())),
              f"TableConfig.entry must be a CountFilterEntry, a ProbabilityEntry, a ShowClickEntry or None, "
              f"got {self.entry!r}")
        _need(self.ttl is None or (_is_int(self.ttl) and self.ttl >= 1),
              f"TableConfig.ttl must be an int >= 1 or None, got {self.ttl!r}")
        _need(self.min_count is None or (isinstance(self.min_count, num) and self.min_count > 0),
              f"TableConfig.min_count must be > 0 or None, got {self.min_count!r}")
        _need(isinstance(self.decay, num) and 0 < self.decay <= 1, f"TableConfig.decay must be in (0, 1], got {self.decay!r}")
        _need(_is_int(self.round_steps) and self.round_steps >= 1,
              f"TableConfig.round_steps must be an int >= 1, got {self.round_steps!r}")

    @property
    def eps(self) -> float:
        return _EPSILON[self.optimizer] if self.epsilon is None else self.epsilon

    def to_json(self) -> str:
        d = dataclasses.asdict(self)
        if self.entry is not None:
            d["entry"] = {"kind": next(k for k, c in _ENTRIES.items() if isinstance(self.entry, c)), **d["entry"]}
        return json.dumps(d, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "TableConfig":
        d = json.loads(text)
        if d.get("entry") is not None:
            e = dict(d["entry"])
            d["entry"] = _ENTRIES[e.pop("kind")](**e)
        return cls(**d)


@dataclasses.dataclass(frozen=True)
class SparseTableConfig:
    """When a table keyed by raw ids (``sparse_embedding``) drops its rows, and its seed.

    Args:
        ttl: a row not seen (in a gradient) for ``ttl`` updates goes at the next round end
            (an int >= 1); None: never by age.
        min_count: at a round end, rows whose count of sightings is below it go (> 0); None:
            never by count.
        decay: then every remaining row's count is multiplied by it (in (0, 1]).
        round_steps: a round ends after every ``round_steps`` updates of the table (>= 1).
        seed: fixes the rows' initial values and ProbabilityEntry's draws (0 to 2**64 - 1);
            None: the startup program's ``random_seed``.

    The environment overrides the first four for every table: PLACEGROUP_TABLE_TTL,
    PLACEGROUP_TABLE_MIN_COUNT, PLACEGROUP_TABLE_DECAY, PLACEGROUP_TABLE_ROUND_STEPS
    (``placegroup env`` lists them).

    Example:
        >>> SparseTableConfig(ttl=1000, min_count=2.0, decay=0.98, round_steps=500)
    """
    ttl: int | None = None
    min_count: float | None = None
    decay: float = 1.0
    round_steps: int = 100
    seed: int | None = None

    def eviction(self) -> dict:
        """ttl, min_count, decay and round_steps, each overridden by its environment variable
        when that is set (checked by ``TableConfig``).

        Raises:
            ConfigError: a variable that is set holds a bad value (naming it).
        """
        out = {}
        for field in ("ttl", "min_count", "decay", "round_steps"):
            name = f"PLACEGROUP_TABLE_{field.upper()}"
            out[field] = settings.get(name) if settings.is_set(name) else getattr(self, field)
        return out


# -- per-row optimizers: Fluid's kernels (ops/optimizer.py) on a SelectedRows gradient, lazy ------

def _merge(rows: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows sorted unique, repeats summed in their order: ``SelectedRows.merged`` itself."""
    m = SelectedRows(rows, g, int(rows.max()) + 1 if rows.size else 0).merged(np)
    return m.rows, m.values


def _sgd(cfg, lr, t, a, rows, g) -> None:
    # NOTE(sgd-add-at) in ops/optimizer.py: each entry subtracted in turn, as the sgd kernel does
    key_kernels().sgd_rows(a["values"], rows, np.ascontiguousarray(g), -t(lr))  # in order, compiled


def _adagrad(cfg, lr, t, a, rows, g) -> None:
    r, g = _merge(rows, g)
    lr, eps = t(lr), t(cfg.eps)
    m = a["moment"][r] + g * g
    a["values"][r] = a["values"][r] - lr * g / (np.sqrt(m) + eps)
    a["moment"][r] = m


def _adam(cfg, lr, t, a, rows, g) -> None:
    """Lazy Adam with the row's own beta powers; the step reads the powers after this update,
    as the kernel does for a SelectedRows gradient (NOTE(sparse-adam-powers))."""
    r, g = _merge(rows, g)
    b1, b2, eps = t(cfg.beta1), t(cfg.beta2), t(cfg.eps)
    b1p, b2p = a["beta1_pow"][r] * b1, a["beta2_pow"][r] * b2
    lr_t = (t(lr) * (np.sqrt(1 - b2p) / (1 - b1p)))[:, None]
    m1 = b1 * a["moment1"][r] + (1 - b1) * g
    m2 = b2 * a["moment2"][r] + (1 - b2) * g * g
    a["values"][r] = a["values"][r] - lr_t * (m1 / (np.sqrt(m2) + eps))
    a["moment1"][r], a["moment2"][r], a["beta1_pow"][r], a["beta2_pow"][r] = m1, m2, b1p, b2p


# optimizer -> (update, {state: (per-element?, initial value from the config)})
_OPTIMIZERS = {
    "sgd": (_sgd, {}),
    "adagrad": (_adagrad, {"moment": (True, lambda c: c.initial_accumulator)}),
    "adam": (_adam, {"moment1": (True, lambda c: 0.0), "moment2": (True, lambda c: 0.0),
                     "beta1_pow": (False, lambda c: c.beta1), "beta2_pow": (False, lambda c: c.beta2)}),
}


def _grow(arrays: dict, need: int) -> None:
    """Grow every row-indexed array in ``arrays`` to hold ``need`` rows: 1.25x + 16 at a time.

    NOTE(grow-in-place): ``ndarray.resize`` reallocs the array's own buffer and zeroes the new
    rows; glibc's realloc of a large block remaps its pages rather than copying them. Measured
    on 2 cores, a 183 MiB array grew to 229 MiB in 30 to 160 ms (numpy asks for huge pages on
    large arrays, which the kernel then gathers), against 350 ms for a new zeroed array and a
    copy. The table hands out only copies of its arrays (fancy indexing), so no view can see
    the buffer move; hence ``refcheck=False``.
    """
    cap = next(iter(arrays.values())).shape[0]
    if need <= cap:
        return
    cap = max(need, int(cap * 1.25) + 16)
    for v in arrays.values():
        v.resize((cap,) + v.shape[1:], refcheck=False)


class DynamicTable:
    """Rows of an embedding table keyed by raw non-negative int64 ids, created on admission.

    The table counts time in updates: ``step`` is the number of ``push`` calls so far. In sync
    training every shard gets one (merged) push per step, so ``step`` is the training step on
    every shard and in one process alike.

    * ``pull(ids, create)`` reads ``[n, dim]`` values; an id without a row reads zeros. With no
      ``entry`` and ``create`` (training), an id is admitted at first sight: its row is made
      here, with its initial value, and read. A pull counts nothing.
    * ``push(ids, grads, lr, weights)`` is one update: ``step`` advances, and each
      *occurrence* of an id is a sighting, of weight 1 or its entry of ``weights`` (a
      ShowClickEntry table's show/click scores, which it needs), so a batch split over
      trainers, whose gradients the pserver concatenates, counts as the whole batch does in
      one process. Admitted rows: count += the sightings' weights, last-seen = step, and the
      optimizer updates them. An id without a row: its gradient only counts; its sightings
      add up in a small candidate index (count, last step) until ``entry`` admits it
      (CountFilterEntry: count >= its count; ShowClickEntry: count >= its threshold;
      ProbabilityEntry: a draw on (seed, id, step)), and its row is made with its initial
      value, to be read from the next step on. With no entry such an id (pulled with
      ``create=False``) is admitted here.
    * Initial value of a row: ``init_low + (init_high - init_low)·u`` with ``u`` uniform draws
      on (seed, id, element), or a normal draw of them (``config.init``; ``initial_rows``): a
      function of (seed, id) only.
    * The update is lazy, with the row's own optimizer state: SGD subtracts each entry in turn
      (the sgd kernel's NOTE(sgd-add-at)); Adagrad and Adam first sum a repeated id's gradients in
      order (``SelectedRows.merged``), then apply the kernel's rule; Adam's beta powers are per
      row, start at beta1/beta2 and advance once per update of that row
      (NOTE(sparse-adam-powers)). ``lr`` overrides the config's (a schedule's current rate).
    * Rounds: after every ``round_steps``-th push, ``end_round()`` runs by itself. With ``ttl``,
      rows and candidates last seen at ``s`` with ``step - s >= ttl`` go; with ``min_count``,
      rows whose count is below it go, then every remaining row's count is multiplied by
      ``decay``. Candidates' counts never decay. Freed rows are reused by later admissions
      (``KeyIndex``'s lowest free row first).
    * Memory: per row ``values`` (dim x itemsize), the optimizer's state, a float32 count and an
      int32 last-seen step, plus ``KeyIndex``'s 13.3 to 16 bytes (index and counters: at most
      24); the row arrays grow by 1.25x (+16 rows), like the index's row array, and never
      shrink.

    Example:
        >>> t = DynamicTable(TableConfig(dim=2, optimizer="sgd", lr=0.5))
        >>> t.push([3], np.ones((1, 2)))
        >>> t.pull([3, 4], create=False).shape
        (2, 2)
    """

    def __init__(self, config: TableConfig):
        if not isinstance(config, TableConfig):
            raise TypeError(f"DynamicTable needs a TableConfig, got {type(config).__name__}")
        self.config = c = config
        self._t = np.dtype(c.dtype).type
        self._update, specs = _OPTIMIZERS[c.optimizer]
        self._opt = {k: (per_elem, init(c)) for k, (per_elem, init) in specs.items()}
        self._index, self._cand = KeyIndex(), KeyIndex()
        self._a = {"values": np.zeros((16, c.dim), c.dtype), "count": np.zeros(16, np.float32),
                   "last": np.zeros(16, np.int32)}
        for k, (per_elem, _) in self._opt.items():
            self._a[k] = np.zeros((16, c.dim) if per_elem else 16, c.dtype)
        self._c = {"count": np.zeros(16, np.float32), "last": np.zeros(16, np.int32)}
        self.step = 0
        key_kernels().warm()
        self.admitted = self.evicted = 0  # since this table was made (the profile's counters)

    def __len__(self) -> int:
        return len(self._index)

    def profile_line(self, name: str) -> str:
        """``PLACEGROUP_PROFILE``'s line for this table, named ``name``."""
        return (f"table {name}: {len(self):,} live rows, {self.admitted:,} admitted, {self.evicted:,} evicted, "
                f"{len(self._cand):,} candidates, {self.nbytes / 2 ** 20:,.1f} MiB after {self.step:,} updates")

    @property
    def nbytes(self) -> int:
        """Bytes of every array the table holds: rows, candidates and both indexes."""
        arrays = list(self._a.values()) + list(self._c.values())
        return self._index.nbytes + self._cand.nbytes + sum(a.nbytes for a in arrays)

    def pull(self, ids, create: bool = True) -> np.ndarray:
        """Values ``[len(ids), dim]`` of ``ids`` (zeros where no row); see the class docstring.

        Raises:
            ValueError: a negative id (the caller adds the feed's name).
        """
        ids = as_ids(ids)
        if ids.size > 1 and bool((ids[1:] > ids[:-1]).all()):  # a prefetch's ids: sorted, distinct
            uniq, inv = ids, None
        else:
            uniq, inv = np.unique(ids, return_inverse=True)
        if create and self.config.entry is None:  # admitted at first sight: one probe finds and adds
            rows, fresh = self._index.insert(uniq, with_new=True)
            if fresh.any():
                self._init_rows(uniq[fresh], rows[fresh], np.zeros(int(fresh.sum()), np.float32), self.step + 1)
        else:
            rows = self._index.lookup(uniq)
        if inv is not None:
            rows = rows[inv.reshape(-1)]
        hit = rows >= 0
        if hit.all():  # one gather (every training pull with no entry; most others)
            return np.take(self._a["values"], rows, axis=0)
        out = np.zeros((rows.size, self.config.dim), self.config.dtype)
        out[hit] = np.take(self._a["values"], rows[hit], axis=0)
        return out

    def push(self, ids, grads, lr: float | None = None, weights=None) -> None:
        """One update by ``grads`` ``[len(ids), dim]``, each entry a sighting of weight 1 or
        ``weights[i]`` (the class docstring says what it does).

        Raises:
            ValueError: a negative id, grads or weights of another shape, weights missing for
                a ShowClickEntry table (or given to another), or more than 2**31 - 1 updates.
        """
        ids = as_ids(ids)
        g = np.asarray(grads)
        _need(g.shape == (ids.size, self.config.dim),
              f"push: grads must have shape [{ids.size}, {self.config.dim}], got {list(g.shape)}")
        scored = isinstance(self.config.entry, ShowClickEntry)
        _need((weights is not None) == scored,
              "push: a ShowClickEntry table counts sightings by their show/click scores, and its gradient came "
              "without them" if scored else "push: sighting weights are for a ShowClickEntry table only")
        _need(self.step < _MAX_STEP, f"push: a table counts at most {_MAX_STEP} updates")
        uniq, inv, occ = np.unique(ids, return_inverse=True, return_counts=True)
        inv = inv.reshape(-1)
        if scored:
            w = np.asarray(weights, np.float32).reshape(-1)
            _need(w.size == ids.size, f"push: {w.size} weights for {ids.size} ids")
            occ = np.bincount(inv, weights=w, minlength=uniq.size)  # in entry order, as one process
        occ = occ.astype(np.float32)
        self.step += 1
        urows = self._index.lookup(uniq)
        have = urows >= 0
        self._a["count"][urows[have]] += occ[have]
        self._a["last"][urows[have]] = self.step
        if not have.all():
            new, counts = self._sight(uniq[~have], occ[~have])
            if new.size:  # rows from the next step on: this gradient only counts
                self._admit(new, counts, self.step)
        rows = urows[inv]
        keep = rows >= 0
        if not keep.all():
            rows, g = rows[keep], g[keep]
        g = g.astype(self.config.dtype, copy=False)
        if rows.size:
            self._update(self.config, self.config.lr if lr is None else float(lr), self._t, self._a, rows, g)
        if self.step % self.config.round_steps == 0:
            self.end_round()

    def end_round(self) -> np.ndarray:
        """Evict by ``ttl`` and ``min_count``, then decay counts; returns the evicted ids, sorted."""
        step, c = self.step, self.config
        keys, rows = self._index.keys_and_rows()
        gone = np.zeros(keys.size, bool)
        if c.ttl is not None:
            gone |= step - self._a["last"][rows].astype(np.int64) >= c.ttl
            ck, cr = self._cand.keys_and_rows()
            self._cand.remove(ck[step - self._c["last"][cr].astype(np.int64) >= c.ttl])
        if c.min_count is not None:
            gone |= self._a["count"][rows] < np.float32(c.min_count)
        self._index.remove(keys[gone])
        self.evicted += int(gone.sum())
        if c.decay != 1:
            self._a["count"][rows[~gone]] *= np.float32(c.decay)
        return np.sort(keys[gone])

    # -- persistence -------------------------------------------------------------------------

    def as_wire(self) -> SelectedRows:
        """The live rows as a SelectedRows keyed by their ids (height ``ID_SPACE``): how a table
        travels when a trainer asks a pserver for it (a trainer saving an inference model);
        the receiver makes a table again with ``from_state`` and the var's config."""
        keys, rows = self._index.keys_and_rows()
        return SelectedRows(keys, self._a["values"][rows], ID_SPACE)

    @classmethod
    def from_wire(cls, parts: list, config: str) -> "DynamicTable":
        """The table whose live rows ``parts`` hold (``as_wire``'s SelectedRows: one table's, or
        its shards'), with ``config`` (``TableConfig.to_json``); counts and optimizer state
        start afresh, as ``from_state`` of rows only."""
        return cls.from_state({"keys": np.concatenate([p.rows for p in parts]),
                               "values": np.concatenate([p.values for p in parts]), "config": np.array(config)})

    def state(self, rows_only: bool = False) -> dict:
        """The table as numpy arrays, rows in row order: ``keys``, ``values``, the optimizer's
        state by name, ``count``, ``last``, ``candidate_keys/count/last``, ``step`` and
        ``config`` (a 0-d str array of ``TableConfig.to_json``). Copies; nothing is pickled.
        ``rows_only``: keys, values, step and config (what serving needs)."""
        keys, rows = self._index.keys_and_rows()
        if rows_only:
            return {"keys": keys, "values": self._a["values"][rows], "step": np.array(self.step, np.int64),
                    "config": np.array(self.config.to_json())}
        ck, cr = self._cand.keys_and_rows()
        out = {"keys": keys, **{k: v[rows] for k, v in self._a.items()}}
        out.update(candidate_keys=ck, candidate_count=self._c["count"][cr], candidate_last=self._c["last"][cr],
                   step=np.array(self.step, np.int64), config=np.array(self.config.to_json()))
        return out

    @classmethod
    def from_state(cls, state: dict) -> "DynamicTable":
        """The table ``state`` describes (rows renumbered densely in the order given). ``config``
        and ``values`` are needed; any other array may be missing (``state(rows_only=True)``):
        counts then start at 0, last-seen steps at ``step``, optimizer state at its initial
        value, and there are no candidates.

        Raises:
            ValueError: ``values`` is missing, or an array's length differs from ``keys``'s.
        """
        t = cls(TableConfig.from_json(str(state["config"])))
        step = int(state.get("step", 0))
        for part, index_attr, prefix, key in ((t._a, "_index", "", "keys"), (t._c, "_cand", "candidate_", "candidate_keys")):
            keys = as_ids(state.get(key, np.zeros(0, np.int64)))
            _need(prefix != "" or "values" in state, "from_state: the state has no 'values'")
            given = [k for k in part if prefix + k in state]
            for k in given:
                v = np.asarray(state[prefix + k])
                _need(v.shape[:1] == (keys.size,), f"from_state: {prefix + k!r} has {v.shape[:1]} rows, keys {keys.size}")
                _need(v.shape[1:] == part[k].shape[1:], f"from_state: {prefix + k!r} rows are {v.shape[1:]}, want {part[k].shape[1:]}")
            _grow(part, keys.size)
            for k in part:
                if k in given:
                    part[k][:keys.size] = state[prefix + k]
                else:  # rows only (an inference model): fresh state, seen now
                    part[k][:keys.size] = step if k == "last" else t._opt[k][1] if k in t._opt else 0
            setattr(t, index_attr, KeyIndex.from_keys_and_rows(keys, np.arange(keys.size)))
        t.step = step
        return t

    # -- internals ---------------------------------------------------------------------------

    def _sight(self, ids: np.ndarray, occ: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Count ``occ`` (float32: sightings, or their summed weights) for each of the distinct
        ids without a row at this update; returns (the ids admitted, their counts)."""
        entry = self.config.entry
        if entry is None:
            return ids, occ
        rows, fresh = self._cand.insert(ids, with_new=True)
        _grow(self._c, int(rows.max()) + 1)
        self._c["count"][rows[fresh]] = 0
        self._c["count"][rows] += occ
        self._c["last"][rows] = self.step
        counts = self._c["count"][rows]
        ok = entry.admit(self.config.seed, ids, counts, self.step)
        self._cand.remove(ids[ok])
        return ids[ok], counts[ok]

    def _admit(self, ids: np.ndarray, counts: np.ndarray, last: int) -> None:
        """Rows for the distinct ``ids`` (none has one yet), with their initial values."""
        self._init_rows(ids, self._index.insert(ids), counts, last)

    def _init_rows(self, ids: np.ndarray, rows: np.ndarray, counts: np.ndarray, last: int) -> None:
        c = self.config
        _grow(self._a, int(rows.max()) + 1)
        if rows[-1] - rows[0] == rows.size - 1 and bool((np.diff(rows) == 1).all()):
            rows = slice(int(rows[0]), int(rows[-1]) + 1)  # fresh rows in a run: written in place
            initial_rows(c, ids, out=self._a["values"][rows])
        else:
            self._a["values"][rows] = initial_rows(c, ids)
        for k, (_, init) in self._opt.items():
            self._a[k][rows] = init
        self._a["count"][rows] = counts
        self._a["last"][rows] = last
        self.admitted += ids.size


def state_records(name: str, table: DynamicTable, rows_only: bool = False) -> list[tuple[str, np.ndarray]]:
    """``table``'s state as named 1-D-or-more arrays for a var file: ``<name>:<array>`` for
    each array of ``state(rows_only)``, the config as its JSON's UTF-8 bytes (uint8)."""
    out = []
    for key, arr in table.state(rows_only).items():
        if key == "config":
            arr = np.frombuffer(str(arr).encode(), np.uint8)
        out.append((f"{name}:{key}", np.ascontiguousarray(np.atleast_1d(arr))))
    return out


def state_of_records(name: str, saved: dict) -> dict:
    """The state ``state_records(name, ...)`` wrote, from a var file's ``{record: array}``.

    Raises:
        ValueError: there are no records of ``name``, or none holds its config.
    """
    prefix = name + ":"
    state = {k[len(prefix):]: v for k, v in saved.items() if k.startswith(prefix)}
    _need(bool(state), f"no table {name!r} among the saved records {sorted(saved)[:8]}")
    _need("config" in state, f"table {name!r}: its config was not saved")
    state["config"] = np.array(np.asarray(state["config"], np.uint8).tobytes().decode())
    if "step" in state:
        state["step"] = np.asarray(state["step"]).reshape(())
    return state


def shard(state, n: int, k: int) -> dict:
    """The part of a table's state (or of several shards' states, joined) that shard ``k`` of
    ``n`` holds: the ids with ``mix64(id) % n == k``, rows and candidates alike.

    Example: ``DynamicTable.from_state(shard([s0, s1], 3, 2))`` re-splits two shards into three.

    Raises:
        ValueError: ``n`` < 1, ``k`` outside 0..n-1, or states of different configs.
    """
    states = [state] if isinstance(state, dict) else list(state)
    _need(_is_int(n) and n >= 1 and _is_int(k) and 0 <= k < n, f"shard: need n >= 1 and 0 <= k < n, got n={n!r}, k={k!r}")
    configs = {str(s["config"]) for s in states}
    _need(len(configs) == 1, f"shard: the states have {len(configs)} different configs")
    out = {"config": states[0]["config"], "step": np.array(max(int(s["step"]) for s in states), np.int64)}
    for cand, key in ((False, "keys"), (True, "candidate_keys")):
        mine = [mix64(as_ids(s[key])) % np.uint64(n) == np.uint64(k) for s in states]
        for name in states[0]:
            if name not in out and name.startswith("candidate_") == cand:
                out[name] = np.concatenate([np.asarray(s[name])[m] for s, m in zip(states, mine)])
    return out
