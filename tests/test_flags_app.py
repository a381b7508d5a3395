"""tf.flags / tf.app.flags (absl.flags' behaviour) and tf.app.run."""
from __future__ import annotations

import pathlib
import sys
from typing import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf

flags = tf.flags


@pytest.fixture
def fv() -> flags.FlagValues:
    return flags.FlagValues()


@pytest.fixture
def global_flags(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """tf.flags.FLAGS, with the flags a test defines removed and the parsed state
    restored afterwards."""
    before = set(flags.FLAGS)
    wrapped = flags.FLAGS.__dict__["__wrapped"]
    parsed = wrapped.is_parsed()
    monkeypatch.setattr(sys, "argv", ["prog"])
    wrapped.unparse_flags()
    yield flags.FLAGS
    for name in set(flags.FLAGS) - before:
        delattr(flags.FLAGS, name)
    wrapped.unparse_flags()
    if parsed:
        wrapped.mark_as_parsed()


def test_namespaces_share_one_module() -> None:
    assert flags.FLAGS is tf.app.flags.FLAGS
    assert tf.app.flags.DEFINE_string is flags.DEFINE_string
    for name in ("FLAGS", "DEFINE_string", "DEFINE_integer", "DEFINE_float",
                 "DEFINE_boolean", "DEFINE_bool", "DEFINE_enum", "DEFINE_list",
                 "DEFINE_multi_string", "DEFINE_multi_integer", "mark_flag_as_required",
                 "FlagValues", "Flag", "register_validator", "UnrecognizedFlagError",
                 "UnparsedFlagAccessError", "IllegalFlagValueError", "DuplicateFlagError",
                 "ValidationError", "Error"):
        assert getattr(tf.app.flags, name) is getattr(flags, name), name
    assert callable(tf.app.run)


def test_parse_forms(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("s", "x", "a string", flag_values=fv)
    flags.DEFINE_integer("n", 3, "an int", flag_values=fv)
    flags.DEFINE_float("f", 0.5, "a float", flag_values=fv)
    flags.DEFINE_boolean("b", False, "a bool", flag_values=fv)
    flags.DEFINE_bool("c", True, "another bool", flag_values=fv)
    flags.DEFINE_enum("e", "a", ["a", "b"], "an enum", flag_values=fv)
    flags.DEFINE_list("l", "p,q", "a list", flag_values=fv)
    flags.DEFINE_multi_string("ms", None, "strings", flag_values=fv)
    flags.DEFINE_multi_integer("mi", [1, 2], "ints", flag_values=fv)
    rest = fv(["prog", "--s=hello", "pos1", "--n", "7", "-f=2.5", "--b", "--noc",
               "--e=b", "--l=x, y,z", "--ms", "u", "--ms=v", "--mi=5", "pos2", "--",
               "--n=9"])
    assert rest == ["prog", "pos1", "pos2", "--n=9"]
    assert (fv.s, fv.n, fv.f, fv.b, fv.c, fv.e) == ("hello", 7, 2.5, True, False, "b")
    assert fv.l == ["x", "y", "z"] and fv.ms == ["u", "v"] and fv.mi == [5]
    assert fv["n"].present == 1 and not fv["n"].using_default_value
    assert fv["s"].default == "x"


def test_defaults_and_values(fv: flags.FlagValues) -> None:
    flags.DEFINE_integer("hex", "0x10", "hex default", flag_values=fv)
    flags.DEFINE_multi_integer("mi", 4, "single default", flag_values=fv)
    flags.DEFINE_string("none", None, "no default", flag_values=fv)
    flags.DEFINE_boolean("b", "true", "bool from a string", flag_values=fv)
    fv(["prog", "--b=F"])
    assert fv.hex == 16 and fv.mi == [4] and fv.none is None and fv.b is False
    assert fv.flag_values_dict() == {"hex": 16, "mi": [4], "none": None, "b": False}
    assert fv.get_flag_value("none", "dflt") == "dflt"


def test_unparsed_access_raises(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("s", "x", "s", flag_values=fv)
    with pytest.raises(flags.UnparsedFlagAccessError,
                       match="Trying to access flag --s before flags were parsed"):
        _ = fv.s
    with pytest.raises(AttributeError):
        _ = fv.undefined_flag
    assert fv["s"].value == "x"  # the Flag object is reachable
    fv(["prog"])
    assert fv.s == "x"
    fv.unparse_flags()
    with pytest.raises(flags.UnparsedFlagAccessError):
        _ = fv.s


def test_unknown_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_integer("batch_size", 1, "b", flag_values=fv)
    with pytest.raises(flags.UnrecognizedFlagError,
                       match=r"Unknown command line flag 'batch_sise'. Did you mean: "
                             r"batch_size \?") as e:
        fv(["prog", "--batch_sise=3"])
    assert e.value.flagname == "batch_sise" and e.value.flagvalue == "--batch_sise=3"
    with pytest.raises(flags.UnrecognizedFlagError, match="'zzz'$"):
        fv(["prog", "--zzz"])
    assert fv(["prog", "--zzz=1", "--batch_size=2"], known_only=True) == ["prog", "--zzz=1"]
    assert fv.batch_size == 2
    assert fv(["prog", "--undefok=zzz,yy", "--zzz=1", "--noyy"]) == ["prog"]
    with pytest.raises(flags.UnrecognizedFlagError):
        fv.nope = 3


def test_illegal_values(fv: flags.FlagValues) -> None:
    flags.DEFINE_integer("n", 1, "n", lower_bound=0, upper_bound=10, flag_values=fv)
    flags.DEFINE_boolean("b", False, "b", flag_values=fv)
    flags.DEFINE_enum("e", "a", ["a", "b"], "e", flag_values=fv)
    flags.DEFINE_float("f", 1.0, "f", flag_values=fv)
    cases = {"--n=abc": "flag --n=abc: invalid literal for int",
             "--n=11": r"flag --n=11: 11 is not an integer in the range \[0, 10\]",
             "--b=maybe": "flag --b=maybe: .*Non-boolean argument to boolean flag",
             "--e=c": r"flag --e=c: value should be one of <a\|b>",
             "--f=x": "flag --f=x: could not convert string to float"}
    for arg, msg in cases.items():
        with pytest.raises(flags.IllegalFlagValueError, match=msg):
            fv(["prog", arg])
    with pytest.raises(ValueError, match="--nob=1 does not take an argument"):
        fv(["prog", "--nob=1"])
    with pytest.raises(flags.Error, match="Missing value for flag --n"):
        fv(["prog", "--n"])
    with pytest.raises(flags.IllegalFlagValueError, match="flag --x=1.5"):
        flags.DEFINE_integer("x", 1.5, "bad default", flag_values=fv)
    with pytest.raises(flags.IllegalFlagValueError, match="flag value must be a string"):
        flags.DEFINE_string("y", 5, "bad default", flag_values=fv)
    with pytest.raises(TypeError, match="not bytes or string"):
        fv("prog --n=1")
    with pytest.raises(ValueError, match="argv cannot be an empty list"):
        fv([])


def test_assignment_runs_validators(fv: flags.FlagValues) -> None:
    flags.DEFINE_integer("n", 1, "n", lower_bound=0, flag_values=fv)
    fv(["prog"])
    fv.n = 5
    assert fv.n == 5 and not fv["n"].using_default_value
    with pytest.raises(flags.IllegalFlagValueError,
                       match="flag --n=-2: -2 is not a non-negative integer"):
        fv.n = -2
    assert fv.n == 5  # rolled back


def test_validators_and_required(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("out", None, "output", flag_values=fv)
    flags.DEFINE_integer("k", 2, "k", flag_values=fv)
    flags.mark_flag_as_required("out", flag_values=fv)
    flags.register_validator("k", lambda v: v % 2 == 0, message="k must be even",
                             flag_values=fv)
    with pytest.raises(flags.IllegalFlagValueError,
                       match="flag --out=None: Flag --out must have a value other than "
                             "None."):
        fv(["prog"])
    with pytest.raises(flags.IllegalFlagValueError, match="flag --k=3: k must be even"):
        fv(["prog", "--out=o", "--k=3"])
    fv(["prog", "--out=o", "--k=4"])
    assert (fv.out, fv.k) == ("o", 4)

    @flags.validator("k", flag_values=fv)
    def small(v: int) -> bool:
        if v > 100:
            raise flags.ValidationError("k too big")
        return True

    with pytest.raises(flags.IllegalFlagValueError, match="flag --k=200: k too big"):
        fv.k = 200
    with pytest.warns(UserWarning, match="non-None default"):
        flags.mark_flag_as_required("k", flag_values=fv)


def test_multi_flag_validators(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("a", None, "a", flag_values=fv)
    flags.DEFINE_string("b", None, "b", flag_values=fv)
    flags.mark_flags_as_mutual_exclusive(["a", "b"], flag_values=fv)
    fv(["prog", "--a=1"])
    with pytest.raises(flags.IllegalFlagValueError, match="flags a=1, b=2: At most one"):
        fv(["prog", "--a=1", "--b=2"])


def test_duplicates_and_method_names(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("s", "x", "first help", flag_values=fv)
    with pytest.raises(flags.DuplicateFlagError,
                       match="The flag 's' is defined twice.*first help"):
        flags.DEFINE_string("s", "y", "again", flag_values=fv)
    flags.DEFINE_string("s", "z", "override", flag_values=fv, allow_override=True)
    fv(["prog"])
    assert fv.s == "z"
    with pytest.raises(flags.FlagNameConflictsWithMethodError):
        flags.DEFINE_string("is_parsed", "x", "h", flag_values=fv)


def test_short_names_and_delete(fv: flags.FlagValues) -> None:
    flags.DEFINE_integer("verbose", 0, "v", short_name="v", flag_values=fv)
    fv(["prog", "-v", "3"])
    assert fv.verbose == 3 and fv.v == 3
    assert "v" in fv and "verbose" in fv
    del fv.verbose
    assert "verbose" not in fv and fv.v == 3


def test_flagfile(fv: flags.FlagValues, tmp_path: pathlib.Path) -> None:
    flags.DEFINE_string("s", "x", "s", flag_values=fv)
    flags.DEFINE_integer("n", 0, "n", flag_values=fv)
    inner = tmp_path / "inner.cfg"
    inner.write_text("--n=4\n")
    outer = tmp_path / "outer.cfg"
    outer.write_text(f"# a comment\n// another\n\n--s=from_file\n--flagfile={inner}\n")
    assert fv(["prog", f"--flagfile={outer}", "arg"]) == ["prog", "arg"]
    assert (fv.s, fv.n) == ("from_file", 4)
    fv(["prog", "--flagfile", str(outer), "--n=9"])  # later flags win
    assert fv.n == 9
    with pytest.raises(flags.CantOpenFlagFileError, match="Unable to open flagfile"):
        fv(["prog", f"--flagfile={tmp_path / 'missing'}"])
    out = tmp_path / "saved.cfg"
    fv.append_flags_into_file(str(out))
    assert "--s=from_file\n" in out.read_text() and "--n=9\n" in out.read_text()


def test_old_keyword_names_and_holder(fv: flags.FlagValues) -> None:
    holder = flags.DEFINE_string(flag_name="s", default_value="d", docstring="h",
                                 flag_values=fv)
    assert holder.name == "s" and holder.default == "d"
    with pytest.raises(flags.UnparsedFlagAccessError):
        _ = holder.value
    fv(["prog", "--s=v"])
    assert holder.value == "v" and holder.present and holder.serialize() == "--s=v"


def test_help_text(fv: flags.FlagValues) -> None:
    flags.DEFINE_integer("n", 3, "how many", lower_bound=1, flag_values=fv)
    flags.DEFINE_boolean("b", False, "switch", flag_values=fv)
    text = fv.get_help()
    assert "--n: how many" in text and "(default: '3')" in text
    assert "(a positive integer)" in text and "--[no]b: switch" in text
    assert fv["b"].serialize() == "--nob"


def test_tf_flags_parse_sys_argv_on_first_read(global_flags: object,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """tf.flags.FLAGS (TF's wrapper of absl's FLAGS) parses sys.argv on first read."""
    flags.DEFINE_string("p_shell_name", "dflt", "a name")
    monkeypatch.setattr(sys, "argv", ["prog", "--p_shell_name=argv"])
    assert flags.FLAGS.p_shell_name == "argv"
    assert flags.FLAGS.is_parsed()
    flags.FLAGS.p_shell_name = "set"
    assert flags.FLAGS.p_shell_name == "set" and flags.FLAGS["p_shell_name"].value == "set"


def test_tf_flags_implicit_parse_rejects_unknown(global_flags: object,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    flags.DEFINE_string("p_shell_other", "dflt", "x")
    monkeypatch.setattr(sys, "argv", ["prog", "--p_shell_unknown=1"])
    with pytest.raises(flags.UnrecognizedFlagError, match="p_shell_unknown"):
        _ = flags.FLAGS.p_shell_other


def test_app_run(global_flags: object) -> None:
    flags.DEFINE_integer("p_shell_steps", 1, "steps")
    seen = []

    def main(argv: list[str]) -> int:
        seen.append((list(argv), flags.FLAGS.p_shell_steps))
        return 3

    with pytest.raises(SystemExit) as e:
        tf.app.run(main, argv=["prog", "--p_shell_steps=5", "pos", "--unknown=1"])
    assert e.value.code == 3
    # unknown flags are left for main, as TF's run parses with known_only=True
    assert seen == [(["prog", "pos", "--unknown=1"], 5)]


def test_app_run_defaults_to_sys_argv_and_main(global_flags: object,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    flags.DEFINE_string("p_shell_mode", "a", "mode")
    got = []
    fake_main = type(sys)("__main__")
    fake_main.main = lambda argv: got.append((argv, flags.FLAGS.p_shell_mode))
    monkeypatch.setitem(sys.modules, "__main__", fake_main)
    monkeypatch.setattr(sys, "argv", ["script.py", "--p_shell_mode=b"])
    with pytest.raises(SystemExit) as e:
        tf.app.run()
    assert e.value.code is None and got == [(["script.py"], "b")]


def test_app_run_errors_propagate(global_flags: object) -> None:
    flags.DEFINE_integer("p_shell_req", None, "required")
    flags.mark_flag_as_required("p_shell_req")
    with pytest.raises(flags.IllegalFlagValueError, match="Flag --p_shell_req must have"):
        tf.app.run(lambda argv: 0, argv=["prog"])
    with pytest.raises(flags.IllegalFlagValueError, match="flag --p_shell_req=x"):
        tf.app.run(lambda argv: 0, argv=["prog", "--p_shell_req=x"])


def test_app_run_help(global_flags: object, capsys: pytest.CaptureFixture[str]) -> None:
    flags.DEFINE_integer("p_shell_h", 7, "documented flag")
    with pytest.raises(SystemExit) as e:
        tf.app.run(lambda argv: 0, argv=["prog", "--helpfull"])
    assert e.value.code == 1
    out = capsys.readouterr().out
    assert "--p_shell_h: documented flag" in out and "(default: '7')" in out


@settings(max_examples=40, deadline=None)
@given(n=st.integers(-10**12, 10**12), s=st.text(st.characters(blacklist_characters="\x00"),
                                                  max_size=20),
       words=st.lists(st.text("abcxyz", min_size=1, max_size=5), max_size=4))
def test_values_round_trip_through_argv(n: int, s: str, words: list[str]) -> None:
    fv = flags.FlagValues()
    flags.DEFINE_integer("n", 0, "n", flag_values=fv)
    flags.DEFINE_string("s", "", "s", flag_values=fv)
    flags.DEFINE_list("l", [], "l", flag_values=fv)
    flags.DEFINE_multi_string("m", [], "m", flag_values=fv)
    argv = ["prog", f"--n={n}", f"--s={s}", f"--l={','.join(words)}"]
    argv += [f"--m={w}" for w in words]
    assert fv(argv) == ["prog"]
    assert (fv.n, fv.s, fv.l, fv.m) == (n, s, words, words)
    # serialize gives back a command line that parses to the same values
    fv2 = flags.FlagValues()
    flags.DEFINE_integer("n", 0, "n", flag_values=fv2)
    flags.DEFINE_list("l", [], "l", flag_values=fv2)
    fv2(["prog", fv["n"].serialize(), fv["l"].serialize() or "--l="])
    assert fv2.n == n and fv2.l == words
