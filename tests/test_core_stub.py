"""The compiled core's type stub (``dissector/_core.pyi``) against the extension module itself.

Both ways: every public name the module exports (module attributes; each class's own methods, properties and
dunder methods) is declared in the stub with the same kind, and every name the stub declares exists in the
module; a class's bases and whether it has a constructor match; for each function and method with a
``__text_signature__`` the stub's parameters have the same names, in the same order, of the same kinds, with a
default where the core has one (and the same default where both spell it); a constant's declared type is the
type of its value; a class Python cannot subclass (a ``#[pyclass]`` without ``subclass``) is ``@final``. The
stub is read with ``ast`` (never imported), so a stub that a type checker would accept but that has drifted
from the core fails here.

The stub's own helper types (``Protocol``s, ``TypedDict``s, ``TypeVar``s, ``TypeAlias``es: the duck-typed
Python objects the core reads, the tuples it returns) are not module names: they must start with ``_``.

The last tests run the same comparison on a stub or a module changed on purpose (an entry deleted, a name
added on either side, a parameter renamed) to show the comparison notices.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

import pytest

STUB = Path(__file__).resolve().parent.parent / "dissector" / "_core.pyi"

#: The extension module: one maturin package, ``dissector._core`` beside its stub (pydantic-core's layout).
MODULE_NAMES = ("dissector._core",)

#: Entries of a class's ``__dict__`` that are Python's bookkeeping, not the core's interface.
CLASS_BOOKKEEPING = {"__doc__", "__module__", "__weakref__", "__dict__", "__qualname__", "__annotations__"}

#: Slot wrappers Python shows for the buffer protocol from 3.12 on (PEP 688); before, a class implementing the
#: protocol (``JsonLines``) has no such entries, though the stub declares them for type checkers.
BUFFER_SLOTS = {"__buffer__", "__release_buffer__"}

HELPER_BASES = {"Protocol", "TypedDict"}

TPFLAGS_BASETYPE = 1 << 10  # Py_TPFLAGS_BASETYPE: Python code may subclass the type


def load_core():
    # the extension is built with the package: never missing where the package is installed
    return importlib.import_module(MODULE_NAMES[0])


# ---------------------------------------------------------------------------------------------- the stub

@dataclass
class Param:
    name: str
    kind: inspect._ParameterKind
    has_default: bool
    default: object = None  # the literal value, or Ellipsis when the stub writes ``...`` (or no literal)


@dataclass
class StubFunction:
    name: str
    overloads: list[list[Param]] = field(default_factory=list)  # one list when not overloaded
    overloaded: bool = False
    decorators: set[str] = field(default_factory=set)


@dataclass
class StubClass:
    name: str
    bases: list[str]
    final: bool = False
    methods: dict[str, StubFunction] = field(default_factory=dict)
    properties: set[str] = field(default_factory=set)
    attributes: set[str] = field(default_factory=set)


@dataclass
class Stub:
    functions: dict[str, StubFunction] = field(default_factory=dict)
    classes: dict[str, StubClass] = field(default_factory=dict)
    constants: dict[str, ast.expr] = field(default_factory=dict)  # name -> its annotation
    helpers: set[str] = field(default_factory=set)

    def names(self) -> set[str]:
        return set(self.functions) | set(self.classes) | set(self.constants)


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):  # origin.setter, typing.overload
        if isinstance(node.value, (ast.Name, ast.Attribute)):
            return f"{_decorator_name(node.value)}.{node.attr}"
        return node.attr
    if isinstance(node, ast.Call):
        return _decorator_name(node.func)
    return ast.dump(node)


def _literal(node: ast.expr) -> object:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return Ellipsis


def _params(args: ast.arguments) -> list[Param]:
    positional: list[tuple[ast.arg, inspect._ParameterKind]] = [
        (a, inspect.Parameter.POSITIONAL_ONLY) for a in args.posonlyargs]
    positional += [(a, inspect.Parameter.POSITIONAL_OR_KEYWORD) for a in args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    out = [Param(a.arg, kind, d is not None, _literal(d) if d is not None else None)
           for (a, kind), d in zip(positional, defaults)]
    if args.vararg:
        out.append(Param(args.vararg.arg, inspect.Parameter.VAR_POSITIONAL, False))
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        out.append(Param(a.arg, inspect.Parameter.KEYWORD_ONLY, d is not None, _literal(d) if d is not None else None))
    if args.kwarg:
        out.append(Param(args.kwarg.arg, inspect.Parameter.VAR_KEYWORD, False))
    return out


def _add_function(table: dict[str, StubFunction], node: ast.FunctionDef) -> None:
    decorators = {_decorator_name(d) for d in node.decorator_list}
    entry = table.setdefault(node.name, StubFunction(node.name))
    entry.overloaded |= bool(decorators & {"overload", "typing.overload"})
    entry.decorators |= decorators - {"overload", "typing.overload"}
    entry.overloads.append(_params(node.args))


def _is_helper_assignment(node: ast.stmt) -> bool:
    if isinstance(node, ast.AnnAssign):
        annotation = node.annotation
        return isinstance(annotation, ast.Name) and annotation.id == "TypeAlias"
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
        return _decorator_name(node.value.func) in {"TypeVar", "typing.TypeVar"}
    return False


def parse_stub(source: str) -> Stub:
    stub = Stub()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) or (isinstance(node, ast.Expr)
                                                             and isinstance(node.value, ast.Constant)):
            continue  # imports, docstrings
        if _is_helper_assignment(node):
            targets = getattr(node, "targets", [getattr(node, "target", None)])
            stub.helpers.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            stub.constants[node.target.id] = node.annotation
        elif isinstance(node, ast.FunctionDef):
            _add_function(stub.functions, node)
        elif isinstance(node, ast.ClassDef):
            bases = [_decorator_name(b.value if isinstance(b, ast.Subscript) else b) for b in node.bases]
            if HELPER_BASES & set(bases):
                stub.helpers.add(node.name)
                continue
            cls = StubClass(node.name, [b for b in bases if b not in {"Generic", "typing.Generic"}] or ["object"],
                            final=bool({_decorator_name(d) for d in node.decorator_list} & {"final", "typing.final"}))
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    decorators = {_decorator_name(d) for d in item.decorator_list}
                    if "property" in decorators:
                        cls.properties.add(item.name)
                    elif not any(d.endswith((".setter", ".deleter")) for d in decorators):
                        _add_function(cls.methods, item)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    cls.attributes.add(item.target.id)
                elif not (isinstance(item, ast.Expr) and isinstance(item.value, ast.Constant)):
                    raise AssertionError(f"{node.name}: a statement the stub test does not read: {ast.dump(item)}")
            stub.classes[node.name] = cls
        else:
            raise AssertionError(f"a statement the stub test does not read: {ast.dump(node)[:200]}")
    return stub


# --------------------------------------------------------------------------------------------- the module

def module_names(module) -> set[str]:
    """What the extension exports: every attribute that is not Python's (dunder) bookkeeping."""
    return {n for n in dir(module) if not (n.startswith("__") and n.endswith("__"))}


def class_members(cls: type) -> dict[str, str]:
    """A class's own entries, by kind: method, staticmethod, classmethod, property, constructor."""
    out = {}
    for name, value in vars(cls).items():
        if name in CLASS_BOOKKEEPING:
            continue
        if name == "__new__":
            out[name] = "constructor"
        elif isinstance(value, (types.GetSetDescriptorType, types.MemberDescriptorType, property)):
            out[name] = "property"
        elif isinstance(value, staticmethod):
            out[name] = "staticmethod"
        elif isinstance(value, classmethod):
            out[name] = "classmethod"
        else:
            out[name] = "method"
    return out


def stub_members(cls: StubClass) -> dict[str, str]:
    out = {name: "property" for name in cls.properties | cls.attributes}
    for name, fn in cls.methods.items():
        if name in ("__init__", "__new__"):
            out["__new__"] = "constructor"  # the core's classes are made by __new__ (#[new]); a stub says __init__
        elif "staticmethod" in fn.decorators:
            out[name] = "staticmethod"
        elif "classmethod" in fn.decorators:
            out[name] = "classmethod"
        else:
            out[name] = "method"
    return out


# ------------------------------------------------------------------------------------------ the comparison

def missing_from_stub(stub: Stub, module) -> list[str]:
    problems = [f"{name}: exported by the core, not in the stub"
                for name in sorted(module_names(module) - stub.names())]
    for name in sorted(module_names(module) & set(stub.classes)):
        cls = getattr(module, name)
        if not isinstance(cls, type):
            continue
        declared = stub_members(stub.classes[name])
        for member in sorted(set(class_members(cls)) - set(declared)):
            if member in BUFFER_SLOTS:
                continue
            problems.append(f"{name}.{member}: in the core's class, not in the stub")
    return problems


def missing_from_module(stub: Stub, module) -> list[str]:
    problems = [f"{name}: in the stub, not exported by the core"
                for name in sorted(stub.names() - module_names(module))]
    for name in sorted(set(stub.classes) & module_names(module)):
        cls = getattr(module, name)
        if not isinstance(cls, type):
            continue
        actual = class_members(cls)
        for member in sorted(set(stub_members(stub.classes[name])) - set(actual)):
            if member in BUFFER_SLOTS and sys.version_info < (3, 12):
                continue
            what = "a constructor" if member == "__new__" else member
            problems.append(f"{name}: the stub declares {what}, the core's class has none")
    return problems


def _runtime_kind(value) -> str:
    if isinstance(value, type):
        return "class"
    if isinstance(value, (types.BuiltinFunctionType, types.FunctionType)):
        return "function"
    return "constant"


def _annotation_type(annotation: ast.expr) -> str:
    """``Final[dict[int, str]]`` -> ``dict``."""
    if isinstance(annotation, ast.Subscript) and _decorator_name(annotation.value) in {"Final", "typing.Final"}:
        annotation = annotation.slice
    if isinstance(annotation, ast.Subscript):
        annotation = annotation.value
    return _decorator_name(annotation)


def kind_mismatches(stub: Stub, module) -> list[str]:
    problems = []
    for name in sorted(stub.names() & module_names(module)):
        value = getattr(module, name)
        declared = "class" if name in stub.classes else "function" if name in stub.functions else "constant"
        actual = _runtime_kind(value)
        if declared != actual:
            problems.append(f"{name}: a {actual} in the core, a {declared} in the stub")
        elif actual == "constant" and _annotation_type(stub.constants[name]) != type(value).__name__:
            problems.append(f"{name}: declared {ast.unparse(stub.constants[name])}, "
                            f"the core's value is a {type(value).__name__}")
        elif actual == "class":
            bases = [b.__name__ for b in value.__bases__]
            if stub.classes[name].bases != bases:
                problems.append(f"{name}: bases {stub.classes[name].bases} in the stub, {bases} in the core")
            subclassable = bool(value.__flags__ & TPFLAGS_BASETYPE)  # a #[pyclass] without `subclass` is final
            if stub.classes[name].final == subclassable:
                problems.append(f"{name}: {'@final' if stub.classes[name].final else 'not @final'} in the stub, "
                                f"{'' if subclassable else 'not '}subclassable in the core")
            actual_members, declared_members = class_members(value), stub_members(stub.classes[name])
            for member in sorted(set(actual_members) & set(declared_members)):
                if actual_members[member] != declared_members[member]:
                    problems.append(f"{name}.{member}: a {actual_members[member]} in the core, "
                                    f"a {declared_members[member]} in the stub")
    return problems


def _runtime_params(obj, *, bound: bool) -> list[inspect.Parameter] | None:
    """The parameters the core declares (its ``__text_signature__``), ``self`` left out; None when it has none
    (slot wrappers such as ``__call__`` show a generic ``(self, /, *args, **kwargs)``: not the core's)."""
    if isinstance(obj, types.WrapperDescriptorType) or getattr(obj, "__text_signature__", None) is None:
        return None
    params = list(inspect.signature(obj).parameters.values())
    return params[1:] if bound else params


def _compare(where: str, runtime: list[inspect.Parameter], declared: list[Param], *, overload: bool) -> list[str]:
    names, stub_names = [p.name for p in runtime], [p.name for p in declared]
    if names != stub_names:
        return [f"{where}: parameters {stub_names} in the stub, {names} in the core"]
    problems = []
    for actual, mine in zip(runtime, declared):
        narrower = actual.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD and mine.kind in (
            inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.KEYWORD_ONLY)
        if actual.kind != mine.kind and not (overload and narrower):
            problems.append(f"{where}({mine.name}): {mine.kind.description} in the stub, "
                            f"{actual.kind.description} in the core")
        has_default = actual.default is not inspect.Parameter.empty
        if mine.has_default and not has_default or (has_default and not mine.has_default and not overload):
            problems.append(f"{where}({mine.name}): default {'given' if mine.has_default else 'missing'} in the stub, "
                            f"{'given' if has_default else 'none'} in the core")
        elif mine.has_default and mine.default is not Ellipsis and actual.default is not Ellipsis \
                and (mine.default != actual.default or type(mine.default) is not type(actual.default)):
            problems.append(f"{where}({mine.name}): default {mine.default!r} in the stub, "
                            f"{actual.default!r} in the core")
    return problems


def _compare_function(where: str, runtime: list[inspect.Parameter] | None, fn: StubFunction, *,
                      bound: bool) -> list[str]:
    if runtime is None:
        return []
    problems = []
    for declared in fn.overloads:
        problems += _compare(where, runtime, declared[1:] if bound else declared, overload=fn.overloaded)
    return problems


def signature_mismatches(stub: Stub, module) -> list[str]:
    problems = []
    for name in sorted(set(stub.functions) & module_names(module)):
        problems += _compare_function(name, _runtime_params(getattr(module, name), bound=False),
                                      stub.functions[name], bound=False)
    for name in sorted(set(stub.classes) & module_names(module)):
        cls, declared = getattr(module, name), stub.classes[name]
        if not isinstance(cls, type):
            continue
        constructor = declared.methods.get("__init__") or declared.methods.get("__new__")
        if constructor is not None and "__new__" in vars(cls):
            # a class's __text_signature__ is its #[new]'s signature
            problems += _compare_function(name, _runtime_params(cls, bound=False), constructor, bound=True)
        for member, fn in sorted(declared.methods.items()):
            if member in ("__init__", "__new__") or member not in vars(cls):
                continue
            static = isinstance(vars(cls)[member], staticmethod)
            problems += _compare_function(f"{name}.{member}", _runtime_params(getattr(cls, member), bound=not static),
                                          fn, bound=not static)
    return problems


def all_problems(stub: Stub, module) -> list[str]:
    return (missing_from_stub(stub, module) + missing_from_module(stub, module) + kind_mismatches(stub, module)
            + signature_mismatches(stub, module))


# --------------------------------------------------------------------------------------------------- tests

@pytest.fixture(scope="module")
def core():
    return load_core()


@pytest.fixture(scope="module")
def stub_source() -> str:
    return STUB.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def stub(stub_source) -> Stub:
    return parse_stub(stub_source)


def test_every_export_of_the_core_is_in_the_stub(stub, core):
    assert missing_from_stub(stub, core) == []


def test_every_name_of_the_stub_is_in_the_core(stub, core):
    assert missing_from_module(stub, core) == []


def test_kinds_bases_and_constant_types_match(stub, core):
    assert kind_mismatches(stub, core) == []


def test_parameters_match_the_text_signatures(stub, core):
    assert signature_mismatches(stub, core) == []


def test_every_callable_of_the_core_has_a_signature_to_check(core):
    # the comparison above skips what has no __text_signature__: that must stay the slot wrappers alone, or a
    # function could drift unseen
    unchecked = [name for name in module_names(core)
                 if callable(getattr(core, name)) and not isinstance(getattr(core, name), type)
                 and getattr(getattr(core, name), "__text_signature__", None) is None]
    for name in module_names(core):
        cls = getattr(core, name)
        if not isinstance(cls, type) or issubclass(cls, BaseException):
            continue
        if "__new__" in vars(cls) and cls.__text_signature__ is None:
            unchecked.append(f"{name}()")
        for member, kind in class_members(cls).items():
            value = getattr(cls, member)
            slot = isinstance(value, types.WrapperDescriptorType)
            if kind in ("method", "staticmethod", "classmethod") and not slot \
                    and getattr(value, "__text_signature__", None) is None:
                unchecked.append(f"{name}.{member}")
    assert unchecked == []


def test_helper_types_are_private(stub):
    # a helper (Protocol, TypedDict, TypeVar, TypeAlias) is no module name: a public one would read as an export
    assert [name for name in sorted(stub.helpers) if not name.startswith("_")] == []
    assert stub.helpers.isdisjoint(stub.names())


# ------------------------------------------------- the comparison notices a change on either side (mutations)

class _ExtendedModule(types.ModuleType):
    """The core's module with an extra export, for the mutation tests."""


def _with_extra(core, name: str, value) -> types.ModuleType:
    module = _ExtendedModule("extended_core")
    for attribute in module_names(core):
        setattr(module, attribute, getattr(core, attribute))
    setattr(module, name, value)
    return module


def _without(source: str, start: str, end: str) -> str:
    at = source.index(start)
    return source[:at] + source[source.index(end, at):]


def test_a_stub_entry_deleted_is_noticed(stub_source, core):
    source = _without(stub_source, "def safe(", "def date_ms(")
    assert "safe: exported by the core, not in the stub" in all_problems(parse_stub(source), core)


def test_a_stub_method_deleted_is_noticed(stub_source, core):
    source = _without(stub_source, "    def other_tcp(", "\n\n")  # the first is Dissector's
    problems = all_problems(parse_stub(source), core)
    assert "Dissector.other_tcp: in the core's class, not in the stub" in problems


def test_a_name_added_to_the_stub_is_noticed(stub_source, core):
    source = stub_source + "\ndef not_in_the_core(x: int) -> int: ...\n"
    assert "not_in_the_core: in the stub, not exported by the core" in all_problems(parse_stub(source), core)


def test_a_name_added_to_the_module_is_noticed(stub, core):
    module = _with_extra(core, "new_function", len)
    assert "new_function: exported by the core, not in the stub" in all_problems(stub, module)


def test_a_renamed_parameter_is_noticed(stub_source, core):
    source = stub_source.replace("def safe(value: object, limit: int", "def safe(text: object, limit: int")
    assert source != stub_source
    problems = all_problems(parse_stub(source), core)
    assert "safe: parameters ['text', 'limit'] in the stub, ['value', 'limit'] in the core" in problems


def test_a_wrong_default_or_kind_is_noticed(stub_source, core):
    source = stub_source.replace('kind: str = "text", limit: int = 1000', 'kind: str = "hex", *, limit: int = 1000')
    assert source != stub_source
    problems = all_problems(parse_stub(source), core)
    assert "shown_b64(kind): default 'hex' in the stub, 'text' in the core" in problems
    assert "shown_b64(limit): keyword-only in the stub, positional or keyword in the core" in problems


def test_a_final_class_left_open_is_noticed(stub_source, core):
    source = stub_source.replace("@final\nclass JsonLines", "class JsonLines")
    assert source != stub_source
    assert "JsonLines: not @final in the stub, not subclassable in the core" in all_problems(parse_stub(source), core)


def test_a_property_declared_as_a_method_is_noticed(stub_source, core):
    stats_origin = "    def origin(self) -> float | None:\n        \"\"\"The first record's time"
    source = stub_source.replace("    @property\n" + stats_origin, stats_origin)
    assert source != stub_source
    problems = all_problems(parse_stub(source), core)
    assert "StatsCore.origin: a property in the core, a method in the stub" in problems
