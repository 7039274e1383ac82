"""prog.bin: a Program as bytes, and back (DESIGN.md §2, §7).

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
from typing import Any, Optional, Union

import msgpack
import pydantic

from placegroup.errors import ProgramError, SerializationError

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


class ClusterSchema(pydantic.BaseModel):
    """Who takes part: set by the transpiler, read by every executor."""

    model_config = pydantic.ConfigDict(extra="forbid")
    trainers: int
    trainer_endpoints: list[str] = []
    pservers: list[str] = []
    sync_mode: bool = True
    staleness: int = 0
    merge_steps: int = 1    # trainer steps whose gradients are merged before one push (issue #6)
    digest: str = ""        # of the whole transpiled job: every process must agree
    startup: bool = False   # this is the job's startup program (its values have version -1)


class ProgramSchema(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    random_seed: int = 0
    blocks: list[BlockSchema]
    executor: Optional[ExecutorSchema] = None
    cluster: Optional[ClusterSchema] = None
    provenance: list[str] = []
    extra: dict[str, Attr] = {}


def _plain(v: Any) -> Any:
    """Attr values as msgpack-able plain Python (numpy scalars and tuples included)."""
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if hasattr(v, "item") and not isinstance(v, (bool, int, float, str)):
        return v.item()
    return v


def program_to_dict(program) -> dict:
    blocks = []
    for b in program.blocks:
        vars_ = []
        for v in b.vars.values():
            d = dict(name=v.name, shape=None if v.shape is None else list(v.shape), dtype=v.dtype,
                     type=v.type, persistable=v.persistable, stop_gradient=v.stop_gradient,
                     is_data=v.is_data, is_parameter=v.is_parameter, lod_level=v.lod_level,
                     place=None if v.place is None else str(v.place), attrs=_plain(v.attrs))
            if v.is_parameter:
                d.update(trainable=v.trainable, optimize_attr=_plain(v.optimize_attr))
            vars_.append(d)
        ops = [dict(type=op.type, inputs=op.inputs, outputs=op.outputs, attrs=_plain(op.attrs),
                    role=op.role, place=None if op.place is None else str(op.place),
                    edges=dict(op.edges), param=op.param)
               for op in b.ops]
        blocks.append(dict(idx=b.idx, parent_idx=b.parent_idx, vars=vars_, ops=ops))
    ex = program.executor
    return dict(random_seed=program.random_seed, blocks=blocks, provenance=list(program.provenance),
                executor=None if ex is None else dict(role=ex.role.value, endpoint=ex.endpoint,
                                                      rank=ex.rank),
                cluster=None if program.cluster is None else dict(program.cluster))


def program_from_dict(d: dict, *, validate: bool = False):
    """A Program from its dict form; with ``validate``, anything wrong is a SerializationError
    naming the field (the schema) or the value (a place, a dtype, an op's slots)."""
    if not validate:
        return _build(d, False)
    try:
        d = ProgramSchema.model_validate(d).model_dump()
    except pydantic.ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise SerializationError(f"prog.bin does not fit schema {SCHEMA_VERSION}: field "
                                 f"{where!r}: {err['msg']} ({e.error_count()} error(s))") from None
    try:
        return _build(d, True)
    except (ValueError, ProgramError) as e:
        raise SerializationError(f"prog.bin holds a value the IR rejects: {e}") from None


def _build(d: dict, validate: bool):
    from placegroup.framework import Block, Operator, Parameter, Program, Variable, _validate_op
    from placegroup.ops.registry import ROLES
    from placegroup.place_group import ExecutorId

    p = Program()
    p.blocks = []
    for bd in d["blocks"]:
        b = Block(p, bd["idx"], bd["parent_idx"])
        for vd in bd["vars"]:
            common = dict(shape=vd["shape"], dtype=vd["dtype"], type=vd.get("type", "lod_tensor"),
                          is_data=vd.get("is_data", False), place=vd.get("place"),
                          attrs=vd.get("attrs") or {}, lod_level=vd.get("lod_level", 0))
            if vd.get("is_parameter"):
                v = Parameter(b, vd["name"], trainable=vd.get("trainable", True),
                              optimize_attr=vd.get("optimize_attr"),
                              persistable=vd.get("persistable", True), **common)
            else:
                v = Variable(b, vd["name"], persistable=vd.get("persistable", False),
                             stop_gradient=vd.get("stop_gradient", False), **common)
            v.stop_gradient = vd.get("stop_gradient", v.stop_gradient)
            b.vars[v.name] = v
        for od in bd["ops"]:
            try:
                op = Operator(b, od["type"], od["inputs"], od["outputs"], od.get("attrs"),
                              od.get("role"), od.get("place"))
                if validate:
                    _validate_op(op.opdef, op.inputs, op.outputs, op.attrs)
                    if op.role not in ROLES:
                        raise ProgramError(f"op {op.type!r} has unknown role {op.role!r}")
            except ProgramError as e:
                raise SerializationError(f"prog.bin block {bd['idx']}: {e}") from None
            op.edges = dict(od.get("edges") or {})
            op.param = od.get("param")
            b.ops.append(op)
        p.blocks.append(b)
    p.random_seed = d.get("random_seed", 0)
    p.provenance = list(d.get("provenance") or [])
    ex = d.get("executor")
    p.executor = None if ex is None else ExecutorId.parse(ex["role"], ex.get("endpoint"),
                                                           rank=ex.get("rank"))
    p.cluster = None if d.get("cluster") is None else dict(d["cluster"])
    return p


def program_to_bytes(program) -> bytes:
    payload = msgpack.packb(program_to_dict(program), use_bin_type=True)
    digest = hashlib.blake2b(payload, digest_size=16).digest()
    return _HEAD.pack(MAGIC, SCHEMA_VERSION, len(payload), digest) + payload


def program_from_bytes(data: bytes):
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
    return program_from_dict(d, validate=True)
