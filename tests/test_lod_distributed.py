"""LoD across processes: LoD tensors on the wire (NOTE(lod-frame) in comm/framing.py), checked
against the receiving var's lod_level (NOTE(lod-expect) in comm/expect.py).

- A bag-of-words classifier with LoD ids, an ``is_sparse`` and an ``is_distributed`` embedding,
  trained 2 trainers + 2 pservers: equal to one process in sync mode. This cluster runs in one
  process over the loopback transport (tests/inproc.py), each trainer fed its contiguous half
  of every batch's sentences.
- A sequence op placed by hand on the pserver, across real processes and sockets: LoD tensors
  cross both ways.
"""
import io
import os
import subprocess
import sys

import numpy as np

import placegroup as fluid
from placegroup.values import LoDTensor
from placegroup.tools.launch import launch
from tests.conftest import TIME_FACTOR
from tests.inproc import run_cluster, run_local

V, D, C = 40, 6, 3


def _batches(steps: int, batch: int = 8, seed: int = 3) -> list:
    """``steps`` batches of ``(word ids, class)``: 1..6 ids each, one of them a key word of the class."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        samples = []
        for _ in range(batch):
            c = int(rng.integers(0, C))
            words = [int(w) for w in rng.integers(C * 3, V, size=int(rng.integers(0, 6)))]
            words.insert(int(rng.integers(0, len(words) + 1)), 3 * c + int(rng.integers(0, 3)))
            samples.append((words, c))
        out.append(samples)
    return out


def _feed(samples) -> dict:
    ids = np.array([w for s, _ in samples for w in s], "int64").reshape(-1, 1)
    return {"words": LoDTensor.from_lengths(ids, [[len(s) for s, _ in samples]]),
            "label": np.array([[c] for _, c in samples], "int64")}


def build_bow():
    """words (lod_level 1) -> an is_sparse and an is_distributed embedding -> sequence_pool sum
    and average -> fc softmax -> cross entropy, SGD. Returns (feeds, loss); the distributed
    lookup's output is named ``emb_dist.out``."""
    words = fluid.layers.data("words", [1], dtype="int64", lod_level=1)
    label = fluid.layers.data("label", [1], dtype="int64")
    sparse = fluid.layers.embedding(words, size=[V, D], is_sparse=True,
                                    param_attr=fluid.ParamAttr(name="emb_sparse"))
    dist = fluid.layers.embedding(words, size=[V, D], is_sparse=True, is_distributed=True,
                                  param_attr=fluid.ParamAttr(name="emb_dist"))
    dist = fluid.layers.assign(dist, output=fluid.layers.create_tensor("float32", name="emb_dist.out"))
    h = fluid.layers.concat([fluid.layers.sequence_pool(sparse, "sum"),
                             fluid.layers.sequence_pool(dist, "average")], axis=1)
    probs = fluid.layers.fc(h, C, act="softmax")
    loss = fluid.layers.mean(fluid.layers.cross_entropy(probs, label))
    fluid.optimizer.SGD(0.5).minimize(loss)
    return [words, label], loss


def test_bow_with_lod_ids_2x2_sync_equals_one_process():
    """Sparse and distributed lookups of LoD ids, pooled: the mean of the two trainers' losses
    is the one-process loss at every step (the batch split evenly by examples)."""
    batches = [_feed(b) for b in _batches(12)]
    local = run_local(build_bow, batches).losses[0]
    got = run_cluster(build_bow, 2, 2, batches).losses
    np.testing.assert_allclose((np.array(got[0]) + np.array(got[1])) / 2, local, rtol=1e-5)
    assert local[-1] < local[0] * 0.8  # it learns


def test_the_distributed_lookup_keeps_the_ids_lod():
    """The lookup of prefetched rows gives each trainer its own sentences' LoD back."""
    batches = _batches(2)
    got = run_cluster(build_bow, 2, 2, [_feed(b) for b in batches], fetch=("emb_dist.out",),
                      return_numpy=False).fetched
    for k in (0, 1):
        for b, (e,) in zip(batches, got[k]):
            half = b[k * len(b) // 2:(k + 1) * len(b) // 2]
            assert isinstance(e, LoDTensor)
            assert e.recursive_sequence_lengths() == [[len(s) for s, _ in half]]
            assert np.array(e).shape == (sum(len(s) for s, _ in half), D)


def test_bow_with_lod_ids_trains_in_async_mode():
    got = run_cluster(build_bow, 2, 2, [_feed(b) for b in _batches(30)], sync_mode=False).losses
    for k in (0, 1):
        losses = got[k]
        assert np.isfinite(losses).all()
        assert np.mean(losses[-5:]) < np.mean(losses[:5])


def test_lod_tensors_cross_real_processes_both_ways(tmp_path):
    """A sequence_pool placed by hand on the pserver (tests/dist/train_placed.py): the trainer's
    embeddings go over ZeroMQ with their LoD, the pserver pools them, and the embeddings'
    gradient the trainer fetches from the pserver comes back with the same LoD; the losses and
    gradients equal one process's."""
    script = os.path.join(os.path.dirname(__file__), "dist", "train_placed.py")
    out = io.StringIO()
    code = launch(script, ["--out", str(tmp_path)], 1, 1, grace=20 * TIME_FACTOR, out=out,
                  extra_env={"PLACEGROUP_PEER_TIMEOUT": str(30 * TIME_FACTOR)})
    assert code == 0, out.getvalue()[-3000:]
    subprocess.run([sys.executable, script, "--out", str(tmp_path)], check=True, timeout=120 * TIME_FACTOR,
                   env={k: v for k, v in os.environ.items() if k != "TRAINING_ROLE"})
    local, got = np.load(tmp_path / "local0.npz"), np.load(tmp_path / "trainer0.npz")
    np.testing.assert_allclose(got["losses"], local["losses"], rtol=1e-6)
    np.testing.assert_allclose(got["grads"], local["grads"], rtol=1e-6, atol=1e-7)
    assert -1 not in got["lengths"].tolist()
    assert got["lengths"].tolist() == local["lengths"].tolist()
