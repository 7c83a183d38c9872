"""Read a pipeline's YAML config: parse, interpolate ``${VAR}``, validate, explain.

Every problem found is reported at once, one line each, as ``<yaml.path>: <what is
wrong> (line N)``, in a single :class:`~icetide.errors.ConfigError` whose ``path`` is the
first problem's path — so a user fixes the whole file in one round.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from icetide.config.model import Config, ConfigProblems, Loc, format_loc
from icetide.config.secrets import Secret
from icetide.errors import ConfigError
from icetide.schema.file import SchemaFile, SchemaFileProblems, read_schema_data
from icetide.schema.model import TableSchema

_REFERENCE = re.compile(r"\$(\$?)\{([^}]*)\}")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EXAMPLE_HINT = "`icetide init` writes a commented example of every option"
_SCHEMA_HINT = (
    "see the commented example schemas/customers.yaml that `icetide init DIR` writes; "
    "ids are whole numbers from 1, never reused"
)
_MISSING_SCHEMA_HINT = (
    "`icetide onboard` writes it from the source database's catalog (and creates the "
    "tables); or write it by hand: " + _SCHEMA_HINT
)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the config, at a YAML location."""

    loc: Loc
    message: str
    hint: str | None = None
    line: int | None = None
    """Where to point; by default the line of ``loc``'s key."""


def load_config(path: str | Path) -> Config:
    """Load and validate a pipeline config; a folder means its ``icetide.yaml``.

    Relative paths in the file resolve against the file's folder, not the working
    directory, so a pipeline behaves the same wherever it is started from.
    """
    file = Path(os.path.abspath(Path(path).expanduser()))
    if file.is_dir():
        file = file / "icetide.yaml"
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"config file {file} not found", hint="create one with `icetide init`"
        ) from None
    data, lines, problems = _parse(text, file)
    data = interpolate(data, os.environ, problems=problems)
    title = f"invalid config {file}"
    if problems:
        raise _error(title, problems, lines)
    try:
        return Config.model_validate(data, context={"config_dir": file.parent})
    except ValidationError as exc:
        raise _error(title, _validation_problems(exc, data), lines, _EXAMPLE_HINT) from None


def load_table_schemas(config: Config) -> dict[str, TableSchema]:
    """Read each table's schema file, keyed by table name, and check it fits the config.

    A schema file without ``table:`` takes the config's table name. Every problem of
    every file is reported at once: each invalid file as its own block of
    ``<yaml.path>: <what is wrong> (line N)`` rows, like the config's.
    """
    schemas: dict[str, TableSchema] = {}
    problems: list[Problem] = []
    invalid: list[ConfigError] = []
    for i, table in enumerate(config.tables):
        where: Loc = ("tables", i, "schema")
        if not table.schema_file.is_file():
            problems.append(
                Problem(
                    where,
                    f"schema file {table.schema_file} not found",
                    _MISSING_SCHEMA_HINT,
                )
            )
            continue
        try:
            schema = load_schema_file(table.schema_file, f"{format_loc(where)} of the config")
        except ConfigError as exc:
            invalid.append(exc)
            continue
        if schema.table and schema.table.casefold() != table.name.casefold():
            problems.append(
                Problem(
                    where,
                    f"{table.schema_file} describes table {schema.table!r}, not {table.name!r}",
                    "point schema at the right file or fix `table:` in it",
                )
            )
        elif table.primary_key is not None and tuple(table.primary_key) != schema.primary_key:
            problems.append(
                Problem(
                    ("tables", i, "primary_key"),
                    f"{list(table.primary_key)} differs from the primary key "
                    f"{list(schema.primary_key)} in {table.schema_file}",
                    "drop primary_key from the config or make it equal to the schema file's",
                )
            )
        else:
            schemas[table.name] = schema if schema.table else schema.renamed(table.name)
    if problems:
        invalid.append(_error("the tables' schema files do not match the config", problems))
    if len(invalid) > 1:
        hints = dict.fromkeys(e.hint for e in invalid if e.hint)
        combined = ConfigError("\n".join(e.message for e in invalid), hint="; ".join(hints) or None)
        combined.path = invalid[0].path
        raise combined
    if invalid:
        raise invalid[0]
    return schemas


def load_schema_file(path: str | Path, used_as: str = "") -> TableSchema:
    """Read one schema file; every problem is reported at once with its YAML path and
    line, like the config's (``columns[1].id: must be a whole number (got 'one') (line
    5)``), in a :class:`ConfigError` whose ``path`` is the first problem's.

    ``used_as`` says where the config points at the file, for the message's title.
    """
    file = Path(os.path.abspath(Path(path).expanduser()))
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"schema file {file} not found", hint=_MISSING_SCHEMA_HINT) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read schema file {file}: {exc}") from None
    data, lines, problems = _parse(text, file, "schema file", "table, primary_key, columns")
    title = f"invalid schema file {file}" + (f" ({used_as})" if used_as else "")
    if problems:
        raise _error(title, problems, lines, _SCHEMA_HINT)
    try:
        return read_schema_data(data, str(file))
    except ValidationError as exc:
        found = _validation_problems(exc, data, SchemaFile)
        raise _error(title, found, lines, _SCHEMA_HINT) from None


def interpolate(
    value: Any, env: Mapping[str, str], loc: Loc = (), problems: list[Problem] | None = None
) -> Any:
    """Replace ``${VAR}`` and ``${VAR:-default}`` in every string of parsed YAML.

    A string that referenced a variable comes back as a :class:`Secret`; ``$${`` writes a
    literal ``${``. A missing variable without default is added to ``problems`` (or
    raised when none is given).

    >>> interpolate({"uri": "http://${HOST:-localhost}:8181"}, {})
    {'uri': '***'}
    >>> str(interpolate("http://${HOST:-localhost}:8181", {"HOST": "rest"}))
    'http://rest:8181'
    """
    found: list[Problem] = [] if problems is None else problems
    if isinstance(value, dict):
        result: Any = {k: interpolate(v, env, (*loc, str(k)), found) for k, v in value.items()}
    elif isinstance(value, list):
        result = [interpolate(v, env, (*loc, i), found) for i, v in enumerate(value)]
    elif isinstance(value, str):
        result = _substitute(value, env, loc, found)
    else:
        result = value
    if problems is None and found:
        raise _error("cannot interpolate the config", found)
    return result


def _substitute(text: str, env: Mapping[str, str], loc: Loc, problems: list[Problem]) -> str:
    used = False
    values: list[str] = []

    def one(match: re.Match[str]) -> str:
        nonlocal used
        if match.group(1):
            return "${" + match.group(2) + "}"
        name, has_default, default = match.group(2).partition(":-")
        if not _VARIABLE.fullmatch(name):
            problems.append(
                Problem(
                    loc,
                    f"bad reference {match.group(0)}",
                    "write ${VAR} or ${VAR:-default}, and $${ for a literal ${",
                )
            )
            return ""
        used = True
        value = env.get(name)
        # Like the shell, ${VAR:-default} also replaces a variable that is set but empty.
        if value or (value is not None and not has_default):
            values.append(value)
            return value
        if has_default:
            return default
        problems.append(
            Problem(
                loc,
                f"environment variable {name} is not set",
                f"set the environment variable {name}",
            )
        )
        return ""

    result = _REFERENCE.sub(one, text)
    if not used:
        return result
    secret = Secret(result)
    secret.parts = tuple(values)
    return secret


def _parse(
    text: str,
    file: Path,
    kind: str = "config file",
    keys: str = "pipeline, catalog, tables, …",
) -> tuple[Any, dict[Loc, int], list[Problem]]:
    """The YAML data, the line of every key and list item, and duplicate-key problems.

    ``kind`` and ``keys`` name the file's kind and its top-level keys in messages.
    """
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{file}:{mark.line + 1}:{mark.column + 1}" if mark else str(file)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(
            f"{where}: invalid YAML: {problem}",
            hint="check the indentation, quotes and ':' at that line",
        ) from None
    if node is None or data is None:
        raise ConfigError(f"{kind} {file} is empty", hint=_EXAMPLE_HINT)
    if not isinstance(data, dict):
        raise ConfigError(
            f"{kind} {file} must be a mapping of keys ({keys})",
            hint=_EXAMPLE_HINT,
        )
    lines: dict[Loc, int] = {}
    problems: list[Problem] = []
    _walk(node, (), lines, problems, set())
    return data, lines, problems


def _walk(
    node: yaml.Node, loc: Loc, lines: dict[Loc, int], problems: list[Problem], seen: set[int]
) -> None:
    if id(node) in seen:  # an alias pointing at one of its own ancestors
        return
    seen = seen | {id(node)}
    if isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key_node, value_node in node.value:
            key, line = str(key_node.value), key_node.start_mark.line + 1
            if key in first:
                problems.append(
                    Problem(
                        (*loc, key),
                        f"duplicate key (first at line {first[key]})",
                        "keep one of them: YAML would silently use the last",
                        line=line,
                    )
                )
            first.setdefault(key, line)
            lines.setdefault((*loc, key), line)
            _walk(value_node, (*loc, key), lines, problems, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[(*loc, i)] = item.start_mark.line + 1
            _walk(item, (*loc, i), lines, problems, seen)


def _validation_problems(
    exc: ValidationError, data: Any, root: type[BaseModel] | None = None
) -> list[Problem]:
    """One problem per pydantic error; ``root`` is the file's model (the config's by
    default), whose keys feed the did-you-mean."""
    problems: list[Problem] = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        cause = error.get("ctx", {}).get("error")
        if isinstance(cause, ConfigProblems | SchemaFileProblems):
            problems.extend(Problem((*loc, *sub), message) for sub, message in cause.problems)
        else:
            problems.append(Problem(loc, _describe(error, data, root)))
    return problems


_PLAIN = {
    "missing": "required",
    "dict_type": "must be a mapping of keys",
    "model_type": "must be a mapping of keys",
    "model_attributes_type": "must be a mapping of keys",
    "tuple_type": "must be a list",
    "list_type": "must be a list",
    "string_type": "must be a string",
    "string_too_short": "must not be empty",
    "too_short": "needs at least one entry",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "bool_type": "must be true or false (without quotes)",
    "bool_parsing": "must be true or false (without quotes)",
}


def _describe(error: ErrorDetails, data: Any, root: type[BaseModel] | None = None) -> str:
    """One pydantic error in the config's words, with the offending value when it is
    short and not a secret."""
    kind, loc, ctx = error["type"], tuple(error["loc"]), error.get("ctx", {})
    if kind == "extra_forbidden":
        allowed = allowed_keys(loc[:-1], root) or []
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        if close:
            return f"unknown key; did you mean {close[0]!r}?"
        return f"unknown key; allowed keys are {', '.join(allowed)}"
    if kind == "literal_error":
        message = f"must be {ctx['expected']}"
    elif kind == "greater_than_equal":
        message = f"must be at least {ctx['ge']}"
    elif kind == "less_than_equal":
        message = f"must be at most {ctx['le']}"
    else:
        message = _PLAIN.get(kind) or error["msg"].removeprefix("Value error, ")
    value = error.get("input")
    if (
        kind != "missing"
        and isinstance(value, str | int | float | bool)
        and not isinstance(_lookup(data, loc), Secret)
        and repr(value) not in message  # already quoted, e.g. "unknown column type 'x'"
    ):
        message += f" (got {value!r})"
    return message


def _lookup(data: Any, loc: Loc) -> Any:
    for part in loc:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        else:
            return None
    return data


def _error(
    title: str, problems: list[Problem], lines: dict[Loc, int] | None = None, hint: str = ""
) -> ConfigError:
    """One ConfigError listing every problem, ordered as they appear in the file."""

    def line_of(loc: Loc) -> int | None:
        for end in range(len(loc), 0, -1):
            if loc[:end] in (lines or {}):
                return (lines or {})[loc[:end]]
        return None

    problems = sorted(problems, key=lambda p: p.line or line_of(p.loc) or 0)
    rows = []
    for problem in problems:
        line = problem.line or line_of(problem.loc)
        where = f" (line {line})" if line else ""
        rows.append(f"  {format_loc(problem.loc) or '(top level)'}: {problem.message}{where}")
    hints = list(dict.fromkeys(p.hint for p in problems if p.hint)) or [hint]
    error = ConfigError(
        f"{title}:\n" + "\n".join(rows), hint="; ".join(h for h in hints if h) or None
    )
    error.path = format_loc(problems[0].loc)
    return error


def allowed_keys(loc: Loc, root: type[BaseModel] | None = None) -> list[str] | None:
    """The YAML keys allowed in the mapping at ``loc`` (``("tables", 0)`` → TableConfig's),
    or None when that mapping is free-form; feeds the did-you-mean of unknown keys.

    ``root`` is the model of the whole file: :class:`Config` unless told (a schema file's
    is :class:`~icetide.schema.model.SchemaFile`)."""
    model: type[BaseModel] | None = root or Config
    for part in loc:
        if model is None:
            return None
        if isinstance(part, int):
            continue
        fields = {(f.alias or n): f for n, f in model.model_fields.items()}
        if part not in fields:
            return None
        model = _model_in(fields[part].annotation)
    return None if model is None else [(f.alias or n) for n, f in model.model_fields.items()]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model class inside ``X``, ``X | None`` or ``tuple[X, ...]``, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None
