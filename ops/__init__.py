"""The op registry and its op families (installed as ``placegroup.ops``).

Importing this package registers every op. Kernels here import nothing from the framework,
the executor or comm: a collective's communicator comes in the kernel's ``ctx``.
"""
from placegroup.ops import (activation, averaging, clip, collective, compare, conv, ctr, distance,
                            dropout, elementwise, grid, index, lars_dpsgd, linalg, lookup, loss, lr_schedule,
                            math, metric, misc, norm, optimizer, parallel_loss, pool, random, rank_loss,
                            resample, rnn, sampled_loss, sequence, sequence_pad, shape, sparse, tensor,  # noqa: F401
                            unary)  # importing them registers their ops
from placegroup.ops import (beam_search, chunk_eval, contrib, control_flow, crf, cross_entropy2, ctc,  # noqa: F401
                            cudnn_lstm, dynamic, file_io, file_io_combine, gather_tree, lod_rank, lstmp,
                            sequence_more)
from placegroup.ops.registry import (EMPTY_VAR, GRAD_SUFFIX, Meta, OpDef, OpSpec, Slot, get_op_def,
                                     grad_name, register, registered_ops)

__all__ = ["EMPTY_VAR", "GRAD_SUFFIX", "Meta", "OpDef", "OpSpec", "Slot", "get_op_def", "grad_name",
           "register", "registered_ops"]
