"""``tf.app`` and ``tf.flags`` (= ``tf.app.flags``): a program's entry point and its
command-line flags, as TF 1.15 has them.

TF 1.15's ``tf.flags`` *is* ``absl.flags`` (TF only wraps it); this module is a small
re-implementation of the part of absl.flags programs use, with absl's behaviour:

* flags are defined on a :class:`FlagValues` (``DEFINE_string`` ... on :data:`FLAGS` by
  default) and parsed by calling it: ``FLAGS(argv)`` parses ``--name=value``,
  ``--name value``, ``-name``, ``--flag`` / ``--noflag`` for booleans, ``--flagfile=f``
  and ``--undefok=a,b``, stops at ``--``, keeps positional arguments (GNU style: flags
  may follow them) and returns ``[argv[0]] + the arguments it did not take``;
* an unknown flag raises :class:`UnrecognizedFlagError` (with "did you mean"
  suggestions); a bad value :class:`IllegalFlagValueError` naming the flag; a failed
  validator (``register_validator``, ``mark_flag_as_required``) IllegalFlagValueError
  after parsing and on every assignment ``FLAGS.name = value``;
* reading a flag of an unparsed :class:`FlagValues` raises
  :class:`UnparsedFlagAccessError` -- except through ``tf.flags.FLAGS`` itself, which,
  as TF's wrapper does, parses ``sys.argv`` on the first read instead;
* every module has key flags: those it defines and those it declares
  (``declare_key_flag``, ``adopt_module_key_flags``); ``--helpshort`` lists the main
  program's, ``--helpfull`` every module's, wrapped to the terminal as absl wraps them.

:func:`run` is ``tf.app.run``: it parses ``argv`` (``sys.argv`` by default) with unknown
flags left in place (TF's ``known_only=True``), calls ``main(remaining_argv)`` and exits
with ``sys.exit(main's return value)``. ``--help`` / ``--helpshort`` / ``--helpfull``
print the flags and exit with status 1, as absl's ``app.run`` does.
"""
from __future__ import annotations

import collections
import csv
import enum
import inspect
import io
import logging
import os
import re
import shutil
import sys
import textwrap
import types
import warnings
from typing import Any, Callable, Iterable, Iterator, NoReturn, Sequence

__all__ = ["Error", "CantOpenFlagFileError", "DuplicateFlagError", "IllegalFlagValueError",
           "UnrecognizedFlagError", "UnparsedFlagAccessError", "ValidationError",
           "FlagNameConflictsWithMethodError", "ArgumentParser", "ArgumentSerializer",
           "ListSerializer", "CsvListSerializer", "BooleanParser", "IntegerParser",
           "FloatParser", "EnumParser", "ListParser", "WhitespaceSeparatedListParser",
           "Flag", "BooleanFlag", "EnumFlag", "MultiFlag", "FlagHolder", "FlagValues",
           "FLAGS", "DEFINE", "DEFINE_flag", "DEFINE_string", "DEFINE_integer",
           "DEFINE_float", "DEFINE_boolean", "DEFINE_bool", "DEFINE_enum", "DEFINE_list",
           "DEFINE_spaceseplist", "DEFINE_multi", "DEFINE_multi_string",
           "DEFINE_multi_integer", "DEFINE_multi_float", "DEFINE_multi_enum",
           "register_validator", "validator", "register_multi_flags_validator",
           "multi_flags_validator", "mark_flag_as_required", "mark_flags_as_required",
           "mark_flags_as_mutual_exclusive", "BaseListParser", "DEFINE_alias",
           "DEFINE_enum_class", "DEFINE_multi_enum_class", "EnumClassFlag",
           "EnumClassListSerializer", "EnumClassParser", "EnumClassSerializer",
           "MultiEnumClassFlag", "adopt_module_key_flags", "declare_key_flag",
           "disclaim_key_flags", "doc_to_help", "flag_dict_to_args", "get_help_width",
           "mark_bool_flags_as_mutual_exclusive", "override_value", "set_default",
           "text_wrap", "tf_decorator", "run", "API"]


# =========================================================================================
# errors (absl.flags' classes)
# =========================================================================================
class Error(Exception):
    """The base class of every flags error."""


class CantOpenFlagFileError(Error):
    """A ``--flagfile`` could not be read."""


class DuplicateFlagError(Error):
    """A flag name is defined twice."""


class IllegalFlagValueError(Error):
    """A flag's value does not parse, or fails a validator."""


class UnrecognizedFlagError(Error):
    """A flag on the command line (or an assignment) names no defined flag."""

    def __init__(self, flagname: str, flagvalue: Any = "", suggestions: Sequence[str] = ()):
        self.flagname = flagname
        self.flagvalue = flagvalue
        tip = f". Did you mean: {', '.join(suggestions)} ?" if suggestions else ""
        super().__init__(f"Unknown command line flag '{flagname}'{tip}")


class UnparsedFlagAccessError(Error):
    """A flag value was read before its FlagValues was parsed."""


class ValidationError(Error):
    """Raised by a validator whose constraint fails."""


class FlagNameConflictsWithMethodError(Error):
    """A flag name is the name of a FlagValues method."""


# =========================================================================================
# parsers and serializers
# =========================================================================================
class ArgumentParser:
    """Turns a command-line string into a flag value (this base: strings)."""

    syntactic_help = ""

    def parse(self, argument: Any) -> Any:
        if not isinstance(argument, str):
            raise TypeError(f'flag value must be a string, found "{type(argument)}"')
        return argument

    def flag_type(self) -> str:
        return "string"


class ArgumentSerializer:
    """Turns a flag value back into its command-line string."""

    def serialize(self, value: Any) -> str:
        return str(value)


class ListSerializer(ArgumentSerializer):
    def __init__(self, list_sep: str) -> None:
        self.list_sep = list_sep

    def serialize(self, value: Any) -> str:
        return self.list_sep.join(str(x) for x in value)


class CsvListSerializer(ListSerializer):
    def serialize(self, value: Any) -> str:
        out = io.StringIO()
        csv.writer(out, delimiter=self.list_sep).writerow([str(x) for x in value])
        return out.getvalue().strip()


class _NumericParser(ArgumentParser):
    number_name = "number"

    def __init__(self, lower_bound: Any = None, upper_bound: Any = None) -> None:
        self.lower_bound, self.upper_bound = lower_bound, upper_bound
        n, lo, hi = self.number_name, lower_bound, upper_bound
        sh = f"{'an' if n == 'integer' else 'a'} {n}"
        if lo is not None and hi is not None:
            sh = f"{sh} in the range [{lo}, {hi}]"
        elif n == "integer" and lo == 1:
            sh = f"a positive {n}"
        elif n == "integer" and hi == -1:
            sh = f"a negative {n}"
        elif lo == 0:
            sh = f"a non-negative {n}"
        elif hi == 0:
            sh = f"a non-positive {n}"
        elif hi is not None:
            sh = f"{n} <= {hi}"
        elif lo is not None:
            sh = f"{n} >= {lo}"
        self.syntactic_help = sh

    def is_outside_bounds(self, val: Any) -> bool:
        return ((self.lower_bound is not None and val < self.lower_bound)
                or (self.upper_bound is not None and val > self.upper_bound))

    def convert(self, argument: Any) -> Any:
        raise NotImplementedError

    def parse(self, argument: Any) -> Any:
        val = self.convert(argument)
        if self.is_outside_bounds(val):
            raise ValueError(f"{val} is not {self.syntactic_help}")
        return val


class IntegerParser(_NumericParser):
    """Integers: decimal, ``0x`` hexadecimal or ``0o`` octal; optionally bounded."""

    number_name = "integer"

    def convert(self, argument: Any) -> int:
        if isinstance(argument, int) and not isinstance(argument, bool):
            return argument
        if isinstance(argument, str):
            base = 10
            if len(argument) > 2 and argument[0] == "0" and argument[1] in "ox":
                base = 8 if argument[1] == "o" else 16
            return int(argument, base)
        raise TypeError(f"Expect argument to be a string or int, found {type(argument)}")

    def flag_type(self) -> str:
        return "int"


class FloatParser(_NumericParser):
    """Floating-point numbers, optionally bounded."""

    def convert(self, argument: Any) -> float:
        if isinstance(argument, (int, float, str)) and not isinstance(argument, bool):
            return float(argument)
        raise TypeError("Expect argument to be a string, int, or float, found "
                        f"{type(argument)}")

    def flag_type(self) -> str:
        return "float"


class BooleanParser(ArgumentParser):
    """``true``/``t``/``1`` and ``false``/``f``/``0``, any case."""

    def parse(self, argument: Any) -> bool:
        if isinstance(argument, str):
            if argument.lower() in ("true", "t", "1"):
                return True
            if argument.lower() in ("false", "f", "0"):
                return False
            raise ValueError("Non-boolean argument to boolean flag", argument)
        if isinstance(argument, int):
            if argument in (0, 1):
                return bool(argument)
            raise ValueError("Non-boolean argument to boolean flag", argument)
        raise TypeError("Non-boolean argument to boolean flag", argument)

    def flag_type(self) -> str:
        return "bool"


class EnumParser(ArgumentParser):
    """One of ``enum_values``."""

    def __init__(self, enum_values: Iterable[str], case_sensitive: bool = True) -> None:
        if not enum_values or isinstance(enum_values, str):
            raise ValueError(f'enum_values cannot be empty or a str, found "{enum_values}"')
        self.enum_values = list(enum_values)
        self.case_sensitive = case_sensitive

    def parse(self, argument: Any) -> str:
        for v in self.enum_values:
            if v == argument or (not self.case_sensitive and isinstance(argument, str)
                                 and v.upper() == argument.upper()):
                return v
        raise ValueError(f"value should be one of <{'|'.join(self.enum_values)}>")

    def flag_type(self) -> str:
        return "string enum"


class EnumClassParser(ArgumentParser):
    """A member of an :class:`enum.Enum` class, given as the member or its name (any
    case unless ``case_sensitive``)."""

    def __init__(self, enum_class: type[enum.Enum], case_sensitive: bool = True) -> None:
        if not (isinstance(enum_class, type) and issubclass(enum_class, enum.Enum)):
            raise TypeError(f"{enum_class} is not a subclass of Enum.")
        if not enum_class.__members__:
            raise ValueError(f'enum_class cannot be empty, but "{enum_class}" is empty.')
        if not case_sensitive:
            counts = collections.Counter(n.lower() for n in enum_class.__members__)
            dups = {n for n, c in counts.items() if c > 1}
            if dups:
                raise ValueError(f"Duplicate enum values for {dups} using "
                                 "case_sensitive=False")
        self.enum_class = enum_class
        self._case_sensitive = case_sensitive
        self._member_names = tuple(n if case_sensitive else n.lower()
                                   for n in enum_class.__members__)

    @property
    def member_names(self) -> Sequence[str]:
        """The accepted names (lowercase unless case-sensitive)."""
        return self._member_names

    def parse(self, argument: Any) -> enum.Enum:
        if isinstance(argument, self.enum_class):
            return argument
        if not isinstance(argument, str):
            raise ValueError(f"{argument} is not an enum member or a name of a member in "
                             f"{self.enum_class}")
        key = EnumParser(self._member_names, self._case_sensitive).parse(argument)
        return next(v for n, v in self.enum_class.__members__.items()
                    if (n if self._case_sensitive else n.lower()) == key)

    def flag_type(self) -> str:
        return "enum class"


class EnumClassSerializer(ArgumentSerializer):
    """An enum member as its name (lowercased if ``lowercase``)."""

    def __init__(self, lowercase: bool) -> None:
        self._lowercase = lowercase

    def serialize(self, value: Any) -> str:
        name = str(value.name)
        return name.lower() if self._lowercase else name


class EnumClassListSerializer(ListSerializer):
    """A list of enum members as their names joined by ``list_sep``."""

    def __init__(self, list_sep: str, **kwargs: Any) -> None:
        super().__init__(list_sep)
        self._element_serializer = EnumClassSerializer(**kwargs)

    def serialize(self, value: Any) -> str:
        if isinstance(value, list):
            return self.list_sep.join(self._element_serializer.serialize(x) for x in value)
        return self._element_serializer.serialize(value)


class BaseListParser(ArgumentParser):
    """A list of strings split at ``token`` (whitespace if None); ``name`` describes
    the separator in the help."""

    def __init__(self, token: str | None = None, name: str | None = None) -> None:
        if not name:
            raise ValueError("BaseListParser needs the separator's name")
        self._token, self._name = token, name
        self.syntactic_help = f"a {name} separated list"

    def parse(self, argument: Any) -> list[str]:
        if isinstance(argument, list):
            return argument
        if not argument:
            return []
        return [s.strip() for s in argument.split(self._token)]

    def flag_type(self) -> str:
        return f"{self._name} separated list of strings"


class ListParser(BaseListParser):
    """A comma-separated list (CSV quoting allowed)."""

    def __init__(self) -> None:
        super().__init__(",", "comma")

    def parse(self, argument: Any) -> list[str]:
        if isinstance(argument, list):
            return argument
        if not argument:
            return []
        try:
            return [s.strip() for s in next(csv.reader([argument], strict=True))]
        except csv.Error as e:
            raise ValueError(f"Unable to parse the value {argument!r} as a "
                             f"{self.flag_type()}: {e}") from e


class WhitespaceSeparatedListParser(BaseListParser):
    """A whitespace-separated list."""

    def __init__(self, comma_compat: bool = False) -> None:
        self._comma_compat = comma_compat
        super().__init__(None, "whitespace or comma" if comma_compat else "whitespace")

    def parse(self, argument: Any) -> list[str]:
        if isinstance(argument, list):
            return argument
        if not argument:
            return []
        return (argument.replace(",", " ") if self._comma_compat else argument).split()


# =========================================================================================
# flags
# =========================================================================================
class Flag:
    """One command-line flag: its parser, default, current ``value`` and how many times
    it was ``present`` on the command line."""

    def __init__(self, parser: ArgumentParser, serializer: ArgumentSerializer | None,
                 name: str, default: Any, help_string: str | None,
                 short_name: str | None = None, boolean: bool = False,
                 allow_override: bool = False, allow_override_cpp: bool = False,
                 allow_hide_cpp: bool = False, allow_overwrite: bool = True,
                 allow_using_method_names: bool = False) -> None:
        """``default`` is parsed as a command-line value would be (None: no value)."""
        self.name = name
        self.help = help_string or "(no help available)"
        self.short_name = short_name
        self.boolean = boolean
        self.present = 0
        self.parser = parser
        self.serializer = serializer
        self.allow_override = allow_override
        self.allow_override_cpp = allow_override_cpp
        self.allow_hide_cpp = allow_hide_cpp
        self.allow_overwrite = allow_overwrite
        self.allow_using_method_names = allow_using_method_names
        self.using_default_value = True
        self._value: Any = None
        self.validators: list[_Validator] = []
        if allow_hide_cpp and allow_override_cpp:
            raise Error("Can't have both allow_hide_cpp (means use Python flag) and "
                        "allow_override_cpp (means use C++ flag after InitGoogle)")
        self._set_default(default)

    @property
    def value(self) -> Any:
        """The current value."""
        return self._value

    @value.setter
    def value(self, value: Any) -> None:
        self._value = value

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __bool__(self) -> NoReturn:
        raise TypeError("A Flag instance would always be True. Did you mean to test the "
                        "`.value` attribute?")

    def __getstate__(self) -> NoReturn:
        raise TypeError("can't pickle Flag objects")

    def parse(self, argument: Any) -> None:
        """Set the value from a command-line string (or a value of the flag's type)."""
        if self.present and not self.allow_overwrite:
            raise IllegalFlagValueError(
                f"flag --{self.name}={argument}: already defined as {self.value}")
        self.value = self._parse(argument)
        self.present += 1

    def _parse(self, argument: Any) -> Any:
        try:
            return self.parser.parse(argument)
        except (TypeError, ValueError, OverflowError) as e:
            raise IllegalFlagValueError(f"flag --{self.name}={argument}: {e}") from None

    def unparse(self) -> None:
        self.value = self.default
        self.using_default_value = True
        self.present = 0

    def serialize(self) -> str:
        """The flag as a command-line argument (``--name=value``, ``--[no]flag``)."""
        return self._serialize(self.value)

    def _serialize(self, value: Any) -> str:
        if value is None:
            return ""
        if self.boolean:
            return f"--{self.name}" if value else f"--no{self.name}"
        if not self.serializer:
            raise Error(f"Serializer not present for flag {self.name}")
        return f"--{self.name}={self.serializer.serialize(value)}"

    def _set_default(self, value: Any) -> None:
        self.default_unparsed = value
        self.default = None if value is None else self._parse_from_default(value)
        self.default_as_str = self._as_str(self.default)
        if self.using_default_value:
            self.value = self.default

    def _parse_from_default(self, value: Any) -> Any:
        return self._parse(value)

    def _as_str(self, value: Any) -> str | None:
        if value is None:
            return None
        if self.serializer:
            return repr(self.serializer.serialize(value))
        if self.boolean:
            return repr("true" if value else "false")
        return repr(str(value))

    def flag_type(self) -> str:
        return self.parser.flag_type()


class BooleanFlag(Flag):
    """A flag without an argument: ``--name`` sets it, ``--noname`` clears it."""

    def __init__(self, name: str, default: Any, help: str | None,  # noqa: A002 - absl's
                 short_name: str | None = None, **args: Any) -> None:
        super().__init__(BooleanParser(), None, name, default, help, short_name, True, **args)


class EnumFlag(Flag):
    """A string flag whose value is one of ``enum_values``."""

    def __init__(self, name: str, default: Any, help: str | None,  # noqa: A002 - absl's
                 enum_values: Iterable[str], short_name: str | None = None,
                 case_sensitive: bool = True, **args: Any) -> None:
        p = EnumParser(enum_values, case_sensitive)
        super().__init__(p, ArgumentSerializer(), name, default, help, short_name, **args)
        self.help = f"<{'|'.join(p.enum_values)}>: {self.help}"


class EnumClassFlag(Flag):
    """A flag whose value is a member of ``enum_class``, given by name on the command
    line (any case unless ``case_sensitive``)."""

    def __init__(self, name: str, default: Any, help: str | None,  # noqa: A002 - absl's
                 enum_class: type[enum.Enum], short_name: str | None = None,
                 case_sensitive: bool = False, **args: Any) -> None:
        p = EnumClassParser(enum_class, case_sensitive=case_sensitive)
        super().__init__(p, EnumClassSerializer(lowercase=not case_sensitive), name,
                         default, help, short_name, **args)
        self.help = f"<{'|'.join(p.member_names)}>: {self.help}"


class MultiFlag(Flag):
    """A flag that may be repeated; its value is the list of every occurrence's value."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help += ";\n    repeat this option to specify a list of values"

    def parse(self, arguments: Any) -> None:
        new = self._parse(arguments)
        if self.present:
            self.value.extend(new)
        else:
            self.value = new
        self.present += len(new)

    def _parse(self, arguments: Any) -> list[Any]:
        items = [arguments] if isinstance(arguments, str) or \
            not isinstance(arguments, Iterable) else list(arguments)
        return [Flag._parse(self, item) for item in items]

    def _serialize(self, value: Any) -> str:
        if value is None:
            return ""
        return "\n".join(Flag._serialize(self, v) for v in value)

    def flag_type(self) -> str:
        return "multi " + self.parser.flag_type()


class MultiEnumClassFlag(MultiFlag):
    """A repeatable :class:`EnumClassFlag`: its value is a list of members."""

    def __init__(self, name: str, default: Any, help_string: str | None,
                 enum_class: type[enum.Enum], case_sensitive: bool = False,
                 **args: Any) -> None:
        p = EnumClassParser(enum_class, case_sensitive=case_sensitive)
        super().__init__(p, EnumClassListSerializer(",", lowercase=not case_sensitive),
                         name, default, help_string, **args)
        self.help = (f"<{'|'.join(p.member_names)}>: "
                     f"{help_string or '(no help available)'};\n"
                     "    repeat this option to specify a list of values")


# =========================================================================================
# validators
# =========================================================================================
class _Validator:
    count = 0

    def __init__(self, names: list[str], checker: Callable[[Any], bool], message: str,
                 single: bool) -> None:
        self.names, self.checker, self.message, self.single = names, checker, message, single
        _Validator.count += 1
        self.insertion_index = _Validator.count

    def verify(self, fv: FlagValues) -> None:
        arg = fv[self.names[0]].value if self.single else \
            {n: fv[n].value for n in self.names}
        if not self.checker(arg):
            raise ValidationError(self.message)

    def describe(self, fv: FlagValues) -> str:
        if self.single:
            return f"flag --{self.names[0]}={fv[self.names[0]].value}"
        return "flags " + ", ".join(f"{n}={fv[n].value}" for n in self.names)


# =========================================================================================
# help-text helpers (absl.flags')
# =========================================================================================
def get_help_width() -> int:
    """The width help text is wrapped to: the terminal's columns (``$COLUMNS`` first),
    80 when there is no terminal."""
    return shutil.get_terminal_size(fallback=(80, 1)).columns


def text_wrap(text: str, length: int | None = None, indent: str = "",
              firstline_indent: str | None = None) -> str:
    """Wrap ``text`` to lines of at most ``length`` characters (``get_help_width()`` if
    None), the first indented by ``firstline_indent`` (``indent`` if None), the others
    by ``indent``. Each line of ``text`` is a paragraph, stripped and wrapped on its own;
    blank lines stay (empty); tabs become 4 spaces.

    Raises ValueError when an indent is not shorter than ``length``."""
    length = get_help_width() if length is None else length
    indent = "" if indent is None else indent
    firstline_indent = indent if firstline_indent is None else firstline_indent
    if len(indent) >= length:
        raise ValueError("Length of indent exceeds length")
    if len(firstline_indent) >= length:
        raise ValueError("Length of first line indent exceeds length")
    out: list[str] = []
    wrapper = textwrap.TextWrapper(width=length, initial_indent=firstline_indent,
                                   subsequent_indent=indent)
    for paragraph in (p.strip() for p in text.expandtabs(4).splitlines()):
        out.extend(wrapper.wrap(paragraph) if paragraph else [""])
        wrapper = textwrap.TextWrapper(width=length, initial_indent=indent,
                                       subsequent_indent=indent)
    return "\n".join(out)


def _trim_docstring(doc: str) -> str:
    """PEP 257's docstring trimming: common indentation (first line aside) removed,
    blank lines at both ends dropped."""
    lines = doc.expandtabs().splitlines()
    if not lines:
        return ""
    indents = [len(x) - len(x.lstrip()) for x in lines[1:] if x.strip()]
    trimmed = [lines[0].strip()]
    if indents:
        trimmed += [x[min(indents):].rstrip() for x in lines[1:]]
    while trimmed and not trimmed[-1]:
        trimmed.pop()
    while trimmed and not trimmed[0]:
        trimmed.pop(0)
    return "\n".join(trimmed)


def doc_to_help(doc: str) -> str:
    """A ``__doc__`` string as help text: trimmed like a docstring, whitespace-only lines
    emptied, and single line breaks inside a paragraph joined with a space."""
    doc = re.sub("^[ \t]+$", "", doc.strip(), flags=re.M)
    return re.sub(r"(?<=\S)\n(?=\S)", " ", _trim_docstring(doc), flags=re.M)


def flag_dict_to_args(flag_map: dict[str, Any],
                      multi_flags: set[str] | None = None) -> Iterator[str]:
    """Yield command-line arguments for ``{name: value}``: ``--name`` for None and True,
    ``--noname`` for False, ``--name=value`` for strings, ``--name=a,b`` for other
    iterables (``--name=a --name=b`` for names in ``multi_flags``), ``--name=str(value)``
    for anything else."""
    for key, value in flag_map.items():
        if value is None or value is True:
            yield f"--{key}"
        elif value is False:
            yield f"--no{key}"
        elif isinstance(value, (bytes, str)):
            yield f"--{key}={value}"
        else:
            try:
                if multi_flags and key in multi_flags:
                    for item in value:
                        yield f"--{key}={item}"
                else:
                    yield f"--{key}={','.join(str(item) for item in value)}"
            except TypeError:
                yield f"--{key}={value}"


# =========================================================================================
# FlagValues
# =========================================================================================
def _edit_distance(a: str, b: str) -> int:
    """Damerau-Levenshtein (optimal string alignment) distance, for suggestions."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[-1][-1]


def _suggestions(attempt: str, names: list[str]) -> list[str]:
    if len(attempt) <= 2 or not names:
        return []
    dist = sorted((_edit_distance(attempt, n[:len(attempt)]), n) for n in names)
    least = dist[0][0]
    if least >= 0.5 * len(attempt):
        return []
    return [n for e, n in dist if e == least]


#: ids of the globals of modules that called :func:`disclaim_key_flags` (and this one's):
#: flags are never attributed to them
_DISCLAIMED: set[int] = {id(globals())}


def _module_key(module: Any) -> str:
    """The name flags are registered under: a module's ``__name__``, ``sys.argv[0]``
    for ``__main__``."""
    name = module if isinstance(module, str) else module.__name__
    if name == "__main__":
        return sys.argv[0] if sys.argv and sys.argv[0] else "__main__"
    return name


def _calling_module() -> tuple[str, int]:
    """The name and id of the first module up the stack that is in ``sys.modules`` and
    is neither this one nor one that disclaimed key flags (absl's rule)."""
    f = sys._getframe(1)  # walk out of this module's own frames
    while f is not None and (id(f.f_globals) in _DISCLAIMED
                             or f.f_globals.get("__name__") not in sys.modules):
        f = f.f_back
    if f is None:
        return "<unknown>", 0
    return _module_key(f.f_globals.get("__name__", "<unknown>")), id(f.f_globals)


class FlagValues:
    """A set of flags: ``fv.name`` reads a value, ``fv.name = v`` sets one (running its
    validators), ``fv["name"]`` is the :class:`Flag`, and ``fv(argv)`` parses a command
    line (see the module docstring)."""

    def __init__(self) -> None:
        d = self.__dict__
        d["__flags"] = {}
        d["__flags_by_module"] = {}
        d["__key_flags_by_module"] = {}
        d["__module_ids"] = {}
        d["__flags_parsed"] = False
        d["__use_gnu_getopt"] = True
        d["__banned_flag_names"] = frozenset(dir(FlagValues))

    def _flags(self) -> dict[str, Flag]:
        return self.__dict__["__flags"]

    def set_gnu_getopt(self, gnu_getopt: bool = True) -> None:
        """Whether flags may follow positional arguments (the default)."""
        self.__dict__["__use_gnu_getopt"] = gnu_getopt

    def is_gnu_getopt(self) -> bool:
        return self.__dict__["__use_gnu_getopt"]

    def flags_by_module_dict(self) -> dict[str, list[Flag]]:
        return self.__dict__["__flags_by_module"]

    def register_flag_by_module(self, module_name: str, flag: Flag) -> None:
        self.flags_by_module_dict().setdefault(module_name, []).append(flag)

    def key_flags_by_module_dict(self) -> dict[str, list[Flag]]:
        """Module name -> the flags declared key to it (besides those it defines)."""
        return self.__dict__["__key_flags_by_module"]

    def register_key_flag_for_module(self, module_name: str, flag: Flag) -> None:
        """Make ``flag`` a key flag of ``module_name`` (listed by its ``--helpshort``)."""
        key_flags = self.key_flags_by_module_dict().setdefault(module_name, [])
        if flag not in key_flags:
            key_flags.append(flag)

    def get_flags_for_module(self, module: Any) -> list[Flag]:
        """The flags ``module`` (a module or its name) defined, as a new list."""
        return list(self.flags_by_module_dict().get(_module_key(module), []))

    def get_key_flags_for_module(self, module: Any) -> list[Flag]:
        """The flags ``module`` defined, then those declared key to it."""
        key_flags = self.get_flags_for_module(module)
        for flag in self.key_flags_by_module_dict().get(_module_key(module), []):
            if flag not in key_flags:
                key_flags.append(flag)
        return key_flags

    def find_module_defining_flag(self, flagname: str, default: Any = None) -> Any:
        flag = self._flags().get(flagname)
        for module, flags in self.flags_by_module_dict().items():
            if any(f is flag for f in flags):
                return module
        return default

    # -- defining ---------------------------------------------------------------------------
    def __setitem__(self, name: str, flag: Flag) -> None:
        """Register ``flag`` under ``name`` (and its short name)."""
        fl = self._flags()
        if not isinstance(flag, Flag):
            raise IllegalFlagValueError(f"Expect Flag instances, found type {type(flag)}. "
                                        "Maybe you didn't mean to use FlagValue.__setitem__?")
        if not isinstance(name, str):
            raise Error("Flag name must be a string")
        if not name:
            raise Error("Flag name cannot be empty")
        if " " in name:
            raise Error("Flag name cannot contain a space")
        if name in self.__dict__["__banned_flag_names"] and not flag.allow_using_method_names:
            raise FlagNameConflictsWithMethodError(
                f'Cannot define a flag named "{name}". It conflicts with a method on class '
                f'"{type(self).__name__}". To allow defining it, use '
                "allow_using_method_names and access the flag value with FLAGS[\"name\"]"
                ".value. FLAGS.name returns the method, not the flag value.")
        module, module_id = _calling_module()
        if name in fl and not flag.allow_override and not fl[name].allow_override:
            if self.find_module_defining_flag(name) == module and \
                    self.__dict__["__module_ids"].get(name) != module_id:
                return  # the defining module imported a second time: keep the first
            first = self.find_module_defining_flag(name, "<unknown>")
            raise DuplicateFlagError(
                f"The flag '{name}' is defined twice. First from {first}, Second from "
                f"{module}.  Description from first occurrence: {fl[name].help}")
        if flag.short_name is not None:
            s = flag.short_name
            if s in fl and not flag.allow_override and not fl[s].allow_override:
                first = self.find_module_defining_flag(s, "<unknown>")
                raise DuplicateFlagError(
                    f"The flag '{s}' is defined twice. First from {first}, Second from "
                    f"{module}.  Description from first occurrence: {fl[s].help}")
            fl[s] = flag
        if name not in fl or fl[name].using_default_value or not flag.using_default_value:
            fl[name] = flag
        self.__dict__["__module_ids"].setdefault(name, module_id)

    def __getitem__(self, name: str) -> Flag:
        return self._flags()[name]

    def __contains__(self, name: object) -> bool:
        return name in self._flags()

    def __len__(self) -> int:
        return len(self._flags())

    def __iter__(self) -> Iterator[str]:
        return iter(self._flags())

    def __dir__(self) -> list[str]:
        return sorted(self._flags())

    def __delattr__(self, flag_name: str) -> None:
        fl = self._flags()
        if flag_name not in fl:
            raise AttributeError(flag_name)
        flag = fl.pop(flag_name)
        if flag not in fl.values():
            for flags in (*self.flags_by_module_dict().values(),
                          *self.key_flags_by_module_dict().values()):
                flags[:] = [f for f in flags if f is not flag]
            self.__dict__["__module_ids"].pop(flag_name, None)

    # -- values -----------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        flag = self._flags().get(name)
        if flag is None:
            raise AttributeError(name)
        if self.__dict__["__flags_parsed"] or flag.present:
            return flag.value
        raise UnparsedFlagAccessError(
            f"Trying to access flag --{name} before flags were parsed.")

    def __setattr__(self, name: str, value: Any) -> None:
        self._set_attributes(**{name: value})

    def _set_attributes(self, **attributes: Any) -> None:
        """Set several flags, then run their validators (undoing all on failure)."""
        fl = self._flags()
        old: dict[str, tuple[Any, bool]] = {}
        try:
            for name, value in attributes.items():
                if name not in fl:
                    raise UnrecognizedFlagError(name, value)
                old[name] = (fl[name].value, fl[name].using_default_value)
                fl[name].value = value
            for name in old:
                self._assert_validators(fl[name].validators)
                fl[name].using_default_value = False
        except Exception:
            for name, (value, used_default) in old.items():
                fl[name].value, fl[name].using_default_value = value, used_default
            raise

    def set_default(self, name: str, value: Any) -> None:
        """Change a flag's default (and its value, if it still has the default)."""
        fl = self._flags()
        if name not in fl:
            raise UnrecognizedFlagError(name, value)
        fl[name]._set_default(value)
        self._assert_validators(fl[name].validators)

    def get_flag_value(self, name: str, default: Any) -> Any:
        """The flag's value, or ``default`` when it is None."""
        value = self.__getattr__(name)
        return default if value is None else value

    def flag_values_dict(self) -> dict[str, Any]:
        return {name: flag.value for name, flag in self._flags().items()}

    def _assert_validators(self, validators: Iterable[_Validator]) -> None:
        messages, bad = [], set()
        for v in sorted(validators, key=lambda v: v.insertion_index):
            if bad.intersection(v.names):
                continue
            try:
                v.verify(self)
            except ValidationError as e:
                bad.update(v.names)
                messages.append(f"{v.describe(self)}: {e}")
        if messages:
            raise IllegalFlagValueError("\n".join(messages))

    def validate_all_flags(self) -> None:
        """Run every validator of every flag."""
        vs = {v for flag in self._flags().values() for v in flag.validators}
        self._assert_validators(vs)

    # -- parsing ----------------------------------------------------------------------------
    def __call__(self, argv: Sequence[str], known_only: bool = False) -> list[str]:
        """Parse ``argv`` (``argv[0]`` is the program); returns ``[argv[0]]`` and the
        arguments not taken as flags (with ``known_only``, unknown flags too)."""
        if isinstance(argv, (str, bytes)):
            raise TypeError("argv should be a tuple/list of strings, not bytes or string.")
        if not argv:
            raise ValueError("argv cannot be an empty list, and must contain the program "
                             "name as the first element.")
        args = self.read_flags_from_files(list(argv[1:]), force_gnu=False)
        unknown, rest = self._parse_args(args, known_only)
        for name, value in unknown:
            raise UnrecognizedFlagError(name, value, _suggestions(name, list(self)))
        self.mark_as_parsed()
        self.validate_all_flags()
        return [argv[0]] + rest

    def _parse_args(self, args: list[str], known_only: bool
                    ) -> tuple[list[tuple[str, str]], list[str]]:
        """Parse the flags in ``args``; returns (unknown flags, arguments left)."""
        left: list[tuple[str | None, str]] = []
        undefok: set[str] = set()
        fl = self._flags()
        it = iter(args)
        for arg in it:
            if not arg.startswith("-") or arg.strip("-") == "":
                if arg == "--":
                    if known_only:
                        left.append((None, arg))
                    break
                left.append((None, arg))
                if self.is_gnu_getopt():
                    continue
                break
            body = arg[2:] if arg.startswith("--") else arg[1:]
            name, value = body.split("=", 1) if "=" in body else (body, None)
            if name == "undefok":
                value = value if value is not None else next(it, None)
                if value is None:
                    raise Error("Missing value for flag " + arg)
                for v in value.split(","):
                    undefok.update((v.strip(), "no" + v.strip()))
                continue
            flag = fl.get(name)
            if flag is not None:
                if not (flag.boolean and value is None):
                    value = value if value is not None else next(it, None)
                    if value is None:
                        raise Error("Missing value for flag " + arg)
                else:
                    value = "true"
            elif name.startswith("no") and len(name) > 2 and name[2:] in fl \
                    and fl[name[2:]].boolean:
                if value is not None:
                    raise ValueError(arg + " does not take an argument")
                flag, value = fl[name[2:]], "false"
            if flag is None:
                left.append((name, arg))
                continue
            flag.parse(value)
            flag.using_default_value = False
        unknown, rest = [], []
        for name, arg in left:
            if name is None:
                rest.append(arg)
            elif name not in undefok:
                (rest.append(arg) if known_only else unknown.append((name, arg)))
        rest.extend(it)
        return unknown, rest

    def read_flags_from_files(self, argv: Sequence[str], force_gnu: bool = True
                              ) -> list[str]:
        """``argv`` with each ``--flagfile=<file>`` replaced by the file's flags (one per
        line; ``#`` and ``//`` comment lines and blank lines skipped; nested flagfiles
        expanded)."""
        rest, out = list(argv), []
        while rest:
            arg = rest.pop(0)
            if arg in ("--flagfile", "-flagfile"):
                if not rest:
                    raise IllegalFlagValueError("--flagfile with no argument")
                out.extend(self._flag_file_lines(os.path.expanduser(rest.pop(0))))
            elif arg.startswith(("--flagfile=", "-flagfile=")):
                out.extend(self._flag_file_lines(
                    os.path.expanduser(arg.split("=", 1)[1].strip())))
            else:
                out.append(arg)
                if arg == "--":
                    break
                if not arg.startswith("-"):
                    if not force_gnu and not self.is_gnu_getopt():
                        break
                elif "=" not in arg and rest and not rest[0].startswith("-"):
                    name = arg.lstrip("-")
                    if name in self._flags() and not self._flags()[name].boolean:
                        out.append(rest.pop(0))  # the value of --name value
        return out + rest

    def _flag_file_lines(self, filename: str, stack: list[str] | None = None) -> list[str]:
        """The flag lines of ``filename`` (see :meth:`read_flags_from_files`)."""
        if not filename:
            return []
        stack = stack if stack is not None else []
        if filename in stack:
            sys.stderr.write(f"Warning: Hit circular flagfile dependency. Ignoring flagfile:"
                             f" {filename}\n")
            return []
        stack.append(filename)
        try:
            with open(filename, encoding="utf-8") as f:
                lines = f.readlines()
        except OSError as e:
            raise CantOpenFlagFileError(f"ERROR:: Unable to open flagfile: {e}") from None
        out: list[str] = []
        for line in lines:
            if line.isspace() or line.startswith(("#", "//")):
                continue
            if line.startswith(("--flagfile=", "-flagfile=")):
                out.extend(self._flag_file_lines(
                    os.path.expanduser(line.split("=", 1)[1].strip()), stack))
            else:
                out.append(line.strip())
        stack.pop()
        return out

    def is_parsed(self) -> bool:
        return self.__dict__["__flags_parsed"]

    def mark_as_parsed(self) -> None:
        self.__dict__["__flags_parsed"] = True

    def unparse_flags(self) -> None:
        """Back to before any parse: every flag at its default, reads raise again."""
        for f in self._flags().values():
            f.unparse()
        self.__dict__["__flags_parsed"] = False

    # -- help and serialisation -------------------------------------------------------------
    def _render_flag_list(self, flags: Iterable[Flag], out: list[str],
                          prefix: str = "  ") -> None:
        """Append each flag's wrapped help (sorted by name, once each, skipping flags
        no longer registered under their name) to ``out``."""
        fl, special, seen = self._flags(), _SPECIAL_FLAGS._flags(), set()
        for flag in sorted(flags, key=lambda f: f.name):
            if (fl.get(flag.name) is not flag and special.get(flag.name) is not flag) \
                    or id(flag) in seen:
                continue
            seen.add(id(flag))
            head = (f"-{flag.short_name}," if flag.short_name else "") + \
                (f"--[no]{flag.name}:" if flag.boolean else f"--{flag.name}:")
            text = text_wrap(f"{head} {flag.help}" if flag.help else f"{head} ",
                             indent=prefix + "  ", firstline_indent=prefix)
            if flag.default_as_str:
                text += "\n" + text_wrap(f"(default: {flag.default_as_str})",
                                         indent=prefix + "  ")
            if flag.parser.syntactic_help:
                text += "\n" + text_wrap(f"({flag.parser.syntactic_help})",
                                         indent=prefix + "  ")
            out.append(text)

    def _render_module_flags(self, module: Any, flags: Iterable[Flag], out: list[str],
                             prefix: str = "") -> None:
        out.append(f"\n{prefix}{module if isinstance(module, str) else module.__name__}:")
        self._render_flag_list(flags, out, prefix + "  ")

    def get_help(self, prefix: str = "", include_special_flags: bool = True) -> str:
        """Every flag with its help, grouped by defining module (the main program's
        first), then ``--flagfile`` and ``--undefok`` unless not
        ``include_special_flags``."""
        out: list[str] = []
        by_module = self.flags_by_module_dict()
        special = list(_SPECIAL_FLAGS._flags().values()) if include_special_flags else []
        if not by_module:
            self._render_flag_list(list(self._flags().values()) + special, out, prefix)
            return "\n".join(out)
        modules = sorted(by_module)
        main = _module_key("__main__")
        if main in modules:
            modules.remove(main)
            modules.insert(0, main)
        for module in modules:
            flags = self.get_flags_for_module(module)
            if flags:
                self._render_module_flags(module, flags, out, prefix)
        if special:
            self._render_module_flags("absl.flags", special, out, prefix)
        return "\n".join(out)

    def module_help(self, module: Any) -> str:
        """The help of ``module``'s key flags (those it defines or declared key)."""
        out: list[str] = []
        key_flags = self.get_key_flags_for_module(module)
        if key_flags:
            self._render_module_flags(module, key_flags, out)
        return "\n".join(out)

    def main_module_help(self) -> str:
        """The help of the main program's key flags (what ``--helpshort`` prints)."""
        return self.module_help(_module_key("__main__"))

    def __str__(self) -> str:
        return self.get_help()

    def flags_into_string(self) -> str:
        """Every flag with a value, one ``--name=value`` per line (a flagfile)."""
        out, seen = [], set()
        for module in sorted(self.flags_by_module_dict()):
            for flag in self.flags_by_module_dict()[module]:
                if flag.value is not None and id(flag) not in seen:
                    seen.add(id(flag))
                    out.append(flag.serialize() + "\n")
        return "".join(out)

    def append_flags_into_file(self, filename: str) -> None:
        with open(filename, "a", encoding="utf-8") as f:
            f.write(self.flags_into_string())

    def __getstate__(self) -> NoReturn:
        raise TypeError("can't pickle FlagValues")


class _FlagValuesWrapper:
    """``tf.flags.FLAGS``: absl's FLAGS, except that reading a flag before any parse
    parses ``sys.argv`` first (TF's wrapper, kept for TF 1.x programs)."""

    def __init__(self, flags_object: FlagValues) -> None:
        self.__dict__["__wrapped"] = flags_object

    def __getattribute__(self, name: str) -> Any:
        if name == "__dict__":
            return super().__getattribute__(name)
        return self.__dict__["__wrapped"].__getattribute__(name)

    def __getattr__(self, name: str) -> Any:
        wrapped = self.__dict__["__wrapped"]
        if not wrapped.is_parsed():
            wrapped(sys.argv)
        return wrapped.__getattr__(name)

    def __setattr__(self, name: str, value: Any) -> None:
        self.__dict__["__wrapped"].__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        self.__dict__["__wrapped"].__delattr__(name)

    def __dir__(self) -> list[str]:
        return self.__dict__["__wrapped"].__dir__()

    def __getitem__(self, name: str) -> Flag:
        return self.__dict__["__wrapped"][name]

    def __setitem__(self, name: str, flag: Flag) -> None:
        self.__dict__["__wrapped"][name] = flag

    def __contains__(self, name: object) -> bool:
        return name in self.__dict__["__wrapped"]

    def __len__(self) -> int:
        return len(self.__dict__["__wrapped"])

    def __iter__(self) -> Iterator[str]:
        return iter(self.__dict__["__wrapped"])

    def __str__(self) -> str:
        return str(self.__dict__["__wrapped"])

    def __call__(self, *args: Any, **kwargs: Any) -> list[str]:
        return self.__dict__["__wrapped"](*args, **kwargs)


_FLAGS = FlagValues()
#: absl's special flags, handled by the parser itself and listed last in the help
_SPECIAL_FLAGS = FlagValues()
for _name, _help in (
        ("flagfile", "Insert flag definitions from the given file into the command line."),
        ("undefok", "comma-separated list of flag names that it is okay to specify on the "
         "command line even if the program does not define a flag with that name.  "
         "IMPORTANT: flags in this list that have arguments MUST use the --flag=value "
         "format.")):
    _SPECIAL_FLAGS[_name] = Flag(ArgumentParser(), ArgumentSerializer(), _name, "", _help)
    _SPECIAL_FLAGS.register_flag_by_module("absl.flags", _SPECIAL_FLAGS[_name])
#: the program's flags (``tf.flags.FLAGS``, ``tf.app.flags.FLAGS``)
FLAGS: Any = _FlagValuesWrapper(_FLAGS)


def _unwrap(fv: Any) -> FlagValues:
    return fv.__dict__["__wrapped"] if isinstance(fv, _FlagValuesWrapper) else fv


# =========================================================================================
# DEFINE_*
# =========================================================================================
class FlagHolder:
    """What ``DEFINE_*`` returns: a handle on one flag (``.value`` reads it). With
    ``ensure_non_none_value`` (a non-None default, or required), reading None raises
    IllegalFlagValueError."""

    def __init__(self, flag_values: FlagValues, flag: Flag,
                 ensure_non_none_value: bool = False) -> None:
        self._flagvalues, self._name = flag_values, flag.name
        self._ensure_non_none_value = ensure_non_none_value

    def __eq__(self, other: object) -> NoReturn:
        a, b = type(self).__name__, type(other).__name__
        raise TypeError(f"unsupported operand type(s) for ==: '{a}' and '{b}' (did you "
                        f"mean to use '{a}.value' instead?)")

    __hash__ = object.__hash__

    def __bool__(self) -> NoReturn:
        a = type(self).__name__
        raise TypeError(f"bool() not supported for instances of type '{a}' (did you mean "
                        f"to use '{a}.value' instead?)")

    @property
    def name(self) -> str:
        return self._name

    @property
    def value(self) -> Any:
        val = getattr(self._flagvalues, self._name)
        if self._ensure_non_none_value and val is None:
            raise IllegalFlagValueError(f"Unexpected None value for flag {self._name}")
        return val

    @property
    def default(self) -> Any:
        return self._flagvalues[self._name].default

    @property
    def present(self) -> bool:
        return bool(self._flagvalues[self._name].present)

    def serialize(self) -> str:
        return self._flagvalues[self._name].serialize()


def DEFINE_flag(flag: Flag, flag_values: Any = _FLAGS,  # noqa: N802 - absl's name
                module_name: str | None = None, required: bool = False) -> FlagHolder:
    """Register a :class:`Flag` object on ``flag_values``."""
    if required and flag.default is not None:
        raise ValueError(f"Required flag --{flag.name} needs to have None as default")
    fv = _unwrap(flag_values)
    fv[flag.name] = flag
    if flag in fv.__dict__["__flags"].values():
        fv.register_flag_by_module(module_name or _calling_module()[0], flag)
    if required:
        mark_flag_as_required(flag.name, fv)
    return FlagHolder(fv, flag, flag.default is not None or required)


def DEFINE(parser: ArgumentParser, name: str, default: Any, help: str | None,  # noqa: N802,A002
           flag_values: Any = _FLAGS, serializer: ArgumentSerializer | None = None,
           module_name: str | None = None, required: bool = False,
           **args: Any) -> FlagHolder:
    """Define a flag of any parser."""
    return DEFINE_flag(Flag(parser, serializer, name, default, help, **args), flag_values,
                       module_name, required)


_MISSING: Any = object()


def _renamed(name: Any, default: Any, help_: Any, args: dict[str, Any]) -> tuple:
    """TF's wrapper: accept the old keyword names ``flag_name``, ``default_value`` and
    ``docstring`` for ``name``, ``default`` and ``help`` (with a warning)."""
    old = [k for k in ("flag_name", "default_value", "docstring") if k in args]
    if old:
        logging.warning("Use of the keyword argument names (flag_name, default_value, "
                        "docstring) is deprecated, please use (name, default, help) "
                        "instead.")
        name = args.pop("flag_name", name)
        default = args.pop("default_value", default)
        help_ = args.pop("docstring", help_)
    missing = [w for w, v in (("name", name), ("default", default), ("help", help_))
               if v is _MISSING]
    if missing:
        raise TypeError(f"missing required argument(s): {', '.join(missing)}")
    return name, default, help_


def DEFINE_string(name: str = _MISSING, default: Any = _MISSING,  # noqa: N802
                  help: str | None = _MISSING, flag_values: Any = _FLAGS,  # noqa: A002
                  required: bool = False, **args: Any) -> FlagHolder:
    """A string flag."""
    name, default, help_ = _renamed(name, default, help, args)
    return DEFINE(ArgumentParser(), name, default, help_, flag_values, ArgumentSerializer(),
                  required=required, **args)


def DEFINE_boolean(name: str = _MISSING, default: Any = _MISSING,  # noqa: N802
                   help: str | None = _MISSING, flag_values: Any = _FLAGS,  # noqa: A002
                   module_name: str | None = None, required: bool = False,
                   **args: Any) -> FlagHolder:
    """A boolean flag: ``--name`` / ``--name=false`` / ``--noname``."""
    name, default, help_ = _renamed(name, default, help, args)
    return DEFINE_flag(BooleanFlag(name, default, help_, **args), flag_values, module_name,
                       required)


DEFINE_bool = DEFINE_boolean


def _bounds_validator(parser: _NumericParser, name: str, fv: Any) -> None:
    if parser.lower_bound is not None or parser.upper_bound is not None:
        def checker(value: Any) -> bool:
            if value is not None and parser.is_outside_bounds(value):
                raise ValidationError(f"{value} is not {parser.syntactic_help}")
            return True
        register_validator(name, checker, flag_values=fv)


def _numeric(parser: _NumericParser, name: Any, default: Any, help_: Any, flag_values: Any,
             required: bool, args: dict) -> FlagHolder:
    name, default, help_ = _renamed(name, default, help_, args)
    holder = DEFINE(parser, name, default, help_, flag_values, ArgumentSerializer(),
                    required=required, **args)
    _bounds_validator(parser, name, flag_values)
    return holder


def DEFINE_integer(name: str = _MISSING, default: Any = _MISSING,  # noqa: N802
                   help: str | None = _MISSING,  # noqa: A002 - absl's name
                   lower_bound: int | None = None, upper_bound: int | None = None,
                   flag_values: Any = _FLAGS, required: bool = False,
                   **args: Any) -> FlagHolder:
    """An integer flag, optionally bounded."""
    return _numeric(IntegerParser(lower_bound, upper_bound), name, default, help,
                    flag_values, required, args)


def DEFINE_float(name: str = _MISSING, default: Any = _MISSING,  # noqa: N802
                 help: str | None = _MISSING,  # noqa: A002 - absl's name
                 lower_bound: float | None = None, upper_bound: float | None = None,
                 flag_values: Any = _FLAGS, required: bool = False,
                 **args: Any) -> FlagHolder:
    """A float flag, optionally bounded."""
    return _numeric(FloatParser(lower_bound, upper_bound), name, default, help,
                    flag_values, required, args)


def DEFINE_enum(name: str, default: Any, enum_values: Iterable[str],  # noqa: N802
                help: str | None, flag_values: Any = _FLAGS,  # noqa: A002 - absl's name
                module_name: str | None = None, required: bool = False,
                **args: Any) -> FlagHolder:
    """A string flag whose value must be one of ``enum_values``."""
    return DEFINE_flag(EnumFlag(name, default, help, enum_values, **args), flag_values,
                       module_name, required)


def DEFINE_list(name: str, default: Any, help: str | None,  # noqa: N802,A002
                flag_values: Any = _FLAGS, required: bool = False,
                **args: Any) -> FlagHolder:
    """A comma-separated list of strings (``--name=a,b,c``)."""
    return DEFINE(ListParser(), name, default, help, flag_values, CsvListSerializer(","),
                  required=required, **args)


def DEFINE_spaceseplist(name: str, default: Any, help: str | None,  # noqa: N802,A002
                        comma_compat: bool = False, flag_values: Any = _FLAGS,
                        required: bool = False, **args: Any) -> FlagHolder:
    """A whitespace-separated list of strings."""
    return DEFINE(WhitespaceSeparatedListParser(comma_compat), name, default, help,
                  flag_values, ListSerializer(" "), required=required, **args)


def DEFINE_multi(parser: ArgumentParser, serializer: ArgumentSerializer,  # noqa: N802
                 name: str, default: Any, help: str | None,  # noqa: A002 - absl's name
                 flag_values: Any = _FLAGS, module_name: str | None = None,
                 required: bool = False, **args: Any) -> FlagHolder:
    """A flag that may be repeated; its value is the list of all its values."""
    return DEFINE_flag(MultiFlag(parser, serializer, name, default, help, **args),
                       flag_values, module_name, required)


def DEFINE_multi_string(name: str, default: Any, help: str | None,  # noqa: N802,A002
                        flag_values: Any = _FLAGS, **args: Any) -> FlagHolder:
    """A repeatable string flag."""
    return DEFINE_multi(ArgumentParser(), ArgumentSerializer(), name, default, help,
                        flag_values, **args)


def DEFINE_multi_integer(name: str, default: Any, help: str | None,  # noqa: N802,A002
                         lower_bound: int | None = None, upper_bound: int | None = None,
                         flag_values: Any = _FLAGS, **args: Any) -> FlagHolder:
    """A repeatable integer flag."""
    return DEFINE_multi(IntegerParser(lower_bound, upper_bound), ArgumentSerializer(),
                        name, default, help, flag_values, **args)


def DEFINE_multi_float(name: str, default: Any, help: str | None,  # noqa: N802,A002
                       lower_bound: float | None = None, upper_bound: float | None = None,
                       flag_values: Any = _FLAGS, **args: Any) -> FlagHolder:
    """A repeatable float flag."""
    return DEFINE_multi(FloatParser(lower_bound, upper_bound), ArgumentSerializer(),
                        name, default, help, flag_values, **args)


def DEFINE_multi_enum(name: str, default: Any, enum_values: Iterable[str],  # noqa: N802
                      help: str | None, flag_values: Any = _FLAGS,  # noqa: A002
                      case_sensitive: bool = True, **args: Any) -> FlagHolder:
    """A repeatable enum flag."""
    return DEFINE_multi(EnumParser(enum_values, case_sensitive), ArgumentSerializer(),
                        name, default, help, flag_values, **args)


def DEFINE_enum_class(name: str, default: Any, enum_class: type[enum.Enum],  # noqa: N802
                      help: str | None, flag_values: Any = _FLAGS,  # noqa: A002 - absl's
                      module_name: str | None = None, case_sensitive: bool = False,
                      required: bool = False, **args: Any) -> FlagHolder:
    """A flag whose value is a member of ``enum_class``, named on the command line
    (case-insensitively unless ``case_sensitive``)."""
    return DEFINE_flag(EnumClassFlag(name, default, help, enum_class,
                                     case_sensitive=case_sensitive, **args),
                       flag_values, module_name, required=required)


def DEFINE_multi_enum_class(name: str, default: Any,  # noqa: N802 - absl's name
                            enum_class: type[enum.Enum], help: str | None,  # noqa: A002
                            flag_values: Any = _FLAGS, module_name: str | None = None,
                            case_sensitive: bool = False, required: bool = False,
                            **args: Any) -> FlagHolder:
    """A repeatable enum-class flag: its value is the list of members given."""
    return DEFINE_flag(MultiEnumClassFlag(name, default, help, enum_class,
                                          case_sensitive=case_sensitive, **args),
                       flag_values, module_name, required=required)


class _FlagAlias(Flag):
    """Another name for a flag: parsing it parses the original, and its value is the
    original's."""

    def __init__(self, original: Flag, name: str) -> None:
        self._original = original
        super().__init__(original.parser, original.serializer, name, original.default,
                         f"Alias for --{original.name}.", boolean=original.boolean)

    def parse(self, argument: Any) -> None:
        self._original.parse(argument)
        self.present += 1

    def _parse_from_default(self, value: Any) -> Any:
        return value  # the original's default, parsed already

    @property
    def value(self) -> Any:
        return self._original.value

    @value.setter
    def value(self, value: Any) -> None:
        if "_original" in self.__dict__:
            self._original.value = value


def DEFINE_alias(name: str, original_name: str,  # noqa: N802 - absl's name
                 flag_values: Any = _FLAGS, module_name: str | None = None) -> FlagHolder:
    """Define ``name`` as another name for the flag ``original_name``."""
    fv = _unwrap(flag_values)
    if original_name not in fv:
        raise UnrecognizedFlagError(original_name)
    return DEFINE_flag(_FlagAlias(fv[original_name], name), fv, module_name)


def set_default(flag_holder: FlagHolder, value: Any) -> None:
    """Change the default of the flag ``flag_holder`` refers to (and its value, when it
    still has the default); IllegalFlagValueError when the value is not valid."""
    flag_holder._flagvalues.set_default(flag_holder.name, value)


def override_value(flag_holder: FlagHolder, value: Any) -> None:
    """Set the flag's value (over the default and the command line), which must be of
    the flag's type already (a value its parser returns unchanged) and pass its
    validators; IllegalFlagValueError otherwise."""
    fv = flag_holder._flagvalues
    parsed = fv[flag_holder.name]._parse(value)
    if parsed != value:
        raise IllegalFlagValueError(f"flag {flag_holder.name}: parsed value {parsed!r} "
                                    f"not equal to original {value!r}")
    setattr(fv, flag_holder.name, value)


def _flag_ref(ref: str | FlagHolder, flag_values: Any) -> tuple[str, FlagValues]:
    """A flag name or holder as (name, the FlagValues it is defined on)."""
    if isinstance(ref, FlagHolder):
        if _unwrap(flag_values) is not _FLAGS and \
                _unwrap(flag_values) is not ref._flagvalues:
            raise ValueError("flag_values must not be customized when operating on a "
                             "FlagHolder")
        return ref.name, ref._flagvalues
    return ref, _unwrap(flag_values)


def _flag_refs(refs: Sequence[str | FlagHolder], flag_values: Any
               ) -> tuple[list[str], FlagValues]:
    """Names or holders as (names, their one FlagValues)."""
    fv, names = None, []
    for ref in refs:
        new = ref._flagvalues if isinstance(ref, FlagHolder) else _unwrap(flag_values)
        if fv is not None and fv is not new:
            raise ValueError("multiple FlagValues instances used in invocation. "
                             "FlagHolders must be registered to the same FlagValues "
                             "instance as do flag names, if provided.")
        fv = new
        names.append(ref.name if isinstance(ref, FlagHolder) else ref)
    if fv is None:
        raise ValueError("flag_refs argument must not be empty")
    return names, fv


def declare_key_flag(flag_name: str | FlagHolder, flag_values: Any = _FLAGS) -> None:
    """Make a defined flag (or ``flagfile`` / ``undefok``) a key flag of the calling
    module: ``--helpshort`` of that module lists it. ValueError if it is not defined."""
    name, fv = _flag_ref(flag_name, flag_values)
    module = _calling_module()[0]
    if name in _SPECIAL_FLAGS:
        fv.register_key_flag_for_module(module, _SPECIAL_FLAGS[name])
    elif name in fv:
        fv.register_key_flag_for_module(module, fv[name])
    else:
        raise ValueError(f"Flag --{name} is undefined. To set a flag as a key flag first "
                         "define it in Python.")


def adopt_module_key_flags(module: Any, flag_values: Any = _FLAGS) -> None:
    """Make every key flag of ``module`` (a module object) a key flag of the calling
    module; for the flags module itself, ``flagfile`` and ``undefok``."""
    if not isinstance(module, types.ModuleType):
        raise Error(f"Expected a module object, not {module!r}.")
    fv, caller = _unwrap(flag_values), _calling_module()[0]
    for flag in fv.get_key_flags_for_module(module.__name__):
        fv.register_key_flag_for_module(caller, fv[flag.name])
    if module is sys.modules[__name__]:
        for name in _SPECIAL_FLAGS:
            fv.register_key_flag_for_module(caller, _SPECIAL_FLAGS[name])


def disclaim_key_flags() -> None:
    """From now on, flags defined from the calling module (typically one that wraps
    ``DEFINE_*``) belong to the module that called it."""
    _DISCLAIMED.add(id(sys._getframe(1).f_globals))  # the caller's module


def register_validator(flag_name: str | FlagHolder, checker: Callable[[Any], bool],
                       message: str = "Flag validation failed",
                       flag_values: Any = _FLAGS) -> None:
    """Check ``checker(value)`` after each parse and assignment of the flag (False, or
    a raised ValidationError, fails with IllegalFlagValueError)."""
    name, fv = _flag_ref(flag_name, flag_values)
    fv[name].validators.append(_Validator([name], checker, message, True))


def validator(flag_name: str | FlagHolder, message: str = "Flag validation failed",
              flag_values: Any = _FLAGS) -> Callable[[Callable], Callable]:
    """Decorator form of :func:`register_validator`."""
    def decorate(fn: Callable) -> Callable:
        register_validator(flag_name, fn, message, flag_values)
        return fn
    return decorate


def register_multi_flags_validator(flag_names: Sequence[str | FlagHolder],
                                   multi_flags_checker: Callable[[dict], bool],
                                   message: str = "Flags validation failed",
                                   flag_values: Any = _FLAGS) -> None:
    """Check ``checker({name: value})`` over several flags."""
    names, fv = _flag_refs(flag_names, flag_values)
    v = _Validator(names, multi_flags_checker, message, False)
    for n in names:
        fv[n].validators.append(v)


def multi_flags_validator(flag_names: Sequence[str | FlagHolder],
                          message: str = "Flag validation failed",
                          flag_values: Any = _FLAGS) -> Callable[[Callable], Callable]:
    """Decorator form of :func:`register_multi_flags_validator`."""
    def decorate(fn: Callable) -> Callable:
        register_multi_flags_validator(flag_names, fn, message, flag_values)
        return fn
    return decorate


def mark_flag_as_required(flag_name: str | FlagHolder, flag_values: Any = _FLAGS) -> None:
    """Fail the parse unless the flag ends up with a value other than None."""
    name, fv = _flag_ref(flag_name, flag_values)
    if fv[name].default is not None:
        warnings.warn(f"Flag --{name} has a non-None default value; therefore, "
                      "mark_flag_as_required will pass even if flag is not specified in "
                      "the command line!", stacklevel=2)
    register_validator(name, lambda value: value is not None,
                       f"Flag --{name} must have a value other than None.", fv)


def mark_flags_as_required(flag_names: Sequence[str | FlagHolder],
                           flag_values: Any = _FLAGS) -> None:
    for name in flag_names:
        mark_flag_as_required(name, flag_values)


def _mutual_exclusion(flag_names: Sequence[str | FlagHolder], required: bool,
                      flag_values: Any, count: Callable[[Any], bool], what: str) -> None:
    names, fv = _flag_refs(flag_names, flag_values)

    def checker(values: dict) -> bool:
        n = sum(1 for v in values.values() if count(v))
        if n == 1 or (not required and n == 0):
            return True
        raise ValidationError(f"{'Exactly' if required else 'At most'} one of "
                              f"({', '.join(names)}) must {what}.")
    register_multi_flags_validator(names, checker, flag_values=fv)


def mark_flags_as_mutual_exclusive(flag_names: Sequence[str | FlagHolder],
                                   required: bool = False, flag_values: Any = _FLAGS) -> None:
    """At most one (exactly one if ``required``) of the flags may be other than None."""
    names, fv = _flag_refs(flag_names, flag_values)
    for name in names:
        if fv[name].default is not None:
            warnings.warn(f"Flag --{name} has a non-None default value. That does not make "
                          "sense with mark_flags_as_mutual_exclusive, which checks whether "
                          "the listed flags have a value other than None.", stacklevel=2)
    _mutual_exclusion(flag_names, required, flag_values, lambda v: v is not None,
                      "have a value other than None")


def mark_bool_flags_as_mutual_exclusive(flag_names: Sequence[str | FlagHolder],
                                        required: bool = False,
                                        flag_values: Any = _FLAGS) -> None:
    """At most one (exactly one if ``required``) of the boolean flags may be True;
    ValidationError if one of them is not boolean."""
    names, fv = _flag_refs(flag_names, flag_values)
    for name in names:
        if not fv[name].boolean:
            raise ValidationError(f"Flag --{name} is not Boolean, which is required for "
                                  "flags used in mark_bool_flags_as_mutual_exclusive.")
    _mutual_exclusion(flag_names, required, flag_values, bool, "be True")


# =========================================================================================
# tf.app.run
# =========================================================================================
class _HelpFlag(BooleanFlag):
    """``--help`` (``-?``), ``--helpshort``, ``--helpfull``: print and exit(1)."""

    def __init__(self, name: str, short_name: str | None, full: bool) -> None:
        super().__init__(name, False, "show full help" if full else "show this help",
                         short_name=short_name)
        self._full = full

    def parse(self, arg: Any) -> None:
        if self._parse(arg):
            _usage(full=self._full)
            if not self._full:
                print()
                print("Try --helpfull to get a list of all flags.")
            sys.exit(1)


def _usage(full: bool) -> None:
    """absl's usage text on stdout: the main module's docstring (each ``%s`` the
    program's name) or a USAGE line, then the flags."""
    prog = sys.argv[0] if sys.argv else ""
    doc = getattr(sys.modules.get("__main__"), "__doc__", None)
    if not doc:
        doc = text_wrap(f"\nUSAGE: {prog} [flags]\n", indent="       ", firstline_indent="")
    else:
        try:
            doc %= (prog,) * (doc.count("%") - 2 * doc.count("%%"))
        except (OverflowError, TypeError, ValueError):
            pass  # shown as it is
    text = _FLAGS.get_help() if full else _FLAGS.main_module_help()
    sys.stdout.write(doc + ("\nflags:\n" + text if text else "") + "\n")


def _define_help_flags() -> None:
    for name, short, full in (("help", "?", False), ("helpshort", None, False),
                              ("helpfull", None, True)):
        if name not in _FLAGS:
            DEFINE_flag(_HelpFlag(name, short, full), _FLAGS, module_name=__name__)


def run(main: Callable[[list[str]], Any] | None = None,
        argv: Sequence[str] | None = None) -> NoReturn:
    """``tf.app.run``: parse the flags of ``argv`` (``sys.argv`` if None), leaving flags
    it does not know in place, call ``main(remaining_argv)`` (``__main__.main`` if
    ``main`` is None) and ``sys.exit`` with what it returns."""
    main = main or sys.modules["__main__"].main
    _define_help_flags()
    args = _FLAGS(sys.argv if argv is None else argv, known_only=True)
    sys.exit(main(args))


# =========================================================================================
# tf.flags.tf_decorator (TF's tensorflow.python.util.tf_decorator, which tf.flags exports)
# =========================================================================================
class TFDecorator:
    """What :func:`make_decorator` attaches to a wrapper as ``_tf_decorator``: the
    decorator's name and doc and the callable it wraps (``decorated_target``)."""

    def __init__(self, decorator_name: str, target: Any, decorator_doc: str = "",
                 decorator_argspec: Any = None) -> None:
        self._decorated_target = target
        self._decorator_name = decorator_name
        self._decorator_doc = decorator_doc
        self._decorator_argspec = decorator_argspec
        for attr in ("__name__", "__qualname__"):
            if hasattr(target, attr):
                setattr(self, attr, getattr(target, attr))
        self.__doc__ = decorator_doc or getattr(target, "__doc__", None) or ""
        if decorator_argspec:
            self.__signature__ = _fullargspec_to_signature(decorator_argspec)
        elif callable(target):
            try:
                self.__signature__ = inspect.signature(target)
            except (TypeError, ValueError):
                pass

    def __get__(self, instance: Any, owner: Any) -> Any:
        return self._decorated_target.__get__(instance, owner)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._decorated_target(*args, **kwargs)

    @property
    def decorated_target(self) -> Any:
        return self._decorated_target

    @decorated_target.setter
    def decorated_target(self, target: Any) -> None:
        self._decorated_target = target

    @property
    def decorator_name(self) -> str:
        return self._decorator_name

    @property
    def decorator_doc(self) -> str:
        return self._decorator_doc

    @property
    def decorator_argspec(self) -> Any:
        return self._decorator_argspec


def _fullargspec_to_signature(spec: inspect.FullArgSpec) -> inspect.Signature:
    """An ``inspect.FullArgSpec`` as the equivalent ``inspect.Signature``."""
    P = inspect.Parameter
    defaults = dict(spec.kwonlydefaults or {})
    if spec.defaults:
        defaults.update(zip(spec.args[-len(spec.defaults):], spec.defaults))
    params = [P(a, P.POSITIONAL_OR_KEYWORD, default=defaults.get(a, P.empty))
              for a in spec.args]
    if spec.varargs is not None:
        params.append(P(spec.varargs, P.VAR_POSITIONAL))
    params += [P(a, P.KEYWORD_ONLY, default=defaults.get(a, P.empty))
               for a in spec.kwonlyargs]
    if spec.varkw is not None:
        params.append(P(spec.varkw, P.VAR_KEYWORD))
    return inspect.Signature(params)


def _has_tf_decorator(obj: Any) -> bool:
    return isinstance(getattr(obj, "_tf_decorator", None), TFDecorator)


def unwrap(maybe_tf_decorator: Any) -> tuple[list[TFDecorator], Any]:
    """``([TFDecorator, ...] outermost first, the innermost undecorated target)``."""
    decorators, cur = [], maybe_tf_decorator
    while True:
        if isinstance(cur, TFDecorator):
            decorators.append(cur)
        elif _has_tf_decorator(cur):
            decorators.append(cur._tf_decorator)
        else:
            break
        cur = decorators[-1].decorated_target
    return decorators, cur


def make_decorator(target: Any, decorator_func: Any, decorator_name: str | None = None,
                   decorator_doc: str = "", decorator_argspec: Any = None) -> Any:
    """Give the wrapper ``decorator_func`` the identity of ``target`` (name, qualname,
    module, attributes, doc, signature, ``__wrapped__``) and a ``_tf_decorator``
    recording both; returns ``decorator_func``. ``decorator_name`` defaults to the
    name of the function that called this one."""
    if decorator_name is None:
        decorator_name = sys._getframe(1).f_code.co_name  # the calling function's name
    decorator = TFDecorator(decorator_name, target, decorator_doc, decorator_argspec)
    decorator_func._tf_decorator = decorator
    for attr in ("__name__", "__qualname__", "__module__"):
        if hasattr(target, attr):
            setattr(decorator_func, attr, getattr(target, attr))
    for name, value in getattr(target, "__dict__", {}).items():
        decorator_func.__dict__.setdefault(name, value)
    if hasattr(target, "__doc__"):
        decorator_func.__doc__ = decorator.__doc__
    decorator_func.__wrapped__ = target
    decorator_func.__original_wrapped__ = target
    if decorator_argspec:
        decorator_func.__signature__ = _fullargspec_to_signature(decorator_argspec)
    elif callable(target):
        try:
            signature = inspect.signature(target)
        except (TypeError, ValueError):
            return decorator_func
        bound = next((d.decorated_target.__self__ for d in unwrap(target)[0]
                      if inspect.ismethod(d.decorated_target)), None)
        if bound is not None and "self" in signature.parameters:
            signature = inspect.Signature(list(signature.parameters.values())[1:])
            decorator_func.__self__ = bound
        decorator_func.__signature__ = signature
    return decorator_func


#: ``tf.flags.tf_decorator``: TF's flags module exports its tf_decorator import
tf_decorator = types.ModuleType("tf_decorator", "TF's decorator helpers: make_decorator "
                                "and unwrap (and the TFDecorator they use).")
tf_decorator.TFDecorator = TFDecorator
tf_decorator.make_decorator = make_decorator
tf_decorator.unwrap = unwrap
tf_decorator.fullargspec_to_signature = _fullargspec_to_signature

#: published as ``tf.app.*``, ``tf.flags.*`` and ``tf.app.flags.*``
_FLAG_NAMES = [n for n in __all__ if n not in ("run", "API")]
API: dict[str, Any] = {"app.run": run}
for _n in _FLAG_NAMES:
    API[f"flags.{_n}"] = globals()[_n]
    API[f"app.flags.{_n}"] = globals()[_n]
