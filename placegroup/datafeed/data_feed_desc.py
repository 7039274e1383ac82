"""Fluid 1.8's ``fluid.DataFeedDesc``: a data feed's settings, read from a text file.

The file is in protobuf's text format (placegroup/util/text_format.py reads it; no protobuf is
needed), with the fields of Fluid's ``paddle.framework.DataFeedDesc`` message::

    name: "MultiSlotDataFeed"          # the data feed's class
    batch_size: 2                      # default 32
    multi_slot_desc {
        slots { name: "words" type: "uint64" is_dense: false is_used: true }
        slots { name: "label" type: "uint64" is_dense: false is_used: true }
    }
    pipe_command: "cat"                # optional; also thread_num, rank_offset, pv_batch_size

A slot is one field of a MultiSlot line (NOTE(multislot-format) in placegroup/datafeed/multislot.py):
``type`` is ``"uint64"`` (ids) or ``"float"``, ``is_dense`` says it is fed as a tensor rather
than a LoDTensor, and ``shape`` (repeated ints) is a dense slot's shape.

A dataset (placegroup/datafeed/dataset_factory.py) describes itself with the same message:
``dataset.desc()`` is this text and ``dataset.proto_desc`` the message, as in Fluid.
"""
from __future__ import annotations

from placegroup.util.text_format import message, parse, to_text

__all__ = ["DataFeedDesc"]

SlotMsg = message("paddle.framework.Slot",
                  "name:string type:string is_dense:bool=false is_used:bool=false shape:*int32")
MultiSlotDescMsg = message("paddle.framework.MultiSlotDesc", "slots:*Slot", Slot=SlotMsg)
DataFeedDescMsg = message("paddle.framework.DataFeedDesc",
                          "name:string batch_size:int32=32 multi_slot_desc:MultiSlotDesc pipe_command:string "
                          "thread_num:int32 rank_offset:string pv_batch_size:int32=32",
                          MultiSlotDesc=MultiSlotDescMsg)


class DataFeedDesc:
    """A data feed description read from ``proto_file`` (protobuf text format, module docstring).

    Args:
        proto_file: path of the text file.

    Attributes:
        proto_desc: the message (``proto_desc.batch_size``, ``proto_desc.multi_slot_desc.slots``).

    Raises:
        OSError: the file cannot be read.
        placegroup.util.text_format.TextFormatError: the text is not a DataFeedDesc (an unknown field,
            a field given twice, a value of the wrong kind), at ``line:column``.

    Example::

        data_feed = fluid.DataFeedDesc("data.proto")
        data_feed.set_batch_size(128)
        data_feed.set_dense_slots(["words"])  # fed as a tensor, not a LoDTensor
        data_feed.set_use_slots(["words"])
        print(data_feed.desc())

    Note: Fluid sets ``pipe_command: "cat"`` before it parses the file, so a file that names its
    own ``pipe_command`` fails there ("should not have multiple pipe_command fields"); here the
    file's pipe command is taken.

    Thread-safety: a plain object; change it from one thread.
    """

    def __init__(self, proto_file: str) -> None:
        with open(proto_file, "r", encoding="utf-8") as f:
            self.proto_desc = parse(f.read(), DataFeedDescMsg)
        if not self.proto_desc.HasField("pipe_command"):
            self.proto_desc.pipe_command = "cat"
        # as Fluid: slots are found by name only for a MultiSlotDataFeed
        self._name_to_index = ({s.name: i for i, s in enumerate(self.proto_desc.multi_slot_desc.slots)}
                               if self.proto_desc.name == "MultiSlotDataFeed" else None)

    def set_batch_size(self, batch_size: int) -> None:
        """Set the number of instances per batch.

        Raises:
            TypeError: ``batch_size`` is not an int (as protobuf).
            ValueError: it is out of int32's range.
        """
        self.proto_desc.batch_size = batch_size

    def set_dense_slots(self, dense_slots_name) -> None:
        """Make the slots named in ``dense_slots_name`` dense (fed as tensors; slots are
        sparse, fed as LoDTensors, by default).

        Raises:
            ValueError: the feed is not a ``MultiSlotDataFeed`` (as Fluid).
            KeyError: a name that is no slot of the file.
        """
        self._slot_flags("set_dense_slots", dense_slots_name, "is_dense")

    def set_use_slots(self, use_slots_name) -> None:
        """Mark the slots named in ``use_slots_name`` used in training (a slot is unused unless
        the file or this says so).

        Raises:
            ValueError: the feed is not a ``MultiSlotDataFeed`` (as Fluid).
            KeyError: a name that is no slot of the file.
        """
        self._slot_flags("set_use_slots", use_slots_name, "is_used")

    def _slot_flags(self, what: str, names, flag: str) -> None:
        if self._name_to_index is None:
            raise ValueError(f"Only MultiSlotDataFeed needs {what}, please check your datafeed.proto")
        slots = self.proto_desc.multi_slot_desc.slots
        for name in names:
            if name not in self._name_to_index:
                raise KeyError(f"{name!r}: no slot of that name in this DataFeedDesc; its slots are "
                               f"{list(self._name_to_index)}")
            setattr(slots[self._name_to_index[name]], flag, True)

    def desc(self) -> str:
        """The description in protobuf text format (what Fluid prints)."""
        return to_text(self.proto_desc)
