"""Protobuf ``.proto`` text ↔ ``FileDescriptorProto``: the form registries keep.

Confluent's Java serializers register ``.proto`` text, and some Confluent-compatible
registries (``rivven-schema``, the tests' server) accept nothing else and cannot answer
``format=serialized``; icetide decodes with descriptors (Python's ``protobuf`` has no
``.proto`` parser). So both directions are here:

- :func:`descriptor_to_proto` prints the descriptors icetide builds itself
  (:func:`~icetide.schema.convert.protobuf.avro_to_protobuf`): proto3, package, imports,
  messages (nested too), enums, ``repeated``, ``map<K, V>``, proto3 ``optional``, field
  numbers, and Confluent's ``(confluent.field_meta).params`` field option (the Connect
  names of Debezium's logical types). Anything else is refused with its name, not
  printed wrong.
- :func:`proto_to_descriptor` compiles text with ``protoc`` from ``grpcio-tools``
  (the ``registry`` extra); well-known imports (``google/protobuf/timestamp.proto``…)
  resolve from its bundled include folder, ``confluent/meta.proto`` from
  confluent-kafka's compiled copy.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from icetide.errors import SchemaError

_META = "confluent/meta.proto"
_TYPE_NAMES = {
    1: "double",
    2: "float",
    3: "int64",
    4: "uint64",
    5: "int32",
    6: "fixed64",
    7: "fixed32",
    8: "bool",
    9: "string",
    12: "bytes",
    13: "uint32",
    15: "sfixed32",
    16: "sfixed64",
    17: "sint32",
    18: "sint64",
}
"""FieldDescriptorProto.Type number → .proto keyword (message=11, enum=14 by name)."""
_REPEATED, _MESSAGE, _ENUM = 3, 11, 14


def descriptor_to_proto(file: Any) -> str:
    """The ``.proto`` text of a proto3 ``FileDescriptorProto`` (see the module doc).

    >>> from icetide.schema.convert.protobuf import avro_to_protobuf
    >>> print(descriptor_to_proto(avro_to_protobuf({"type": "record", "name": "V",
    ...     "fields": [{"name": "id", "type": "long"}]})), end="")
    syntax = "proto3";
    <BLANKLINE>
    message V {
      int64 id = 1;
    }
    """
    if file.syntax != "proto3":
        raise SchemaError(
            f"Protobuf file {file.name!r} is {file.syntax or 'proto2'}: only proto3 is printed",
            hint="capture builds proto3 descriptors; register other files as .proto text",
        )
    if file.extension or file.service:
        raise SchemaError(f"Protobuf file {file.name!r} has extensions or services", hint="")
    lines = ['syntax = "proto3";', ""]
    if file.package:
        lines += [f"package {file.package};", ""]
    imports = list(file.dependency)
    if _uses_field_meta(file.message_type):
        imports.append(_META)
    imports += _well_known_imports(file)
    imports = list(dict.fromkeys(imports))
    if imports:
        lines += [f'import "{name}";' for name in imports] + [""]
    body: list[str] = []
    for enum in file.enum_type:
        body += _enum(enum, "")
    for message in file.message_type:
        body += _message(message, "")
    return "\n".join(lines + body) + "\n"


def _message(message: Any, indent: str) -> list[str]:
    if message.extension or message.extension_range or message.HasField("options"):
        raise SchemaError(f"Protobuf message {message.name} has options or extensions", hint="")
    entries = {e.name: e for e in message.nested_type if e.options.map_entry}
    out = [f"{indent}message {message.name} {{"]
    inner = indent + "  "
    real_oneofs: dict[int, list[Any]] = {}
    for field in message.field:
        if field.HasField("oneof_index") and not field.proto3_optional:
            real_oneofs.setdefault(field.oneof_index, []).append(field)
            continue
        out.append(inner + _field(field, message.name, entries))
    for index, fields in real_oneofs.items():
        out.append(f"{inner}oneof {message.oneof_decl[index].name} {{")
        out += [inner + "  " + _field(f, message.name, entries) for f in fields]
        out.append(f"{inner}}}")
    for enum in message.enum_type:
        out += _enum(enum, inner)
    for nested in message.nested_type:
        if nested.name not in entries:
            out += _message(nested, inner)
    out.append(f"{indent}}}")
    return out


def _field(field: Any, scope: str, entries: dict[str, Any]) -> str:
    entry_name = field.type_name.rsplit(".", 1)[-1]
    if field.label == _REPEATED and field.type == _MESSAGE and entry_name in entries:
        key, value = entries[entry_name].field
        kind = f"map<{_type(key, scope)}, {_type(value, scope)}>"
    else:
        label = {_REPEATED: "repeated "}.get(field.label, "")
        if field.proto3_optional:
            label = "optional "
        kind = label + _type(field, scope)
    return f"{kind} {field.name} = {field.number}{_options(field, scope)};"


def _type(field: Any, scope: str) -> str:
    if field.type in (_MESSAGE, _ENUM):
        return str(field.type_name)  # fully qualified (".pkg.Name"), valid in .proto
    if field.type not in _TYPE_NAMES:
        raise SchemaError(
            f"Protobuf field {scope}.{field.name}: type {field.type} (groups) is not printed",
            hint="use a message instead of a group",
        )
    return _TYPE_NAMES[field.type]


def _options(field: Any, scope: str) -> str:
    """`` [(confluent.field_meta) = {...}]`` for Connect names; no other option is kept."""
    from icetide.schema.convert.protobuf import _field_meta

    if not field.HasField("options"):
        return ""
    from confluent_kafka.schema_registry.confluent import meta_pb2
    from google.protobuf import descriptor_pb2

    params = _field_meta(field)
    others = descriptor_pb2.FieldOptions.FromString(field.options.SerializeToString())
    others.ClearExtension(meta_pb2.field_meta)  # type: ignore[attr-defined]  # generated
    if not params or others.ByteSize():
        raise SchemaError(
            f"Protobuf field {scope}.{field.name} has options other than "
            "(confluent.field_meta).params, which are not printed",
            hint="capture writes only Connect names as field options",
        )
    entries = " ".join(
        f"params: {{key: {json.dumps(k)} value: {json.dumps(v)}}}" for k, v in params.items()
    )
    return f" [(confluent.field_meta) = {{{entries}}}]"


def _uses_field_meta(messages: Any) -> bool:
    return any(f.HasField("options") for m in messages for f in m.field) or any(
        _uses_field_meta(m.nested_type) for m in messages
    )


def _well_known_imports(file: Any) -> list[str]:
    """The files of the ``google.protobuf`` types the fields name (Timestamp, wrappers): a
    descriptor built by hand may use them without listing the import."""
    from google.protobuf import descriptor_pool, timestamp_pb2, wrappers_pb2

    del timestamp_pb2, wrappers_pb2  # imported to load them into the default pool

    def names(messages: Any) -> list[str]:
        out = [f.type_name for m in messages for f in m.field]
        return out + [n for m in messages for n in names(m.nested_type)]

    files = []
    for name in names(file.message_type):
        if name.startswith(".google.protobuf."):
            files.append(descriptor_pool.Default().FindMessageTypeByName(name[1:]).file.name)
    return files


def _enum(enum: Any, indent: str) -> list[str]:
    values = [f"{indent}  {v.name} = {v.number};" for v in enum.value]
    return [f"{indent}enum {enum.name} {{", *values, f"{indent}}}"]


def proto_to_descriptor(text: str, name: str = "schema.proto") -> Any:
    """The ``FileDescriptorProto`` of ``.proto`` text, compiled by ``protoc``.

    Raises :class:`~icetide.errors.SchemaError` with protoc's messages when the text does
    not compile (an import the registry would give as a reference is not resolved here).
    """
    from google.protobuf import descriptor_pb2

    try:
        from grpc_tools import protoc
    except ImportError as exc:  # pragma: no cover - the registry extra installs it
        raise SchemaError(
            "reading a Protobuf schema given as .proto text needs grpcio-tools",
            hint="pip install 'icetide[registry]'",
        ) from exc
    include = Path(protoc.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory(prefix="icetide-proto-") as folder:
        root = Path(folder)
        (root / name).write_text(text, encoding="utf-8")
        meta = root / "meta.pb"
        meta.write_bytes(_meta_set().SerializeToString())
        out = root / "out.pb"
        args = [
            "protoc",
            f"--proto_path={root}",
            f"--proto_path={include}",
            f"--descriptor_set_in={meta}",
            f"--descriptor_set_out={out}",
            name,
        ]
        # protoc writes its errors to file descriptor 2: catch them for the message.
        errors = root / "errors.txt"
        with errors.open("w+b") as sink, contextlib.ExitStack() as stack:
            saved = os.dup(2)
            stack.callback(os.close, saved)
            sys.stderr.flush()
            os.dup2(sink.fileno(), 2)
            stack.callback(os.dup2, saved, 2)
            code = protoc.main(args)
        if code != 0:
            message = errors.read_text(encoding="utf-8", errors="replace").strip()
            message = message.replace(f"{root}/", "")
            # protoc's own log lines (absl's preamble, edition warnings) are noise here.
            located = [line for line in message.splitlines() if line.startswith(f"{name}:")]
            message = "\n".join(located) or message
            raise SchemaError(
                f"the Protobuf schema {name} does not compile: {message or f'protoc {code}'}",
                hint="check the registered .proto text and its imports",
            )
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    return next(f for f in files if f.name == name)


def _meta_set() -> Any:
    """``confluent/meta.proto`` (and what it imports) as a descriptor set for protoc."""
    from confluent_kafka.schema_registry.confluent import meta_pb2
    from google.protobuf import descriptor_pb2

    files = descriptor_pb2.FileDescriptorSet()
    for source in (descriptor_pb2.DESCRIPTOR, meta_pb2.DESCRIPTOR):
        source.CopyToProto(files.file.add())
    return files
