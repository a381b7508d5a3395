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
  as TF's wrapper does, parses ``sys.argv`` on the first read instead.

:func:`run` is ``tf.app.run``: it parses ``argv`` (``sys.argv`` by default) with unknown
flags left in place (TF's ``known_only=True``), calls ``main(remaining_argv)`` and exits
with ``sys.exit(main's return value)``. ``--help`` / ``--helpshort`` / ``--helpfull``
print the flags and exit with status 1, as absl's ``app.run`` does.
"""
from __future__ import annotations

import csv
import io
import logging
import os
import sys
import textwrap
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
           "mark_flags_as_mutual_exclusive", "run", "API"]


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


class BaseListParser(ArgumentParser):
    def __init__(self, token: str | None = None, name: str = "comma") -> None:
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
        self.value: Any = None
        self.validators: list[_Validator] = []
        self._set_default(default)

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
        self.default = None if value is None else self._parse(value)
        self.default_as_str = self._as_str(self.default)
        if self.using_default_value:
            self.value = self.default

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


def _calling_module() -> tuple[str, int]:
    """The name and id of the first module up the stack that is not this one."""
    f = sys._getframe(1)  # walk out of this module's own frames
    while f is not None and f.f_globals.get("__name__") == __name__:
        f = f.f_back
    if f is None:
        return "<unknown>", 0
    name = f.f_globals.get("__name__", "<unknown>")
    if name == "__main__":
        name = sys.argv[0] if sys.argv and sys.argv[0] else "__main__"
    return name, id(f.f_globals)


class FlagValues:
    """A set of flags: ``fv.name`` reads a value, ``fv.name = v`` sets one (running its
    validators), ``fv["name"]`` is the :class:`Flag`, and ``fv(argv)`` parses a command
    line (see the module docstring)."""

    def __init__(self) -> None:
        d = self.__dict__
        d["__flags"] = {}
        d["__flags_by_module"] = {}
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
            for flags in self.flags_by_module_dict().values():
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
    def _render(self, flags: Iterable[Flag]) -> list[str]:
        out, seen = [], set()
        for flag in sorted(flags, key=lambda f: f.name):
            if id(flag) in seen:
                continue
            seen.add(id(flag))
            head = (f"-{flag.short_name}," if flag.short_name else "") + \
                (f"--[no]{flag.name}:" if flag.boolean else f"--{flag.name}:")
            text = f"{head} {flag.help}"
            if flag.default_as_str:
                text += f"\n(default: {flag.default_as_str})"
            if flag.parser.syntactic_help:
                text += f"\n({flag.parser.syntactic_help})"
            lines = text.split("\n")
            out.append("  " + lines[0])
            out.extend(textwrap.indent(x.strip(), "    ") for x in lines[1:])
        return out

    def get_help(self, prefix: str = "", include_special_flags: bool = True) -> str:
        """Every flag with its help, grouped by the module that defined it."""
        out = []
        for module in sorted(self.flags_by_module_dict()):
            flags = [f for f in self.flags_by_module_dict()[module]
                     if include_special_flags or module != __name__]
            if flags:
                out.append(f"\n{prefix}{module}:")
                out.extend(prefix + line for line in self._render(flags))
        return "\n".join(out)

    def main_module_help(self) -> str:
        """The help of the flags defined by the main program."""
        main = sys.argv[0] if sys.argv and sys.argv[0] else "__main__"
        flags = self.flags_by_module_dict().get(main, [])
        return "\n".join([f"\n{main}:", *self._render(flags)]) if flags else ""

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
#: the program's flags (``tf.flags.FLAGS``, ``tf.app.flags.FLAGS``)
FLAGS: Any = _FlagValuesWrapper(_FLAGS)


def _unwrap(fv: Any) -> FlagValues:
    return fv.__dict__["__wrapped"] if isinstance(fv, _FlagValuesWrapper) else fv


# =========================================================================================
# DEFINE_*
# =========================================================================================
class FlagHolder:
    """What ``DEFINE_*`` returns: a handle on one flag (``.value`` reads it)."""

    def __init__(self, flag_values: FlagValues, flag: Flag) -> None:
        self._flagvalues, self._name = flag_values, flag.name

    @property
    def name(self) -> str:
        return self._name

    @property
    def value(self) -> Any:
        return getattr(self._flagvalues, self._name)

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
    fv = _unwrap(flag_values)
    fv[flag.name] = flag
    if flag in fv.__dict__["__flags"].values():
        fv.register_flag_by_module(module_name or _calling_module()[0], flag)
    if required:
        mark_flag_as_required(flag.name, fv)
    return FlagHolder(fv, flag)


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


def register_validator(flag_name: str, checker: Callable[[Any], bool],
                       message: str = "Flag validation failed",
                       flag_values: Any = _FLAGS) -> None:
    """Check ``checker(value)`` after each parse and assignment of the flag (False, or
    a raised ValidationError, fails with IllegalFlagValueError)."""
    fv = _unwrap(flag_values)
    fv[flag_name].validators.append(_Validator([flag_name], checker, message, True))


def validator(flag_name: str, message: str = "Flag validation failed",
              flag_values: Any = _FLAGS) -> Callable[[Callable], Callable]:
    """Decorator form of :func:`register_validator`."""
    def decorate(fn: Callable) -> Callable:
        register_validator(flag_name, fn, message, flag_values)
        return fn
    return decorate


def register_multi_flags_validator(flag_names: Sequence[str],
                                   multi_flags_checker: Callable[[dict], bool],
                                   message: str = "Flags validation failed",
                                   flag_values: Any = _FLAGS) -> None:
    """Check ``checker({name: value})`` over several flags."""
    fv = _unwrap(flag_values)
    v = _Validator(list(flag_names), multi_flags_checker, message, False)
    for n in flag_names:
        fv[n].validators.append(v)


def multi_flags_validator(flag_names: Sequence[str], message: str = "Flag validation failed",
                          flag_values: Any = _FLAGS) -> Callable[[Callable], Callable]:
    """Decorator form of :func:`register_multi_flags_validator`."""
    def decorate(fn: Callable) -> Callable:
        register_multi_flags_validator(flag_names, fn, message, flag_values)
        return fn
    return decorate


def mark_flag_as_required(flag_name: str, flag_values: Any = _FLAGS) -> None:
    """Fail the parse unless the flag ends up with a value other than None."""
    fv = _unwrap(flag_values)
    if fv[flag_name].default is not None:
        warnings.warn(f"Flag --{flag_name} has a non-None default value; therefore, "
                      "mark_flag_as_required will pass even if flag is not specified in "
                      "the command line!", stacklevel=2)
    register_validator(flag_name, lambda value: value is not None,
                       f"Flag --{flag_name} must have a value other than None.", fv)


def mark_flags_as_required(flag_names: Sequence[str], flag_values: Any = _FLAGS) -> None:
    for name in flag_names:
        mark_flag_as_required(name, flag_values)


def mark_flags_as_mutual_exclusive(flag_names: Sequence[str], required: bool = False,
                                   flag_values: Any = _FLAGS) -> None:
    """At most one (exactly one if ``required``) of the flags may be other than None."""
    def checker(values: dict) -> bool:
        count = sum(1 for v in values.values() if v is not None)
        if count > 1 or (required and count == 0):
            raise ValidationError(
                f"{'Exactly' if required else 'At most'} one of "
                f"({', '.join(flag_names)}) must have a value other than None.")
        return True
    register_multi_flags_validator(flag_names, checker, flag_values=flag_values)


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
    doc = getattr(sys.modules.get("__main__"), "__doc__", None) or \
        f"\nUSAGE: {sys.argv[0] if sys.argv else ''} [flags]\n"
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


#: published as ``tf.app.*``, ``tf.flags.*`` and ``tf.app.flags.*``
_FLAG_NAMES = [n for n in __all__ if n not in ("run", "API")]
API: dict[str, Any] = {"app.run": run}
for _n in _FLAG_NAMES:
    API[f"flags.{_n}"] = globals()[_n]
    API[f"app.flags.{_n}"] = globals()[_n]
