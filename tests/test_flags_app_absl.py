"""The rest of absl.flags in tf.flags: enum-class flags, aliases, key flags and the help
text that lists them, set_default / override_value, FlagHolder checks, the help-text
helpers (text_wrap, doc_to_help, get_help_width, flag_dict_to_args) and
tf.flags.tf_decorator. Expected strings are absl-py 2.x's output for the same calls."""
from __future__ import annotations

import enum
import inspect
import sys
import types
from typing import Any, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf

flags = tf.flags

NEW_NAMES = ("BaseListParser", "DEFINE_alias", "DEFINE_enum_class", "DEFINE_multi_enum_class",
             "EnumClassFlag", "EnumClassListSerializer", "EnumClassParser",
             "EnumClassSerializer", "MultiEnumClassFlag", "adopt_module_key_flags",
             "declare_key_flag", "disclaim_key_flags", "doc_to_help", "flag_dict_to_args",
             "get_help_width", "mark_bool_flags_as_mutual_exclusive", "override_value",
             "set_default", "text_wrap", "tf_decorator")


class Fruit(enum.Enum):
    APPLE = 1
    Banana = 2
    cherry = 3


@pytest.fixture
def fv() -> flags.FlagValues:
    return flags.FlagValues()


@pytest.fixture
def cols80(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")


@pytest.fixture
def global_flags(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """tf.flags.FLAGS with this module as the main program (so ``--helpshort`` lists
    its key flags); flags defined by a test are removed afterwards."""
    before = set(flags.FLAGS)
    wrapped = flags.FLAGS.__dict__["__wrapped"]
    parsed = wrapped.is_parsed()
    monkeypatch.setattr(sys, "argv", [__name__])
    monkeypatch.setenv("COLUMNS", "80")
    wrapped.unparse_flags()
    yield flags.FLAGS
    for name in set(flags.FLAGS) - before:
        delattr(flags.FLAGS, name)
    wrapped.key_flags_by_module_dict().pop(__name__, None)
    wrapped.unparse_flags()
    if parsed:
        wrapped.mark_as_parsed()


def test_every_name_is_published_in_both_namespaces() -> None:
    for name in NEW_NAMES:
        assert getattr(tf.flags, name) is getattr(tf.app.flags, name), name
    assert isinstance(flags.tf_decorator, types.ModuleType)
    assert callable(flags.tf_decorator.make_decorator)
    assert callable(flags.tf_decorator.unwrap)


# -- enum classes -------------------------------------------------------------------------
def test_enum_class_flags_parse_member_names(fv: flags.FlagValues) -> None:
    fruit = flags.DEFINE_enum_class("fruit", Fruit.APPLE, Fruit, "a fruit", flag_values=fv)
    flags.DEFINE_enum_class("cs", "cherry", Fruit, "case", case_sensitive=True,
                            flag_values=fv)
    flags.DEFINE_multi_enum_class("mf", ["APPLE", Fruit.Banana], Fruit, "fruits",
                                  flag_values=fv)
    fv(["p", "--fruit=BANANA", "--cs=Banana", "--mf=cherry", "--mf", "apple"])
    assert fv.fruit is Fruit.Banana and fruit.value is Fruit.Banana
    assert fv.cs is Fruit.Banana and fv.mf == [Fruit.cherry, Fruit.APPLE]
    assert fv["mf"].default == [Fruit.APPLE, Fruit.Banana] and fv["mf"].present == 2
    assert fv["fruit"].serialize() == "--fruit=banana"
    assert fv["cs"].serialize() == "--cs=Banana"
    assert fv["mf"].serialize() == "--mf=cherry\n--mf=apple"
    assert fv["mf"].default_as_str == "'apple,banana'"
    assert fv["fruit"].help == "<apple|banana|cherry>: a fruit"
    assert fv["cs"].help == "<APPLE|Banana|cherry>: case"
    assert fv["mf"].help == ("<apple|banana|cherry>: fruits;\n"
                             "    repeat this option to specify a list of values")
    assert (fv["fruit"].flag_type(), fv["mf"].flag_type()) == ("enum class",
                                                              "multi enum class")
    assert isinstance(fv["fruit"], flags.EnumClassFlag)
    assert isinstance(fv["mf"], flags.MultiEnumClassFlag)


def test_enum_class_errors(fv: flags.FlagValues) -> None:
    flags.DEFINE_enum_class("fruit", None, Fruit, "a fruit", flag_values=fv)
    flags.DEFINE_enum_class("cs", None, Fruit, "case", case_sensitive=True,
                            flag_values=fv)
    with pytest.raises(flags.IllegalFlagValueError,
                       match=r"^flag --fruit=grape: value should be one of "
                             r"<apple\|banana\|cherry>$"):
        fv(["p", "--fruit=grape"])
    with pytest.raises(flags.IllegalFlagValueError,
                       match=r"flag --cs=banana: value should be one of "
                             r"<APPLE\|Banana\|cherry>"):
        fv(["p", "--cs=banana"])
    with pytest.raises(flags.IllegalFlagValueError, match="flag --other=3: 3 is not an enum member"):
        flags.DEFINE_enum_class("other", 3, Fruit, "h", flag_values=fv)

    class Empty(enum.Enum):
        pass

    class Twins(enum.Enum):
        a = 1
        A = 2

    with pytest.raises(ValueError, match="enum_class cannot be empty"):
        flags.EnumClassParser(Empty)
    with pytest.raises(ValueError, match="Duplicate enum values for {'a'}"):
        flags.EnumClassParser(Twins, case_sensitive=False)
    with pytest.raises(TypeError, match="is not a subclass of Enum"):
        flags.EnumClassParser(int)
    assert flags.EnumClassParser(Twins, case_sensitive=True).parse("A") is Twins.A


def test_enum_class_serializers() -> None:
    assert flags.EnumClassSerializer(lowercase=True).serialize(Fruit.Banana) == "banana"
    assert flags.EnumClassSerializer(lowercase=False).serialize(Fruit.Banana) == "Banana"
    ser = flags.EnumClassListSerializer(";", lowercase=True)
    assert ser.serialize([Fruit.APPLE, Fruit.cherry]) == "apple;cherry"
    assert ser.serialize(Fruit.APPLE) == "apple"
    assert flags.EnumClassParser(Fruit, case_sensitive=False).member_names == (
        "apple", "banana", "cherry")


def test_base_list_parser() -> None:
    p = flags.BaseListParser(";", "semicolon")
    assert p.parse("a; b ;c") == ["a", "b", "c"] and p.parse("") == []
    assert p.syntactic_help == "a semicolon separated list"
    assert p.flag_type() == "semicolon separated list of strings"
    assert flags.BaseListParser(None, "space").parse(" a  b ") == ["a", "b"]
    with pytest.raises(ValueError):
        flags.BaseListParser(",")


# -- aliases ------------------------------------------------------------------------------
def test_alias_parses_and_reads_the_original(fv: flags.FlagValues) -> None:
    flags.DEFINE_integer("num", 3, "a number", flag_values=fv)
    flags.DEFINE_boolean("verbose", False, "talk", flag_values=fv)
    flags.DEFINE_multi_string("tag", ["x"], "tags", flag_values=fv)
    n = flags.DEFINE_alias("n", "num", flag_values=fv)
    flags.DEFINE_alias("v", "verbose", flag_values=fv)
    flags.DEFINE_alias("t", "tag", flag_values=fv)
    assert fv(["p", "--n=7", "--v", "--t=a", "--tag=b", "rest"]) == ["p", "rest"]
    assert (fv.num, fv.n, n.value, fv.verbose, fv.v) == (7, 7, 7, True, True)
    assert fv.tag == fv.t == ["a", "b"]
    assert (fv["n"].present, fv["num"].present, fv["t"].present) == (1, 1, 1)
    assert fv["n"].help == "Alias for --num." and fv["v"].boolean
    assert fv["n"].default_as_str == "'3'" and fv["n"].serialize() == "--n=7"
    fv.n = 11
    assert fv.num == 11
    fv(["p", "--nov"])
    assert fv.verbose is False
    with pytest.raises(flags.UnrecognizedFlagError, match="Unknown command line flag 'nope'"):
        flags.DEFINE_alias("q", "nope", flag_values=fv)
    with pytest.raises(flags.DuplicateFlagError, match="The flag 'n' is defined twice"):
        flags.DEFINE_alias("n", "verbose", flag_values=fv)


# -- key flags and help -------------------------------------------------------------------
def _help_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_enum_class("fruit", Fruit.APPLE, Fruit, "a fruit", flag_values=fv)
    flags.DEFINE_multi_enum_class("mf", ["APPLE", Fruit.Banana], Fruit, "fruits",
                                  flag_values=fv)
    flags.DEFINE_integer("num", 3, "how many things to take along on the long trip to "
                         "the sea shore", lower_bound=0, flag_values=fv, short_name="n")
    flags.DEFINE_alias("count", "num", flag_values=fv)
    flags.DEFINE_boolean("other", True, "in another module", flag_values=fv,
                         module_name="x_other")


MODULE_FLAGS = (
    "  --count: Alias for --num.\n    (default: '3')\n    (a non-negative integer)\n"
    "  --fruit: <apple|banana|cherry>: a fruit\n    (default: 'apple')\n"
    "  --mf: <apple|banana|cherry>: fruits;\n"
    "    repeat this option to specify a list of values\n    (default: 'apple,banana')\n"
    "  -n,--num: how many things to take along on the long trip to the sea shore\n"
    "    (default: '3')\n    (a non-negative integer)")
UNDEFOK = (
    "  --undefok: comma-separated list of flag names that it is okay to specify on\n"
    "    the command line even if the program does not define a flag with that name.\n"
    "    IMPORTANT: flags in this list that have arguments MUST use the --flag=value\n"
    "    format.\n    (default: '')")


def test_key_flags_and_module_help(fv: flags.FlagValues, cols80: None) -> None:
    _help_flags(fv)
    assert fv.module_help(__name__) == f"\n{__name__}:\n{MODULE_FLAGS}"
    assert fv.module_help("x_other") == "\nx_other:\n  --[no]other: in another module\n" \
        "    (default: 'true')"
    flags.declare_key_flag("other", flag_values=fv)
    flags.declare_key_flag("undefok", flag_values=fv)
    flags.declare_key_flag("other", flag_values=fv)  # twice: listed once
    assert fv.module_help(__name__) == (
        f"\n{__name__}:\n{MODULE_FLAGS}\n"
        "  --[no]other: in another module\n    (default: 'true')\n" + UNDEFOK)
    assert [f.name for f in fv.get_key_flags_for_module(sys.modules[__name__])] == [
        "fruit", "mf", "num", "count", "other", "undefok"]
    assert [f.name for f in fv.get_flags_for_module("x_other")] == ["other"]
    with pytest.raises(ValueError, match="Flag --nope is undefined"):
        flags.declare_key_flag("nope", flag_values=fv)
    del fv.other
    assert "other" not in fv.module_help(__name__)


def test_get_help_lists_modules_then_special_flags(fv: flags.FlagValues, cols80: None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _help_flags(fv)
    flags.DEFINE_string("z_main", "m", "the main program's", flag_values=fv,
                        module_name="zz_main")
    monkeypatch.setattr(sys, "argv", ["zz_main"])
    assert fv.get_help() == (
        "\nzz_main:\n  --z_main: the main program's\n    (default: 'm')\n"
        f"\n{__name__}:\n{MODULE_FLAGS}\n"
        "\nx_other:\n  --[no]other: in another module\n    (default: 'true')\n"
        "\nabsl.flags:\n  --flagfile: Insert flag definitions from the given file into "
        "the command line.\n    (default: '')\n" + UNDEFOK)
    short = fv.get_help(prefix="# ", include_special_flags=False)
    assert short.startswith("\n# zz_main:\n#   --z_main: the main program's\n#     (def")
    assert "absl.flags" not in short and str(fv) == fv.get_help()
    assert fv.main_module_help() == "\nzz_main:\n  --z_main: the main program's\n" \
        "    (default: 'm')"
    monkeypatch.setenv("COLUMNS", "40")
    assert fv.module_help("x_other") == "\nx_other:\n  --[no]other: in another module\n" \
        "    (default: 'true')"
    assert "  -n,--num: how many things to take\n    along on the long trip to the sea\n" \
        "    shore\n" in fv.get_help()
    empty = flags.FlagValues()
    assert empty.get_help().startswith("--flagfile: Insert flag definitions")


def test_adopt_module_key_flags(fv: flags.FlagValues) -> None:
    other = types.ModuleType("x_lib")
    flags.DEFINE_string("lib_a", "a", "from the library", flag_values=fv,
                        module_name="x_lib")
    flags.DEFINE_string("lib_b", "b", "also", flag_values=fv, module_name="x_lib")
    flags.adopt_module_key_flags(other, flag_values=fv)
    assert [f.name for f in fv.get_key_flags_for_module(__name__)] == ["lib_a", "lib_b"]
    with pytest.raises(flags.Error, match="Expected a module object, not 'x_lib'"):
        flags.adopt_module_key_flags("x_lib", flag_values=fv)
    shell = sys.modules[type(flags.FLAGS).__module__]
    flags.adopt_module_key_flags(shell, flag_values=fv)
    assert [f.name for f in fv.get_key_flags_for_module(__name__)][-2:] == [
        "flagfile", "undefok"]


def test_disclaim_key_flags(fv: flags.FlagValues, monkeypatch: pytest.MonkeyPatch) -> None:
    src = ("import flowrt as tf\n{disclaim}\n"
           "def define(fv, name):\n"
           "    return tf.flags.DEFINE_integer(name, 1, 'h', flag_values=fv)\n")
    wrapper = types.ModuleType("x_wrapper")
    plain = types.ModuleType("x_plain")
    for mod in (wrapper, plain):
        monkeypatch.setitem(sys.modules, mod.__name__, mod)
    exec(src.format(disclaim="tf.flags.disclaim_key_flags()"), wrapper.__dict__)
    exec(src.format(disclaim=""), plain.__dict__)
    wrapper.define(fv, "w")
    plain.define(fv, "p")
    by_module = {m: [f.name for f in fl] for m, fl in fv.flags_by_module_dict().items()}
    assert by_module == {__name__: ["w"], "x_plain": ["p"]}
    # a module that is not in sys.modules is skipped too (absl's rule)
    unlisted = types.ModuleType("x_unlisted")
    exec(src.format(disclaim=""), unlisted.__dict__)
    unlisted.define(fv, "u")
    assert [f.name for f in fv.get_flags_for_module(__name__)] == ["w", "u"]


def test_helpshort_lists_the_main_modules_key_flags(
        global_flags: object, capsys: pytest.CaptureFixture[str]) -> None:
    flags.DEFINE_integer("x_steps", 2, "steps")
    flags.DEFINE_string("x_lib_flag", "v", "a library's", module_name="x_lib2")
    flags.declare_key_flag("x_lib_flag")
    for argv in (["p", "--helpshort"], ["p", "-?"]):
        with pytest.raises(SystemExit) as e:
            tf.app.run(lambda a: 0, argv=argv)
        assert e.value.code == 1
        out = capsys.readouterr().out
        assert f"\nflags:\n\n{__name__}:\n  --x_lib_flag: a library's\n" in out
        assert "  --x_steps: steps\n    (default: '2')\n" in out
        assert out.endswith("\n\nTry --helpfull to get a list of all flags.\n")
    with pytest.raises(SystemExit):
        tf.app.run(lambda a: 0, argv=["p", "--helpfull"])
    out = capsys.readouterr().out
    assert "\nx_lib2:\n  --x_lib_flag: a library's" in out and "\nabsl.flags:\n" in out


# -- set_default / override_value / FlagHolder --------------------------------------------
def test_set_default_and_override_value(fv: flags.FlagValues) -> None:
    n = flags.DEFINE_integer("n", 1, "n", upper_bound=10, flag_values=fv)
    s = flags.DEFINE_string("s", "a", "s", flag_values=fv)
    e = flags.DEFINE_enum_class("e", "apple", Fruit, "e", flag_values=fv)
    fv(["p", "--s=cmd"])
    flags.set_default(n, 5)
    flags.set_default(s, "new")  # given on the command line: the value stays
    assert (fv.n, fv.s, n.default, s.default) == (5, "cmd", 5, "new")
    assert fv["n"].default_as_str == "'5'"
    with pytest.raises(flags.IllegalFlagValueError, match="flag --n=11: 11 is not integer <= 10"):
        flags.set_default(n, 11)
    flags.override_value(n, 7)
    flags.override_value(e, Fruit.cherry)
    assert (fv.n, fv.e, fv["n"].using_default_value) == (7, Fruit.cherry, False)
    flags.set_default(n, 3)
    assert fv.n == 7  # overridden: no longer the default
    with pytest.raises(flags.IllegalFlagValueError,
                       match=r"^flag n: parsed value 8 not equal to original '8'$"):
        flags.override_value(n, "8")
    with pytest.raises(flags.IllegalFlagValueError, match=r"flag --n=12: 12 is not integer"):
        flags.override_value(n, 12)
    with pytest.raises(flags.IllegalFlagValueError,
                       match="flag e: parsed value <Fruit.Banana: 2> not equal"):
        flags.override_value(e, "Banana")
    assert fv.n == 7


def test_flag_holder_checks(fv: flags.FlagValues) -> None:
    h = flags.DEFINE_string("a", "x", "a", flag_values=fv)
    o = flags.DEFINE_string("o", None, "o", flag_values=fv)
    with pytest.raises(TypeError, match="unsupported operand type.*FlagHolder.value"):
        _ = h == h
    with pytest.raises(TypeError, match=r"bool\(\) not supported"):
        bool(h)
    with pytest.raises(ValueError, match="Required flag --r needs to have None as default"):
        flags.DEFINE_string("r", "d", "r", flag_values=fv, required=True)
    fv(["p"])
    assert o.value is None
    fv.a = None
    with pytest.raises(flags.IllegalFlagValueError, match="Unexpected None value for flag a"):
        _ = h.value
    flags.mark_flag_as_required(o)
    with pytest.raises(flags.IllegalFlagValueError, match="Flag --o must have a value"):
        fv(["p"])
    with pytest.raises(ValueError, match="flag_values must not be customized"):
        flags.register_validator(o, lambda v: True, flag_values=flags.FlagValues())


def test_bool_mutual_exclusion(fv: flags.FlagValues) -> None:
    a = flags.DEFINE_boolean("a", False, "a", flag_values=fv)
    flags.DEFINE_boolean("b", False, "b", flag_values=fv)
    flags.DEFINE_string("s", None, "s", flag_values=fv)
    with pytest.raises(flags.ValidationError,
                       match="Flag --s is not Boolean, which is required for flags used in "
                             "mark_bool_flags_as_mutual_exclusive."):
        flags.mark_bool_flags_as_mutual_exclusive(["a", "s"], flag_values=fv)
    flags.mark_bool_flags_as_mutual_exclusive([a, "b"], required=True, flag_values=fv)
    fv(["p", "--a"])
    with pytest.raises(flags.IllegalFlagValueError,
                       match=r"^flags a=True, b=True: Exactly one of \(a, b\) must be True\.$"):
        fv(["p", "--a", "--b"])
    fv.unparse_flags()
    with pytest.raises(flags.IllegalFlagValueError, match="flags a=False, b=False: Exactly"):
        fv(["p", "--noa"])
    with pytest.raises(ValueError, match="flag_refs argument must not be empty"):
        flags.mark_bool_flags_as_mutual_exclusive([])
    other = flags.FlagValues()
    flags.DEFINE_boolean("c", False, "c", flag_values=other)
    with pytest.raises(ValueError, match="multiple FlagValues instances"):
        flags.mark_bool_flags_as_mutual_exclusive([a, "c"], flag_values=other)
    with pytest.warns(UserWarning, match="non-None default value. That does not make sense"):
        flags.mark_flags_as_mutual_exclusive(["a", "s"], flag_values=fv)


# -- help-text helpers --------------------------------------------------------------------
def test_text_wrap() -> None:
    assert flags.text_wrap("alpha beta gamma delta epsilon zeta eta theta", 20,
                           indent="  ", firstline_indent="> ") == \
        "> alpha beta gamma\n  delta epsilon zeta\n  eta theta"
    assert flags.text_wrap("one\n\n  two\tthree  \n \nfour", 40, indent="..") == \
        "..one\n\n..two   three\n\n..four"
    assert flags.text_wrap("a\tb", 40) == "a   b"
    with pytest.raises(ValueError, match="Length of indent exceeds length"):
        flags.text_wrap("x", 4, "    ")
    with pytest.raises(ValueError, match="Length of first line indent exceeds length"):
        flags.text_wrap("x", 4, "", "     ")


def test_get_help_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "57")
    assert flags.get_help_width() == 57
    assert max(len(x) for x in flags.text_wrap("word " * 40).splitlines()) <= 57


def test_doc_to_help() -> None:
    assert flags.doc_to_help("""Line one
    continues.

    Para two.
      indented
    """) == "Line one continues.\n\nPara two.\n  indented"
    assert flags.doc_to_help("") == ""
    assert flags.doc_to_help("x\n   \ny") == "x\n\ny"


def test_flag_dict_to_args() -> None:
    args = flags.flag_dict_to_args(
        {"a": None, "b": True, "c": False, "d": "str", "e": [1, 2], "g": 3, "i": b"by",
         "j": [], "k": ["p", "q"], "l": 7}, multi_flags={"k", "l"})
    assert inspect.isgenerator(args)
    assert list(args) == ["--a", "--b", "--noc", "--d=str", "--e=1,2", "--g=3",
                          "--i=b'by'", "--j=", "--k=p", "--k=q", "--l=7"]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(-1000, 1000), b=st.booleans(),
       words=st.lists(st.text("abcxyz", min_size=1, max_size=4), min_size=1, max_size=3),
       fruits=st.lists(st.sampled_from(list(Fruit)), min_size=1, max_size=3))
def test_flag_dict_to_args_round_trips(n: int, b: bool, words: list[str],
                                       fruits: list[Fruit]) -> None:
    fv = flags.FlagValues()
    flags.DEFINE_integer("n", 0, "n", flag_values=fv)
    flags.DEFINE_boolean("b", not b, "b", flag_values=fv)
    flags.DEFINE_list("l", [], "l", flag_values=fv)
    flags.DEFINE_multi_string("m", [], "m", flag_values=fv)
    flags.DEFINE_multi_enum_class("f", None, Fruit, "f", flag_values=fv)
    argv = list(flags.flag_dict_to_args(
        {"n": n, "b": b, "l": words, "m": words, "f": [x.name for x in fruits]},
        multi_flags={"m", "f"}))
    assert fv(["p", *argv]) == ["p"]
    assert (fv.n, fv.b, fv.l, fv.m, fv.f) == (n, b, words, words, fruits)
    # and each flag's serialize() parses back to the same value
    again = fv["f"].serialize().split("\n") + [fv["n"].serialize(), fv["b"].serialize()]
    fv.unparse_flags()
    fv(["p", *again])
    assert (fv.n, fv.b, fv.f) == (n, b, fruits)


@settings(max_examples=40, deadline=None)
@given(text=st.text(st.sampled_from("ab cd\n\t"), max_size=80),
       length=st.integers(8, 40), indent=st.sampled_from(["", " ", "    "]))
def test_text_wrap_keeps_words_within_the_width(text: str, length: int, indent: str) -> None:
    out = flags.text_wrap(text, length, indent=indent)
    assert "".join(out.split()) == "".join(text.split())  # long words are broken
    assert all(len(line) <= length for line in out.splitlines())


# -- tf_decorator -------------------------------------------------------------------------
def test_tf_decorator_make_and_unwrap() -> None:
    td = flags.tf_decorator

    def target(a: int, b: int = 2, *args: Any, c: int = 3, **kw: Any) -> int:
        """Adds."""
        return a + b + c

    target.extra = "attr"

    def wrapper(*args: Any, **kwargs: Any) -> int:
        return 10 * target(*args, **kwargs)

    dec = td.make_decorator(target, wrapper)
    assert dec is wrapper and dec.__name__ == "target" and dec.__doc__ == "Adds."
    assert dec.extra == "attr" and dec.__wrapped__ is target and dec(1) == 60
    assert str(inspect.signature(dec)) == str(inspect.signature(target))
    assert dec._tf_decorator.decorator_name == "test_tf_decorator_make_and_unwrap"
    decorators, inner = td.unwrap(dec)
    assert inner is target and [d.decorated_target for d in decorators] == [target]

    def outer(*args: Any, **kwargs: Any) -> int:
        return dec(*args, **kwargs) + 1

    two = td.make_decorator(dec, outer, "outer_dec", "outer doc")
    decorators, inner = td.unwrap(two)
    assert [d.decorator_name for d in decorators] == ["outer_dec",
                                                      "test_tf_decorator_make_and_unwrap"]
    assert inner is target and two.__doc__ == "outer doc" and two(1, 1, c=0) == 21
    assert td.unwrap(len) == ([], len)
    spec = inspect.getfullargspec(lambda x, y=1, *, z=2: 0)
    d3 = td.make_decorator(target, lambda *a: 0, decorator_argspec=spec)
    assert str(d3.__signature__) == "(x, y=1, *, z=2)"

    class K:
        def m(self, x: int) -> int:
            return x

    k = K()
    bm = td.make_decorator(k.m, lambda *a: k.m(*a))
    assert str(bm.__signature__) == "(x: 'int') -> 'int'" and not hasattr(bm, "__self__")
