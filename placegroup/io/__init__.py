"""Persistence: Fluid 1.x's ``fluid.io``, and the files it reads and writes.

Three kinds of file, none of them pickled, all written atomically:

* a program, prog.bin (``save_program`` / ``load_program``; the bytes are
  ``placegroup.ir.serialize``'s format), and the atomic write every file goes through: files.py;
* var values (``save_persistables``, ``save_params``, ``save_vars`` and their loads): var_files.py;
* inference models, a pruned program and the values it reads (``save_inference_model``,
  ``load_inference_model``): inference.py;
* readers that feed a program from a background thread (``DataLoader``, ``PyReader``; the
  machinery of ``fluid.layers.py_reader`` too), re-exported from placegroup/datafeed/data_loader.py;
* a program's state as Fluid 1.8's ``model.pdparams`` / ``.pdopt`` / ``.pdmodel`` (``save``,
  ``load``, ``load_program_state``, ``set_program_state``): program_state.py;
* the reader decorators of ``paddle.reader`` and ``paddle.batch``, re-exported as Fluid 1.8's
  ``fluid.io`` does (placegroup/datafeed/reader_decorators.py), and ``default_collate_fn``
  (placegroup/dataloader/);
* checkpoints: every N steps, each process its own part, resumed onto any number of pservers
  (``CheckpointConfig``, ``save_checkpoint``, ``load_checkpoint``, ``latest_checkpoint``):
  checkpoint.py, with its on-disk layout in checkpoint_store.py and the re-slicing of saved
  blocks in checkpoint_reslice.py (docs/checkpoint.md).

The modules here import the IR, the data layer and the executor's Scope; nothing below imports
them (the executor's step hook is registered from checkpoint.py, NOTE(step-hooks)).
"""
from placegroup.io.checkpoint import CheckpointConfig, load_checkpoint, save_checkpoint
from placegroup.io.checkpoint_store import latest_checkpoint
from placegroup.datafeed.data_loader import DataLoader, PyReader
from placegroup.io.files import load_program, save_program
from placegroup.io.inference import load_inference_model, save_inference_model
from placegroup.io.var_files import (is_parameter, is_persistable, load_params, load_persistables, load_vars,
                                     save_params, save_persistables, save_vars)
from placegroup.util.var_format import VAR_FORMAT_VERSION, VAR_MAGIC, index_vars  # noqa: F401  (the format, for tools)

__all__ = ["is_parameter", "is_persistable", "latest_checkpoint", "load_checkpoint", "load_inference_model", "load_params",
           "load_persistables", "load_program", "load_vars", "index_vars", "save_checkpoint",
           "save_inference_model", "save_params", "save_persistables", "save_program", "save_vars", "CheckpointConfig"]
__all__ += ["DataLoader", "PyReader"]
from placegroup.io.program_state import (ProgramStateError, get_program_parameter,  # noqa: E402
                                         get_program_persistable_vars, load, load_program_state, save,
                                         set_program_state)
from placegroup.dataloader.dataloader_iter import default_collate_fn  # noqa: E402
from placegroup.datafeed.reader_decorators import (ComposeNotAligned, batch, buffered, cache, chain,  # noqa: E402
                                                   compose, firstn, map_readers, multiprocess_reader, shuffle,
                                                   xmap_readers)

__all__ += ["ProgramStateError", "get_program_parameter", "get_program_persistable_vars", "load",
            "load_program_state", "save", "set_program_state"]
__all__ += ["ComposeNotAligned", "batch", "buffered", "cache", "chain", "compose", "default_collate_fn",
            "firstn", "map_readers", "multiprocess_reader", "shuffle", "xmap_readers"]
from placegroup.io.program_helpers import (append_fetch_ops, get_parameter_value,  # noqa: E402
                                           get_parameter_value_by_name, is_belong_to_optimizer, prepend_feed_ops)
from placegroup.util import log_helper  # noqa: E402

get_logger = log_helper.get_logger  # Fluid 1.8's fluid.io binds it

__all__ += ["append_fetch_ops", "get_parameter_value", "get_parameter_value_by_name", "is_belong_to_optimizer",
            "prepend_feed_ops"]
