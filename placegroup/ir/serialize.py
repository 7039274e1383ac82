"""prog.bin: a Program as bytes, and back; a damaged file is refused, naming what is wrong.

Layout of the file::

    b"PGPROG"  magic (6 bytes)
    u16        schema version (little-endian)
    u64        payload length
    16 bytes   blake2b-128 digest of the payload
    payload    msgpack of ``ProgramSchema`` (pydantic, below)

A short file, a wrong magic, another schema version, a digest that does not match (tampering
or bit rot) and a payload that does not fit the schema each raise ``SerializationError``
naming what is wrong (for the schema: the field's path). Nothing is pickled.
"""
from __future__ import annotations

import hashlib
import struct
from typing import Optional, Union

import msgpack
import pydantic

from placegroup.errors import SerializationError
from placegroup.ir.cluster import ClusterSchema

MAGIC = b"PGPROG"
SCHEMA_VERSION = 1
_HEAD = struct.Struct("<6sHQ16s")

Attr = Union[bool, int, float, str, None, list, dict]


class VarSchema(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    name: str
    shape: Optional[list[int]]
    dtype: str
    type: str = "lod_tensor"
    persistable: bool = False
    stop_gradient: bool = False
    is_data: bool = False
    is_parameter: bool = False
    trainable: bool = True
    optimize_attr: dict[str, Attr] = {}
    lod_level: int = 0
    place: Optional[str] = None
    attrs: dict[str, Attr] = {}


class OpSchema(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    type: str
    inputs: dict[str, list[str]]
    outputs: dict[str, list[str]]
    attrs: dict[str, Attr] = {}
    role: str
    place: Optional[str] = None
    edges: dict[str, str] = {}
    param: Optional[str] = None


class BlockSchema(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    idx: int
    parent_idx: int
    vars: list[VarSchema]
    ops: list[OpSchema]


class ExecutorSchema(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    role: str
    endpoint: Optional[str] = None
    rank: Optional[int] = None


class ProgramSchema(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    random_seed: int = 0
    blocks: list[BlockSchema]
    executor: Optional[ExecutorSchema] = None
    cluster: Optional[ClusterSchema] = None
    provenance: list[str] = []
    extra: dict[str, Attr] = {}


def encode(d: dict) -> bytes:
    """prog.bin bytes of a program's dict form (``placegroup.ir.framework.program_to_dict``)."""
    payload = msgpack.packb(d, use_bin_type=True)
    digest = hashlib.blake2b(payload, digest_size=16).digest()
    return _HEAD.pack(MAGIC, SCHEMA_VERSION, len(payload), digest) + payload


def decode(data: bytes) -> dict:
    """The dict form held by prog.bin bytes, checked against ``ProgramSchema``.

    Raises:
        SerializationError: naming the header part, or the schema field, that is wrong.
    """
    if len(data) < _HEAD.size:
        raise SerializationError(f"prog.bin is truncated: {len(data)} bytes, shorter than its "
                                 f"{_HEAD.size}-byte header")
    magic, version, length, digest = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise SerializationError(f"not a prog.bin: magic is {magic!r}, expected {MAGIC!r}")
    if version != SCHEMA_VERSION:
        raise SerializationError(f"prog.bin has schema version {version}; this placegroup reads "
                                 f"version {SCHEMA_VERSION}")
    payload = data[_HEAD.size:]
    if len(payload) != length:
        raise SerializationError(f"prog.bin is truncated or padded: header says {length} payload "
                                 f"bytes, file has {len(payload)}")
    if hashlib.blake2b(payload, digest_size=16).digest() != digest:
        raise SerializationError("prog.bin checksum mismatch: the payload was modified or "
                                 "corrupted after it was written")
    try:
        d = msgpack.unpackb(payload, raw=False, strict_map_key=True)
    except (ValueError, msgpack.UnpackException) as e:
        raise SerializationError(f"prog.bin payload is not valid msgpack: {e}") from None
    try:
        return ProgramSchema.model_validate(d).model_dump()
    except pydantic.ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise SerializationError(f"prog.bin does not fit schema {SCHEMA_VERSION}: field "
                                 f"{where!r}: {err['msg']} ({e.error_count()} error(s))") from None
