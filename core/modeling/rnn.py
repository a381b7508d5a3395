"""The recurrent-network functions of ``tf.nn`` as TF 1.15 builds them (graph mode):
``dynamic_rnn``, ``bidirectional_dynamic_rnn``, ``raw_rnn``, ``static_rnn``,
``static_bidirectional_rnn`` and ``static_state_saving_rnn``.

``dynamic_rnn`` runs the cell in a ``tf.while_loop`` over the time axis, reading the
inputs from one TensorArray and writing the outputs to another; with a
``sequence_length`` a batch entry's outputs past its length are zeros and its state is
carried through unchanged. The static functions unroll the cell once per input. All of
them create the cell's variables under the variable scope ``rnn`` (or
``bidirectional_rnn/fw`` and ``.../bw``) unless given a ``scope``.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from flowrt.base import dtypes as _dt
from flowrt.base.tensor_shape import TensorShape, as_shape, dimension_value
from flowrt.framework.graph import Tensor, api_function, control_dependencies, convert_to_tensor
from flowrt.framework.graph import name_scope
from flowrt.plugin.runtime import require_api
from flowrt.training.variable_scope import variable_scope

from .rnn_cell import (RNNCell, _concat, assert_like_rnncell, assert_same_structure, flatten,
                       is_sequence, map_structure, pack_sequence_as)

__all__ = ["dynamic_rnn", "bidirectional_dynamic_rnn", "raw_rnn", "static_rnn",
           "static_bidirectional_rnn", "static_state_saving_rnn"]

#: the op API functions this module calls by name
REQUIRED_API_NAMES = frozenset({
    "transpose", "cast", "identity", "shape", "stack", "unstack", "zeros", "where",
    "reduce_max", "rank", "range", "reduce_all", "equal", "Assert", "minimum", "maximum",
    "less", "greater_equal", "logical_not", "logical_or", "constant", "TensorArray",
    "while_loop", "reverse_sequence", "reverse", "concat",
})
require_api(REQUIRED_API_NAMES)


# -- helpers ---------------------------------------------------------------------------
def _transpose_batch_time(x: Tensor) -> Tensor:
    """Swap the first two axes of ``x`` (rank >= 2)."""
    x = convert_to_tensor(x)
    shape = x.shape
    if shape.ndims is not None and shape.ndims < 2:
        raise ValueError(f"Expected input tensor {x} to have rank at least 2, but saw "
                         f"shape: {shape}")
    if shape.ndims is None:
        rank = api_function("rank")(x)
        perm = api_function("concat")([[1, 0], api_function("range")(2, rank)], 0)
    else:
        perm = [1, 0] + list(range(2, shape.ndims))
    out = api_function("transpose")(x, perm)
    if shape.ndims is not None:
        dims = shape.as_list()
        out.set_shape([dims[1], dims[0]] + dims[2:])
    return out


def _best_effort_input_batch_size(flat_input: Sequence[Tensor]) -> Any:
    """The batch size (axis 1 of time-major inputs): static if any input knows it."""
    for x in flat_input:
        shape = x.shape
        if shape.ndims is None:
            continue
        if shape.ndims < 2:
            raise ValueError(f"Expected input tensor {x} to have rank at least 2")
        b = dimension_value(shape[1])
        if b is not None:
            return b
    return api_function("shape")(flat_input[0])[1]


def _infer_state_dtype(explicit: Any, state: Any) -> Any:
    """``explicit`` if given, else the one dtype of the state's tensors.

    :raises ValueError: an empty state, or tensors of several dtypes
    """
    if explicit is not None:
        return _dt.as_dtype(explicit)
    if is_sequence(state):
        found = [s.dtype for s in flatten(state)]
        if not found:
            raise ValueError("Unable to infer dtype from empty state.")
        if any(d != found[0] for d in found):
            raise ValueError("State has tensors of different inferred_dtypes. Unable to "
                             "infer a single representative dtype.")
        return found[0]
    return state.dtype


def _maybe_tensor_shape(size: Any) -> TensorShape:
    if isinstance(size, Tensor):
        return TensorShape(None)
    return as_shape(size)


def _initial_state(cell: Any, initial_state: Any, dtype: Any, batch_size: Any,
                   what: str) -> Any:
    if initial_state is not None:
        return initial_state
    if not dtype:
        raise ValueError(what)
    if getattr(cell, "get_initial_state", None) is not None:
        return cell.get_initial_state(inputs=None, batch_size=batch_size, dtype=dtype)
    return cell.zero_state(batch_size, dtype)


def _copy_one_through(cond: Tensor, old: Any, new: Any) -> Any:
    if getattr(old, "_flowrt_tensor_array", False) or (
            isinstance(old, Tensor) and old.shape.ndims == 0):
        return new
    return api_function("where")(cond, old, new)


def _rnn_step(time: Any, sequence_length: Tensor, zero_output: Any, state: Any,
              call_cell: Callable[[], tuple[Any, Any]]) -> tuple[list[Any], list[Any]]:
    """One step of an RNN with ``sequence_length``: the cell's output where
    ``time < sequence_length``, else zeros; the new state there, else the old one.

    TF's ``_rnn_step(skip_conditionals=True)``; the static RNN's conditional form
    computes the same values. Returns the flat output and flat state.
    """
    flat_state = flatten(state)
    flat_zero = flatten(zero_output)
    copy_cond = api_function("greater_equal")(time, sequence_length)
    new_output, new_state = call_cell()
    assert_same_structure(state, new_state)
    new_state, new_output = flatten(new_state), flatten(new_output)
    out = [_copy_one_through(copy_cond, z, o) for z, o in zip(flat_zero, new_output)]
    st = [_copy_one_through(copy_cond, s, n) for s, n in zip(flat_state, new_state)]
    for o, z in zip(out, flat_zero):
        o.set_shape(z.shape)
    for n, s in zip(st, flat_state):
        if isinstance(n, Tensor):
            n.set_shape(s.shape)
    return out, st


def _check_sequence_length(sequence_length: Any) -> Tensor:
    sequence_length = api_function("cast")(sequence_length, _dt.int32)
    if sequence_length.shape.ndims not in (None, 1):
        raise ValueError("sequence_length must be a vector of length batch_size, but saw "
                         f"shape: {sequence_length.shape}")
    return sequence_length


# -- dynamic_rnn -----------------------------------------------------------------------
def dynamic_rnn(cell: Any, inputs: Any, sequence_length: Any = None,
                initial_state: Any = None, dtype: Any = None,
                parallel_iterations: int | None = None, swap_memory: bool = False,
                time_major: bool = False, scope: Any = None) -> tuple[Any, Any]:
    """Run ``cell`` over the time axis of ``inputs`` in a while loop
    (``tf.nn.dynamic_rnn``).

    :param cell: an RNN cell
    :param inputs: ``[batch, time, ...]`` (``[time, batch, ...]`` if ``time_major``),
        or a nested structure of such tensors
    :param sequence_length: int vector ``[batch]``: outputs past an entry's length are
        zeros and its state is copied through
    :param initial_state: the cell's initial state (default: its zero state)
    :param dtype: the state's dtype; required without ``initial_state``
    :param parallel_iterations: iterations the loop may run at once (default 32)
    :param swap_memory: accepted as TF does
    :param time_major: inputs and outputs are ``[time, batch, ...]``
    :param scope: the variable scope (default ``rnn``)
    :returns: ``(outputs, final_state)``; outputs shaped like the inputs with the
        cell's output size as last dimension
    :raises ValueError: no dtype without an initial state, inputs of rank < 3 or of
        unknown depth, mismatched time or batch sizes, a ``sequence_length`` that is no
        vector
    :raises TypeError: ``cell`` is not an RNN cell
    """
    assert_like_rnncell("cell", cell)
    with variable_scope(scope or "rnn"):
        flat_input = [convert_to_tensor(x) for x in flatten(inputs)]
        if not time_major:
            flat_input = [_transpose_batch_time(x) for x in flat_input]
        parallel_iterations = parallel_iterations or 32
        if sequence_length is not None:
            sequence_length = _check_sequence_length(sequence_length)
            sequence_length = api_function("identity")(sequence_length,
                                                       name="sequence_length")
        batch_size = _best_effort_input_batch_size(flat_input)
        state = _initial_state(cell, initial_state, dtype, batch_size,
                               "If there is no initial_state, you must give a dtype.")
        if sequence_length is not None:
            seq_shape = api_function("shape")(sequence_length)
            want = api_function("stack")([batch_size])
            check = api_function("Assert")(
                api_function("reduce_all")(api_function("equal")(seq_shape, want)),
                [f"Expected shape for Tensor {sequence_length.name} is ", want,
                 " but saw shape: ", seq_shape])
            with control_dependencies([check]):
                sequence_length = api_function("identity")(sequence_length,
                                                           name="CheckSeqLen")
        inputs = pack_sequence_as(inputs, flat_input)
        outputs, final_state = _dynamic_rnn_loop(
            cell, inputs, state, parallel_iterations, swap_memory, sequence_length, dtype)
        if not time_major:
            outputs = map_structure(_transpose_batch_time, outputs)
        return outputs, final_state


def _dynamic_rnn_loop(cell: Any, inputs: Any, initial_state: Any, parallel_iterations: int,
                      swap_memory: bool, sequence_length: Tensor | None,
                      dtype: Any) -> tuple[Any, Any]:
    """The while loop of :func:`dynamic_rnn` over time-major ``inputs``: one
    TensorArray per input (unstacked) and per output (stacked at the end)."""
    state = initial_state
    flat_input = flatten(inputs)
    flat_output_size = flatten(cell.output_size)
    time_steps = api_function("shape")(flat_input[0])[0]
    batch_size = _best_effort_input_batch_size(flat_input)
    got_shapes = [x.shape.with_rank_at_least(3) for x in flat_input]
    const_time_steps, const_batch_size = got_shapes[0].as_list()[:2]
    for shape in got_shapes:
        if not TensorShape(shape.as_list()[2:]).is_fully_defined():
            raise ValueError("Input size (depth of inputs) must be accessible via shape "
                             "inference, but saw value None.")
        if const_time_steps != dimension_value(shape[0]):
            raise ValueError("Time steps is not the same for all the elements in the input "
                             "in a batch.")
        if const_batch_size != dimension_value(shape[1]):
            raise ValueError("Batch_size is not the same for all the elements in the "
                             "input.")
    out_dtype = _infer_state_dtype(dtype, state)
    if len(flat_input) == 1 and not is_sequence(inputs) and got_shapes[0].ndims == 3 and \
            isinstance(cell, RNNCell) and cell._fuses_sequences():
        # BasicLSTMCell (alone or stacked): every step in one op, the same variables
        # and values as the loop below (rnn_seq_ops.py)
        outputs, final_state = cell._call_sequence(flat_input[0], state, sequence_length)
        outputs.set_shape(_concat([const_time_steps, const_batch_size],
                                  flat_output_size[0], static=True))
        with name_scope("while"):  # the final state keeps TF's names: the loop's Exits
            first = 2 + len(flat_output_size)  # (after the counter, time and outputs)
            final_state = pack_sequence_as(final_state, [
                api_function("identity")(s, name=f"Exit_{first + i}")
                for i, s in enumerate(flatten(final_state))])
        return outputs, final_state
    zeros = api_function("zeros")
    zero_output = None
    if sequence_length is not None:
        zero_output = pack_sequence_as(cell.output_size, [
            zeros(_concat(batch_size, s), out_dtype) for s in flat_output_size])
        max_len = api_function("reduce_max")(sequence_length)
    else:
        max_len = time_steps
    time = api_function("constant")(0, dtype=_dt.int32, name="time")
    with name_scope("dynamic_rnn") as base_name:
        pass
    tensor_array = api_function("TensorArray")
    output_ta = tuple(
        tensor_array(dtype=out_dtype, size=time_steps,
                     element_shape=TensorShape([const_batch_size]).concatenate(
                         _maybe_tensor_shape(s)),
                     tensor_array_name=f"{base_name}output_{i}")
        for i, s in enumerate(flat_output_size))
    input_ta = tuple(
        tensor_array(dtype=x.dtype, size=time_steps, element_shape=x.shape[1:],
                     tensor_array_name=f"{base_name}input_{i}").unstack(x)
        for i, x in enumerate(flat_input))

    def time_step(time: Tensor, output_ta_t: tuple[Any, ...], state: Any) -> tuple[Any, ...]:
        input_t = tuple(ta.read(time) for ta in input_ta)
        for x, shape in zip(input_t, got_shapes):
            x.set_shape(shape[1:])
        input_t = pack_sequence_as(inputs, list(input_t))

        def call_cell() -> tuple[Any, Any]:
            return cell(input_t, state)

        if sequence_length is not None:
            output, new_flat = _rnn_step(time, sequence_length, zero_output, state,
                                         call_cell)
            new_state = pack_sequence_as(state, new_flat)
        else:
            output, new_state = call_cell()
            output = flatten(output)
        output_ta_t = tuple(ta.write(time, out) for ta, out in zip(output_ta_t, output))
        return time + 1, output_ta_t, new_state

    loop_bound = api_function("minimum")(time_steps, api_function("maximum")(1, max_len))
    # maximum_iterations never binds (loop_bound <= time_steps) but its counter is a
    # loop variable in TF too, which keeps the Exit tensors' names TF's
    _, final_ta, final_state = api_function("while_loop")(
        lambda time, *_: api_function("less")(time, loop_bound), time_step,
        (time, output_ta, state), parallel_iterations=parallel_iterations,
        maximum_iterations=time_steps, swap_memory=swap_memory)
    final_outputs = [ta.stack() for ta in final_ta]
    for out, size in zip(final_outputs, flat_output_size):
        static = _concat([const_time_steps, const_batch_size], size, static=True)
        if static is not None:
            out.set_shape(static)
    return pack_sequence_as(cell.output_size, final_outputs), final_state


def bidirectional_dynamic_rnn(cell_fw: Any, cell_bw: Any, inputs: Any,
                              sequence_length: Any = None, initial_state_fw: Any = None,
                              initial_state_bw: Any = None, dtype: Any = None,
                              parallel_iterations: int | None = None,
                              swap_memory: bool = False, time_major: bool = False,
                              scope: Any = None) -> tuple[Any, Any]:
    """A forward and a backward :func:`dynamic_rnn` (``tf.nn.bidirectional_dynamic_rnn``):
    the backward cell reads each sequence reversed (within its ``sequence_length``), and
    its outputs are reversed back.

    :returns: ``((output_fw, output_bw), (state_fw, state_bw))``
    :raises TypeError: either cell is not an RNN cell
    """
    assert_like_rnncell("cell_fw", cell_fw)
    assert_like_rnncell("cell_bw", cell_bw)
    time_axis, batch_axis = (0, 1) if time_major else (1, 0)

    def reverse(x: Tensor) -> Tensor:
        if sequence_length is not None:
            return api_function("reverse_sequence")(
                input=x, seq_lengths=sequence_length, seq_axis=time_axis,
                batch_axis=batch_axis)
        return api_function("reverse")(x, axis=[time_axis])

    with variable_scope(scope or "bidirectional_rnn"):
        with variable_scope("fw") as fw_scope:
            output_fw, state_fw = dynamic_rnn(
                cell_fw, inputs, sequence_length=sequence_length,
                initial_state=initial_state_fw, dtype=dtype,
                parallel_iterations=parallel_iterations, swap_memory=swap_memory,
                time_major=time_major, scope=fw_scope)
        with variable_scope("bw") as bw_scope:
            inputs_reverse = map_structure(reverse, inputs)
            tmp, state_bw = dynamic_rnn(
                cell_bw, inputs_reverse, sequence_length=sequence_length,
                initial_state=initial_state_bw, dtype=dtype,
                parallel_iterations=parallel_iterations, swap_memory=swap_memory,
                time_major=time_major, scope=bw_scope)
    output_bw = reverse(tmp) if not is_sequence(tmp) else map_structure(reverse, tmp)
    return (output_fw, output_bw), (state_fw, state_bw)


# -- raw_rnn ---------------------------------------------------------------------------
def raw_rnn(cell: Any, loop_fn: Callable[..., Any], parallel_iterations: int | None = None,
            swap_memory: bool = False, scope: Any = None) -> tuple[Any, Any, Any]:
    """An RNN whose inputs and stopping are decided by ``loop_fn`` (``tf.nn.raw_rnn``).

    ``loop_fn(time, cell_output, cell_state, loop_state)`` returns ``(finished,
    next_input, next_cell_state, emit_output, next_loop_state)``; it is called once
    with ``cell_output=None`` for the initial values. The loop runs until every batch
    entry is finished; finished entries emit zeros and keep their state.

    :returns: ``(emit_ta, final_state, final_loop_state)``: TensorArrays of the emitted
        outputs (``emit_ta.stack()`` gives ``[time, batch, ...]``)
    :raises TypeError: ``loop_fn`` is not callable
    """
    assert_like_rnncell("cell", cell)
    if not callable(loop_fn):
        raise TypeError("loop_fn must be a callable")
    parallel_iterations = parallel_iterations or 32
    with variable_scope(scope or "rnn"):
        time = api_function("constant")(0, dtype=_dt.int32)
        (finished, next_input, initial_state, emit_structure,
         init_loop_state) = loop_fn(time, None, None, None)
        flat_input = flatten(next_input)
        loop_state = (init_loop_state if init_loop_state is not None else
                      api_function("constant")(0, dtype=_dt.int32))
        static_batch = None
        for x in flat_input:
            d = dimension_value(x.shape[0]) if x.shape.ndims else None
            static_batch = static_batch if d is None else d
        batch_size = static_batch if static_batch is not None else \
            api_function("shape")(flat_input[0])[0]
        assert_same_structure(initial_state, cell.state_size)
        state = map_structure(convert_to_tensor, initial_state)
        flat_state = flatten(state)
        if emit_structure is not None:
            flat_emit = flatten(emit_structure)
            emit_sizes = [e.shape[1:] if e.shape.is_fully_defined() else
                          api_function("shape")(e)[1:] for e in flat_emit]
            emit_dtypes = [e.dtype for e in flat_emit]
        else:
            emit_structure = cell.output_size
            emit_sizes = flatten(emit_structure)
            emit_dtypes = [flat_state[0].dtype] * len(emit_sizes)
        tensor_array = api_function("TensorArray")
        flat_emit_ta = [
            tensor_array(dtype=d, dynamic_size=True, size=0,
                         element_shape=TensorShape([static_batch]).concatenate(
                             _maybe_tensor_shape(s)), name=f"rnn_output_{i}")
            for i, (d, s) in enumerate(zip(emit_dtypes, emit_sizes))]
        emit_ta = pack_sequence_as(emit_structure, flat_emit_ta)
        zero_emit = pack_sequence_as(emit_structure, [
            api_function("zeros")(_concat(batch_size, s), d)
            for s, d in zip(emit_sizes, emit_dtypes)])

        def condition(_time: Any, finished: Tensor, *_: Any) -> Tensor:
            return api_function("logical_not")(api_function("reduce_all")(finished))

        def body(time: Tensor, finished: Tensor, current_input: Any, emit_ta: Any,
                 state: Any, loop_state: Any) -> tuple[Any, ...]:
            """One step: the cell, then ``loop_fn``; finished entries copied through."""
            next_output, cell_state = cell(current_input, state)
            assert_same_structure(state, cell_state)
            assert_same_structure(cell.output_size, next_output)
            next_time = time + 1
            (next_finished, next_input, next_state, emit_output,
             next_loop_state) = loop_fn(next_time, next_output, cell_state, loop_state)
            assert_same_structure(state, next_state)
            assert_same_structure(current_input, next_input)
            assert_same_structure(emit_ta, emit_output)
            loop_state = loop_state if next_loop_state is None else next_loop_state

            def copy_through(current: Any, candidate: Any) -> Any:
                return map_structure(lambda c, n: _copy_one_through(finished, c, n),
                                     current, candidate)

            emit_output = copy_through(zero_emit, emit_output)
            next_state = copy_through(state, next_state)
            emit_ta = map_structure(lambda ta, e: ta.write(time, e), emit_ta, emit_output)
            finished = api_function("logical_or")(finished, next_finished)
            return next_time, finished, next_input, emit_ta, next_state, loop_state

        returned = api_function("while_loop")(
            condition, body, [time, finished, next_input, emit_ta, state, loop_state],
            parallel_iterations=parallel_iterations, swap_memory=swap_memory)
        emit_ta, final_state, final_loop_state = returned[-3:]
        if init_loop_state is None:
            final_loop_state = None
        return emit_ta, final_state, final_loop_state


# -- static RNNs -----------------------------------------------------------------------
def static_rnn(cell: Any, inputs: Sequence[Any], initial_state: Any = None,
               dtype: Any = None, sequence_length: Any = None,
               scope: Any = None) -> tuple[list[Any], Any]:
    """The cell unrolled over a Python list of inputs (``tf.nn.static_rnn``).

    :param inputs: a list of ``[batch, depth]`` tensors (or nested structures), one
        per time step
    :param sequence_length: as for :func:`dynamic_rnn`
    :returns: ``(outputs, final_state)``, ``outputs`` a list like ``inputs``
    :raises TypeError: ``inputs`` is not a sequence, or ``cell`` is not an RNN cell
    :raises ValueError: empty inputs, an input depth that is not known statically, no
        dtype without an initial state
    """
    assert_like_rnncell("cell", cell)
    if not is_sequence(inputs):
        raise TypeError("inputs must be a sequence")
    if not inputs:
        raise ValueError("inputs must not be empty")
    outputs = []
    with variable_scope(scope or "rnn") as varscope:
        first = inputs
        while is_sequence(first):
            first = first[0]
        first = convert_to_tensor(first)
        if first.shape.ndims != 1:
            fixed_batch = first.shape.with_rank_at_least(2)[0]
            for x in flatten(inputs):
                shape = convert_to_tensor(x).shape.with_rank_at_least(2)
                fixed_batch = fixed_batch.merge_with(shape[0])
                for i, size in enumerate(shape.as_list()[1:]):
                    if size is None:
                        raise ValueError(f"Input size (dimension {i} of inputs) must be "
                                         "accessible via shape inference, but saw value "
                                         "None.")
        else:
            fixed_batch = first.shape.with_rank_at_least(1)[0]
        static_batch = dimension_value(fixed_batch)
        batch_size = static_batch if static_batch else api_function("shape")(first)[0]
        state = _initial_state(cell, initial_state, dtype, batch_size,
                               "If no initial_state is provided, dtype must be specified")
        zero_output = None
        if sequence_length is not None:
            sequence_length = convert_to_tensor(sequence_length, name="sequence_length")
            if sequence_length.shape.ndims not in (None, 1):
                raise ValueError("sequence_length must be a vector of length batch_size")
            out_dtype = _infer_state_dtype(dtype, state)

            def zero(size: Any) -> Tensor:
                z = api_function("zeros")(_concat(batch_size, size), out_dtype)
                static = _concat(static_batch, size, static=True)
                if static is not None:
                    z.set_shape(static)
                return z

            zero_output = pack_sequence_as(cell.output_size,
                                           [zero(s) for s in flatten(cell.output_size)])
            sequence_length = api_function("cast")(sequence_length, _dt.int32)
        for time, input_ in enumerate(inputs):
            if time > 0:
                varscope.reuse_variables()

            def call_cell(input_: Any = input_, state: Any = state) -> tuple[Any, Any]:
                return cell(input_, state)

            if sequence_length is not None:
                flat_out, flat_st = _rnn_step(time, sequence_length, zero_output, state,
                                              call_cell)
                output = pack_sequence_as(cell.output_size, flat_out)
                state = pack_sequence_as(state, flat_st)
            else:
                output, state = call_cell()
            outputs.append(output)
        return outputs, state


def _reverse_seq(input_seq: Sequence[Any], lengths: Any) -> list[Any]:
    """The list reversed, or each sequence reversed within its length."""
    if lengths is None:
        return list(reversed(input_seq))
    flat_seq = [flatten(x) for x in input_seq]
    flat_results: list[list[Any]] = [[] for _ in input_seq]
    for sequence in zip(*flat_seq):
        shape = TensorShape(None)
        for x in sequence:
            shape = shape.merge_with(x.shape)
        for x in sequence:
            x.set_shape(shape)
        joined = api_function("stack")(list(sequence))
        reversed_ = api_function("reverse_sequence")(
            joined, lengths, seq_axis=0, batch_axis=1)
        for r, flat in zip(api_function("unstack")(reversed_), flat_results):
            r.set_shape(shape)
            flat.append(r)
    return [pack_sequence_as(x, flat) for x, flat in zip(input_seq, flat_results)]


def static_bidirectional_rnn(cell_fw: Any, cell_bw: Any, inputs: Sequence[Any],
                             initial_state_fw: Any = None, initial_state_bw: Any = None,
                             dtype: Any = None, sequence_length: Any = None,
                             scope: Any = None) -> tuple[list[Any], Any, Any]:
    """A forward and a backward :func:`static_rnn` (``tf.nn.static_bidirectional_rnn``);
    each output is the concatenation of the two directions' outputs at that step.

    :returns: ``(outputs, state_fw, state_bw)``
    :raises TypeError: a cell is not an RNN cell, or ``inputs`` is not a sequence
    :raises ValueError: empty inputs
    """
    assert_like_rnncell("cell_fw", cell_fw)
    assert_like_rnncell("cell_bw", cell_bw)
    if not is_sequence(inputs):
        raise TypeError("inputs must be a sequence")
    if not inputs:
        raise ValueError("inputs must not be empty")
    with variable_scope(scope or "bidirectional_rnn"):
        with variable_scope("fw") as fw_scope:
            output_fw, state_fw = static_rnn(cell_fw, inputs, initial_state_fw, dtype,
                                             sequence_length, scope=fw_scope)
        with variable_scope("bw") as bw_scope:
            reversed_inputs = _reverse_seq(inputs, sequence_length)
            tmp, state_bw = static_rnn(cell_bw, reversed_inputs, initial_state_bw, dtype,
                                       sequence_length, scope=bw_scope)
    output_bw = _reverse_seq(tmp, sequence_length)
    concat = api_function("concat")
    outputs = [pack_sequence_as(fw, [concat([a, b], 1) for a, b in
                                     zip(flatten(fw), flatten(bw))])
               for fw, bw in zip(output_fw, output_bw)]
    return outputs, state_fw, state_bw


def static_state_saving_rnn(cell: Any, inputs: Sequence[Any], state_saver: Any,
                            state_name: Any, sequence_length: Any = None,
                            scope: Any = None) -> tuple[list[Any], Any]:
    """:func:`static_rnn` whose initial state comes from ``state_saver.state(name)`` and
    whose final state is saved with ``state_saver.save_state(name, value)`` before the
    last output and the final state are returned (``tf.nn.static_state_saving_rnn``).

    :param state_name: a name, or names in the structure of ``cell.state_size``
    :raises ValueError: ``state_name`` does not match ``cell.state_size``
    """
    state_size = cell.state_size
    state_is_tuple = is_sequence(state_size)
    if state_is_tuple != is_sequence(state_name):
        raise ValueError("state_name should be the same type as cell.state_size.  "
                         f"state_name: {state_name}, cell.state_size: {state_size}")
    if state_is_tuple:
        names = flatten(state_name)
        if len(names) != len(flatten(state_size)):
            raise ValueError(f"#elems(state_name) != #elems(state_size): {len(names)} vs. "
                             f"{len(flatten(state_size))}")
        initial_state = pack_sequence_as(state_size, [state_saver.state(n) for n in names])
    else:
        initial_state = state_saver.state(state_name)
    outputs, state = static_rnn(cell, inputs, initial_state=initial_state,
                                sequence_length=sequence_length, scope=scope)
    if state_is_tuple:
        flat_state = flatten(state)
        saves = [state_saver.save_state(n, s) for n, s in zip(flatten(state_name),
                                                                flat_state)]
    else:
        saves = [state_saver.save_state(state_name, state)]
    identity = api_function("identity")
    with control_dependencies(saves):
        last = outputs[-1]
        outputs[-1] = pack_sequence_as(last, [identity(o) for o in flatten(last)])
        if state_is_tuple:
            state = pack_sequence_as(state, [identity(s) for s in flat_state])
        else:
            state = identity(state)
    return outputs, state


API = {
    "nn.dynamic_rnn": dynamic_rnn,
    "nn.bidirectional_dynamic_rnn": bidirectional_dynamic_rnn,
    "nn.raw_rnn": raw_rnn,
    "nn.static_rnn": static_rnn,
    "nn.static_bidirectional_rnn": static_bidirectional_rnn,
    "nn.static_state_saving_rnn": static_state_saving_rnn,
}
