"""``tf.make_template``: a function whose variables are created once and shared.

The first call of a :class:`Template` opens a variable scope named after the template
(made unique: ``name``, ``name_1`` ...) and lets the wrapped function create its
variables with ``tf.get_variable``; later calls re-enter that scope with ``reuse=True``,
so they share the variables, and creating a new trainable variable there is an error,
as in TF 1.15.
"""
from __future__ import annotations

import functools
import traceback
from typing import Any, Callable

from ..framework.graph import GraphKeys, get_collection
from .variable_scope import (VariableScope, _get_unique_variable_scope, _pure_variable_scope,
                             variable_scope)

__all__ = ["Template", "make_template"]


def make_template(name_: str, func_: Callable[..., Any], create_scope_now_: bool = False,
                  unique_name_: str | None = None, custom_getter_: Callable | None = None,
                  **kwargs: Any) -> "Template":
    """Wrap ``func_`` so that every call shares the variables of the first one
    (``tf.make_template``).

    :param name_: the variable scope's name (made unique unless ``unique_name_``)
    :param create_scope_now_: open the scope now rather than at the first call
    :param unique_name_: use exactly this scope name
    :param custom_getter_: a custom getter for the scope
    :param kwargs: bound to ``func_`` at every call
    :raises ValueError: if ``name_`` is None
    """
    if kwargs:
        func_ = functools.update_wrapper(functools.partial(func_, **kwargs), func_)
    return Template(name_, func_, create_scope_now=create_scope_now_,
                    unique_name=unique_name_, custom_getter=custom_getter_)


def _skip_common_stack_elements(stacktrace: list[str], base: list[str]) -> list[str]:
    for i, (trace, b) in enumerate(zip(stacktrace, base)):
        if trace != b:
            return stacktrace[i:]
    return stacktrace[-1:]


class Template:
    """A function wrapped by :func:`make_template` (``tf.compat.v1.make_template``'s
    result): ``__call__`` runs it in the template's variable scope, reusing its
    variables after the first complete call.
    """

    def __init__(self, name: str, func: Callable[..., Any], create_scope_now: bool = False,
                 unique_name: str | None = None, custom_getter: Callable | None = None):
        self._func = func
        self._stacktrace = traceback.format_stack()[:-2]
        self._name = name
        self._unique_name = unique_name
        self._custom_getter = custom_getter
        if name is None:
            raise ValueError("name cannot be None.")
        self._variable_scope: VariableScope | None = None
        if create_scope_now:
            with _pure_variable_scope(unique_name or _get_unique_variable_scope(name),
                                      custom_getter=custom_getter) as vs:
                self._variable_scope = vs
        # whether a call completed (and so created the variables), as TF tracks it
        self._variables_created = False
        self._first_call = True

    def _call_func(self, args: tuple, kwargs: dict[str, Any]) -> Any:
        """Run the function; after the first complete call, no new trainable variable
        may appear. An exception gets the template's definition site appended.

        :raises ValueError: a trainable variable was created by a later call
        """
        try:
            if self._variables_created:
                n_global = len(get_collection(GraphKeys.GLOBAL_VARIABLES))
                n_trainable = len(get_collection(GraphKeys.TRAINABLE_VARIABLES))
                result = self._func(*args, **kwargs)
                trainable = get_collection(GraphKeys.TRAINABLE_VARIABLES)
                if n_trainable != len(trainable):
                    raise ValueError("Trainable variable created when calling a template "
                                     "after the first time, perhaps you used tf.Variable "
                                     "when you meant tf.get_variable: "
                                     f"{trainable[n_trainable:]}")
                del n_global  # TF only logs new non-trainable variables
            elif self._first_call:
                self._first_call = False
                try:
                    result = self._func(*args, **kwargs)
                except BaseException:
                    self._first_call = True
                    raise
                self._variables_created = True
            else:  # called again from another thread before the first call completed
                result = self._func(*args, **kwargs)
            return result
        except Exception as exc:
            exc_args = exc.args
            arg0 = exc_args[0] if exc_args else ""
            trace = "".join(_skip_common_stack_elements(self._stacktrace,
                                                        traceback.format_stack()))
            exc.args = (f"{arg0}\n\noriginally defined at:\n{trace}",) + tuple(exc_args[1:])
            raise

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._variable_scope:
            with variable_scope(self._variable_scope, reuse=not self._first_call):
                return self._call_func(args, kwargs)
        with variable_scope(self._unique_name, self._name,
                            custom_getter=self._custom_getter) as vs:
            self._variable_scope = vs
            return self._call_func(args, kwargs)

    @property
    def name(self) -> str:
        """The name given to :func:`make_template`."""
        return self._name

    @property
    def func(self) -> Callable[..., Any]:
        return self._func

    @property
    def variable_scope(self) -> VariableScope | None:
        """The template's variable scope (None before the first call unless created
        at construction)."""
        return self._variable_scope

    @property
    def variable_scope_name(self) -> str | None:
        """The scope's name ending in ``/`` (so it matches no longer prefix)."""
        if self._variable_scope:
            name = self._variable_scope.name
            if not name or name[-1] == "/":
                return name
            return name + "/"
        return None

    var_scope = variable_scope

    def _collection(self, key: str) -> list[Any]:
        if not self._variables_created:
            return []
        return get_collection(key, self.variable_scope_name)

    @property
    def trainable_variables(self) -> list[Any]:
        return self._collection(GraphKeys.TRAINABLE_VARIABLES)

    @property
    def non_trainable_variables(self) -> list[Any]:
        trainable = set(self.trainable_variables)
        return [v for v in self.global_variables if v not in trainable]

    @property
    def global_variables(self) -> list[Any]:
        return self._collection(GraphKeys.GLOBAL_VARIABLES)

    @property
    def local_variables(self) -> list[Any]:
        return self._collection(GraphKeys.LOCAL_VARIABLES)

    @property
    def variables(self) -> list[Any]:
        return self.global_variables + self.local_variables

    @property
    def weights(self) -> list[Any]:
        return self.variables

    @property
    def trainable_weights(self) -> list[Any]:
        return self.trainable_variables

    @property
    def non_trainable_weights(self) -> list[Any]:
        return self.non_trainable_variables

    def __repr__(self) -> str:
        return f"<Template {self._name!r} scope={self.variable_scope_name!r}>"
