"""Loading a data contract: a built-in layout by name, or a user's file (Pandera YAML/JSON, or a
Python file with a Pandera ``DataFrameModel``/``DataFrameSchema``).

Resolution of ``[dataset] schema`` / ``--schema`` (relative paths against the working directory):

- ``causal_lm``, ``seq2seq``, ``text_classification``, ``token_classification``, ``tabular``,
  ``chat_sft``, ``sft_tokenized``, ``packed_lm``, ``dpo``, ``ctc``: the layout files shipped in ``schemas/`` (installed as ``datacheck.builtin_schemas``);
- ``path/to/file.yaml`` | ``.yml`` | ``.json``: Pandera's polars serialization form, plus an
  optional ``datacheck:`` section (see :mod:`datacheck.contracts.model`);
- ``path/to/file.py:ClassName``: a ``pandera.polars.DataFrameModel`` subclass or a
  ``DataFrameSchema`` object defined in that file.

Pandera's own ``pandera.io.polars_io.from_yaml`` imports pandas to parse check statistics (pandera
0.35), which datacheck does not depend on; so the YAML/JSON text is parsed here and only the
check-free part is handed to ``pandera.io.polars_io.deserialize_schema``; checks are rebuilt from
Pandera's registered built-in checks (``pandera.Check.<name>``). Every error is a
:class:`~datacheck.model.errors.ConfigError` naming the file and the key.
"""
from __future__ import annotations

import copy
import difflib
import importlib.resources
import importlib.util
import re
import stat
from pathlib import Path
from typing import Any

from datacheck.contracts.model import KINDS, ColumnRule, Contract
from datacheck.io import safejson
from datacheck.model.constants import PYTHON_SCHEMA
from datacheck.model.errors import ConfigError

__all__ = ["LAYOUTS", "load_contract", "contract_from_dict", "layout_text", "CONTRACT_FORMAT_VERSION"]

#: Built-in layouts, each a file ``schemas/<name>.yaml``.
LAYOUTS = ("causal_lm", "seq2seq", "text_classification", "token_classification", "tabular",
           "chat_sft", "sft_tokenized", "packed_lm", "dpo", "ctc", "raw_text")
#: Version of the ``datacheck:`` section layout; a newer one is refused.
CONTRACT_FORMAT_VERSION = 1
_KEY = "dataset.schema"
#: Column keys Pandera's polars serialization reads itself; any other key of a column is a check name.
_COLUMN_KEYS = frozenset({"title", "description", "dtype", "nullable", "checks", "name", "unique", "coerce",
                          "required", "regex", "default", "report_duplicates", "drop_invalid_rows"})
_RULE_KEYS = frozenset({"kind", "min_length", "max_length", "min_value", "max_value", "values"})
_SECTION_KEYS = frozenset({"version", "columns", "require_any", "aligned"})


def layout_text(name: str) -> str:
    """The YAML text of built-in layout ``name`` (one of :data:`LAYOUTS`)."""
    return (importlib.resources.files("datacheck.builtin_schemas") / f"{name}.yaml").read_text(encoding="utf-8")


def _err(msg: str, source: str) -> ConfigError:
    return ConfigError(msg, key=_KEY, path=source)


def _check_of(name: str, stats: Any, options: dict[str, Any], where: str, source: str) -> Any:
    """A Pandera built-in check from its serialized statistics (what pandera's polars IO does,
    without its pandas-only datetime handling)."""
    import pandera.backends.polars.builtin_checks  # noqa: F401  (polars implementations, before any Check is built)
    import pandera.polars as pa

    fn = getattr(pa.Check, name, None)
    if fn is None or not callable(fn) or name.startswith("_"):
        raise _err(f"{where}: unknown check {name!r}; use a Pandera built-in check (e.g. in_range, isin, "
                   "greater_than_or_equal_to, str_length) or a Python DataFrameModel for custom checks", source)
    try:
        if isinstance(stats, dict):
            check = fn(**stats)
        else:
            check = fn(stats)
    except Exception as exc:  # noqa: BLE001 - re.error of a pattern, pandera's own errors: the file's arguments
        raise _err(f"{where}: check {name!r} got bad arguments {str(stats)[:120]}: "
                   f"{(str(exc).splitlines() or [type(exc).__name__])[0][:200]}", source) from None
    for k, v in options.items():
        if k not in ("check_name",):
            setattr(check, k, v)
    return check


def _checks_of(raw: dict[str, Any], where: str, source: str) -> list[Any]:
    """Checks of one column (or of the frame): the ``checks:`` list/dict or flat ``name: value`` keys."""
    from pandera.io._check_io import checks_dict_to_list
    from pandera.io._flat_checks import unflatten_component_checks_dict

    d = dict(raw)
    try:
        unflatten_component_checks_dict(d)
        entries = checks_dict_to_list(d.get("checks")) or []
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise _err(f"{where}: cannot read the checks: {exc}", source) from None
    out = []
    for name in sorted(k for k in d if k != "checks"):  # keys pandera's unflatten left as they were
        out.append(_check_of(name, d[name], {}, where, source))
    for e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("options"), dict) or "check_name" not in e["options"]:
            raise _err(f"{where}: a check must be `name: value` or `{{options: {{check_name: ...}}, ...}}`, got {e!r}", source)
        options = dict(e["options"])
        stats = {k: v for k, v in e.items() if k != "options"}
        if set(stats) == {"value"}:
            stats = stats["value"]
        out.append(_check_of(options["check_name"], stats, options, where, source))
    return out


def _rule_of(raw: Any, where: str, source: str) -> ColumnRule:
    if not isinstance(raw, dict):
        raise _err(f"{where}: must be a mapping of {sorted(_RULE_KEYS)}, got {raw!r}", source)
    bad = set(raw) - _RULE_KEYS
    if bad:
        raise _err(f"{where}: unknown key(s) {sorted(bad)}; allowed: {sorted(_RULE_KEYS)}", source)
    kind = raw.get("kind", ())
    if not (kind is None or isinstance(kind, (str, list, tuple))):
        raise _err(f"{where}.kind: must be a kind name or a list of them, got {str(kind)[:80]}", source)
    kind = (kind,) if isinstance(kind, str) else tuple(kind or ())
    for k in kind:
        if not isinstance(k, str) or k not in KINDS:
            raise _err(f"{where}.kind: {k!r} is not one of {list(KINDS)}", source)
    for k in ("min_length", "max_length"):
        v = raw.get(k)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            raise _err(f"{where}.{k}: must be a non-negative integer, got {v!r}", source)
    for k in ("min_value", "max_value"):
        v = raw.get(k)
        if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool)):
            raise _err(f"{where}.{k}: must be a number, got {v!r}", source)
    values = raw.get("values")
    if values is not None and not isinstance(values, list):
        raise _err(f"{where}.values: must be a list, got {values!r}", source)
    return ColumnRule(kind=kind, min_length=raw.get("min_length"), max_length=raw.get("max_length"),
                      min_value=raw.get("min_value"), max_value=raw.get("max_value"),
                      values=tuple(values) if values is not None else None)


def _groups(raw: Any, key: str, source: str) -> tuple[tuple[str, ...], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(g, list) and all(isinstance(c, str) for c in g) for g in raw):
        raise _err(f"datacheck.{key}: must be a list of lists of column names, got {raw!r}", source)
    return tuple(tuple(g) for g in raw)


def contract_from_dict(data: Any, source: str) -> Contract:
    """Build a :class:`Contract` from the parsed YAML/JSON mapping.

    Args:
        data: Pandera's polars schema mapping (``columns``, ``checks``, ``strict``, ...) with an
            optional ``datacheck`` section (``version``, ``columns`` rules, ``require_any``, ``aligned``).
        source: the file or layout name, for messages.

    Raises:
        ConfigError: the mapping is not a Pandera polars schema, names an unknown check or dtype,
            or its ``datacheck`` section has an unknown key or a wrong type.
    """
    import pandera.io.polars_io as pio
    from pandera.errors import SchemaDefinitionError

    if not isinstance(data, dict):
        raise _err(f"a schema file must hold a mapping (Pandera's schema form), got {type(data).__name__}", source)
    data = copy.deepcopy(data)
    section = data.pop("datacheck", None) or {}
    if not isinstance(section, dict):
        raise _err("datacheck: must be a mapping", source)
    bad = set(section) - _SECTION_KEYS
    if bad:
        raise _err(f"datacheck: unknown key(s) {sorted(bad)}; allowed: {sorted(_SECTION_KEYS)}", source)
    version = section.get("version", CONTRACT_FORMAT_VERSION)
    if not isinstance(version, int) or version > CONTRACT_FORMAT_VERSION:
        raise _err(f"datacheck.version {version!r} is newer than this datacheck reads "
                   f"({CONTRACT_FORMAT_VERSION}); upgrade datacheck", source)
    columns = data.get("columns")
    if not isinstance(columns, dict):
        # a YAML file such as ``foo: 1`` is not an (empty) contract: say what the file lacks
        raise ConfigError(f"schema file {source} has no 'columns': not a datacheck/Pandera schema (a mapping "
                          "'columns: {name: {dtype: ..., nullable: ...}}' is required; see the layouts in "
                          "schemas/)", key=_KEY)
    col_checks: dict[str, list[Any]] = {}
    stripped_cols: dict[str, Any] = {}
    for name, props in columns.items():
        props = {} if props is None else props
        if not isinstance(props, dict):
            raise _err(f"columns.{name}: must be a mapping (dtype, nullable, checks...), got {props!r}", source)
        check_part = {k: v for k, v in props.items() if k not in _COLUMN_KEYS or k == "checks"}
        col_checks[name] = _checks_of(check_part, f"columns.{name}", source)
        stripped_cols[name] = {k: v for k, v in props.items() if k in _COLUMN_KEYS and k != "checks"}
    frame_checks = _checks_of({"checks": data.get("checks")}, "checks", source) if data.get("checks") else []
    data["columns"] = stripped_cols
    data["checks"] = None
    try:
        schema = pio.deserialize_schema(data)
    except (SchemaDefinitionError, TypeError, ValueError, KeyError, AttributeError, re.error) as exc:
        raise _err(f"not a valid Pandera polars schema: {(str(exc).splitlines() or [type(exc).__name__])[0][:200]}",
                   source) from None
    for name, checks in col_checks.items():
        if checks:
            schema = schema.update_column(name, checks=checks)
    if frame_checks:
        schema.checks = frame_checks
    rules_raw = section.get("columns") or {}
    if not isinstance(rules_raw, dict):
        raise _err("datacheck.columns: must be a mapping of column name -> rules", source)
    rules = {name: _rule_of(r, f"datacheck.columns.{name}", source) for name, r in rules_raw.items()}
    regex = frozenset(n for n in rules if n in schema.columns and schema.columns[n].regex)
    for n in rules:
        if n not in schema.columns:
            raise _err(f"datacheck.columns.{n}: not a column of the schema; add it under columns:", source)
    return Contract(name=source, schema=schema, rules=rules, regex_rules=regex,
                    require_any=_groups(section.get("require_any"), "require_any", source),
                    aligned=_groups(section.get("aligned"), "aligned", source))


#: Most YAML nodes a schema file may expand to once aliases are resolved: 100,000. A real schema has a
#: few hundred; a 1 KB "billion laughs" alias bomb expands to ~10**9 and exhausts memory.
MAX_YAML_NODES = 100_000


def _expanded_size(root: Any) -> int | None:
    """Nodes of a composed YAML graph counted as if every alias were copied (memoized per node, so a
    bomb is measured in time linear in its *distinct* nodes; stops counting past the limit); None when
    a node holds itself through an alias (``a: &a [1, *a]``: no finite copy exists)."""
    def kids(node: Any) -> list[Any]:
        return ([c for kv in node.value for c in kv] if node.id == "mapping"
                else list(node.value) if node.id == "sequence" else [])

    memo: dict[int, int] = {}
    on_path: set[int] = set()  # entered, not yet counted: the depth-first path from the root
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            on_path.discard(id(node))
            memo[id(node)] = min(1 + sum(memo[id(k)] for k in kids(node)), MAX_YAML_NODES + 1)
            continue
        if id(node) in memo:
            continue
        if id(node) in on_path:  # reached again from below itself: a cycle
            return None
        on_path.add(id(node))
        stack.append((node, True))
        stack.extend((k, False) for k in kids(node) if id(k) not in memo)
    return memo[id(root)]


def _unbuilt_scalar(root: Any) -> Any:
    """The first scalar node under ``root`` (document order) that PyYAML's safe constructor cannot
    build (an int beyond Python's digit limit, a timestamp no calendar holds), or None."""
    import yaml

    probe = yaml.SafeLoader("")
    try:
        stack, seen = [root], set()
        while stack:
            node = stack.pop()
            if id(node) in seen:  # an alias (recursive ones included) is looked at once
                continue
            seen.add(id(node))
            if isinstance(node, yaml.ScalarNode):
                try:
                    probe.construct_object(node)
                except (ValueError, OverflowError, yaml.YAMLError):
                    return node
            elif isinstance(node, yaml.MappingNode):
                stack.extend(c for kv in reversed(node.value) for c in reversed(kv))
            elif isinstance(node, yaml.SequenceNode):
                stack.extend(reversed(node.value))
        return None
    finally:
        probe.dispose()


def _parse_text(text: str, suffix: str, source: str) -> Any:
    if suffix == ".json":
        try:
            return safejson.loads(text)
        except safejson.JsonInputError as exc:
            raise _err(exc.reason, source) from None
    import yaml

    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            size = _expanded_size(node)
            if size is None:
                raise _err("the YAML holds itself through an alias (&anchor inside its own *alias): a schema "
                           "cannot be recursive; write the repeated part out", source)
            if size > MAX_YAML_NODES:
                raise _err(f"the YAML expands to {size} nodes through aliases (&anchor/*alias), over the "
                           f"limit of {MAX_YAML_NODES}: an alias bomb? Write the schema without nested aliases",
                           source)
            try:
                return loader.construct_document(node)
            except (ValueError, OverflowError) as exc:  # a scalar PyYAML parses but Python cannot build
                bad = _unbuilt_scalar(node)
                where = f" at line {bad.start_mark.line + 1}, column {bad.start_mark.column + 1}" if bad else ""
                raise _err(f"not a usable YAML value{where}: {str(exc).splitlines()[0][:200]}", source) from None
        finally:
            loader.dispose()
    except RecursionError:
        raise _err("not a usable YAML file: nested too deep", source) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise _err(f"not valid YAML{where}: {problem}", source) from None


def _load_python(path: Path, cls_name: str, spec: str) -> Contract:
    import pandera.backends.polars.builtin_checks  # noqa: F401  (polars implementations, before any Check is built)
    import pandera.polars as pa

    if not path.is_file():
        raise _err(f"schema file {str(path)!r} not found (from {spec!r})", spec)
    mod_name = "datacheck_user_schema_" + re.sub(r"\W", "_", str(path.resolve()))
    mspec = importlib.util.spec_from_file_location(mod_name, path)
    if mspec is None or mspec.loader is None:
        raise _err(f"cannot import {str(path)!r} as Python", spec)
    module = importlib.util.module_from_spec(mspec)
    try:
        mspec.loader.exec_module(module)
    except SyntaxError as exc:
        raise _err(f"Python syntax error at line {exc.lineno}: {exc.msg}", str(path)) from None
    except Exception as exc:  # the user's module failed to import: say how, never a traceback
        raise _err(f"importing the schema module failed: {type(exc).__name__}: {exc}", str(path)) from None
    obj = getattr(module, cls_name, None)
    if obj is None:
        raise _err(f"{str(path)!r} defines no {cls_name!r}", spec)
    if isinstance(obj, type) and issubclass(obj, pa.DataFrameModel):
        try:
            schema = obj.to_schema()
        except Exception as exc:  # pandera rejects the model definition
            raise _err(f"{cls_name}: not a valid DataFrameModel: {exc}", str(path)) from None
    elif isinstance(obj, pa.DataFrameSchema):
        schema = obj
    else:
        raise _err(f"{cls_name!r} is a {type(obj).__name__}, not a pandera.polars DataFrameModel or DataFrameSchema", spec)
    return Contract(name=spec, schema=schema)


def _resolve(spec: str) -> tuple[str, Any]:
    """(kind, target) for ``spec``: ``("layout", name)``, ``("file", Path)`` or ``("python", (Path, cls))``."""
    m = PYTHON_SCHEMA.match(spec)
    if m:
        return "python", (Path(m.group(1)), m.group(2))
    if spec in LAYOUTS:
        return "layout", spec
    p = Path(spec)
    if p.suffix.lower() in (".yaml", ".yml", ".json"):
        return "file", p
    if p.suffix.lower() == ".py":
        raise _err(f"{spec!r}: name the model class too, as {spec}:ClassName", spec)
    if "/" not in spec and "\\" not in spec and not p.exists():  # no file: the message names the value itself
        close = difflib.get_close_matches(spec, LAYOUTS, n=1)
        raise ConfigError(f"unknown schema name {spec!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                          + f"; built-in layouts: {', '.join(LAYOUTS)}; or give a path to a .yaml/.json schema "
                          "or a file.py:ClassName", key=_KEY)
    return "file", p


_CACHE: dict[tuple, Contract] = {}


def load_contract(spec: str) -> Contract:
    """Load the contract ``spec`` names (cached per file state: an edited file is re-read).

    Args:
        spec: a layout name, a ``.yaml``/``.yml``/``.json`` path, or ``file.py:ClassName``.

    Returns:
        The :class:`Contract`.

    Raises:
        ConfigError: unknown layout name, missing file, YAML/JSON/Python syntax error (with line),
            or a schema Pandera or datacheck cannot read (naming the key).
    """
    kind, target = _resolve(spec)
    if kind == "layout":
        key: tuple = ("layout", target)
    else:
        path = target[0] if kind == "python" else target
        try:
            st = path.stat()
        except OSError:
            raise _err(f"schema file {str(path)!r} not found; give an existing file or a built-in layout "
                       f"({', '.join(LAYOUTS)})", spec) from None
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block the read, a device never ends
            raise _err(f"schema file {str(path)!r} is not a regular file (a FIFO, device or folder)", spec)
        key = (kind, str(path.resolve()), target[1] if kind == "python" else None, st.st_mtime_ns, st.st_size)
    if key in _CACHE:
        return _CACHE[key]
    if kind == "layout":
        contract = contract_from_dict(_parse_text(layout_text(target), ".yaml", f"layout {target}"), target)
    elif kind == "python":
        contract = _load_python(target[0], target[1], spec)
    else:
        try:
            text = target.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise _err(f"cannot read schema file: {exc}", str(target)) from None
        contract = contract_from_dict(_parse_text(text, target.suffix.lower(), str(target)), str(target))
    _CACHE[key] = contract
    return contract
