"""TF 1's graph-level API inside ``model_fn``: variables, scopes, collections, control
dependencies, ``tf.group``, assignments, control flow, random ops, printing.

* ``get_variable`` / ``variable_scope`` are ``estimator.get_variable`` /
  ``estimator.variable_scope`` (TF 1 names, ``AUTO_REUSE`` semantics); ``name_scope`` only
  yields its name (it never named variables in TF 1 either).
* ``control_dependencies`` is a no-op: a jitted step runs everything its outputs need, and
  batch-norm moving averages update without ``UPDATE_OPS`` (which stays empty).
* ``assign`` / ``assign_add`` / ``assign_sub`` set non-trainable variables
  (``estimator.assign``); the global step advances by itself.
* ``cond`` is ``jax.lax.cond`` (a Python bool just picks the branch); ``map_fn`` is
  ``jax.lax.map``; ``scan`` is ``jax.lax.scan`` with TF's argument order.
* random ops draw from ``estimator.next_rng_key()`` inside ``model_fn`` and from NumPy's
  generator outside (``input_fn``); ``set_random_seed`` is a no-op: seeds come from
  ``RunConfig(tf_random_seed=...)``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import jax
import jax.numpy as jnp
import numpy as np

from estimator.compat.v1 import initializers as _initializers
from estimator.compat.v1._base import dtype as _dtype
from estimator.compat.v1._base import in_model_fn, named, op
from estimator.compat.v1._graph import GraphKeys, collection
from estimator.compat.v1.data._dataset import set_default_seed
from estimator.compat.v1.data._pipeline import is_vectorizing
from estimator.compat.v1.train._train_op import NoOp, group
from estimator.model import variables as _variables

__all__ = [
    "AUTO_REUSE",
    "Variable",
    "get_variable",
    "tables_initializer",
    "variable_scope",
    "name_scope",
    "get_variable_scope",
    "trainable_variables",
    "global_variables",
    "local_variables",
    "model_variables",
    "get_collection",
    "get_collection_ref",
    "control_dependencies",
    "group",
    "no_op",
    "tuple_",
    "assign",
    "assign_add",
    "assign_sub",
    "cond",
    "map_fn",
    "scan",
    "set_random_seed",
    "random_normal",
    "random_uniform",
    "truncated_normal",
    "random_shuffle",
    "print_",
    "Print",
    "check_numerics",
    "assert_equal",
    "disable_v2_behavior",
    "enable_v2_behavior",
    "disable_eager_execution",
    "enable_eager_execution",
    "executing_eagerly",
]

AUTO_REUSE = "AUTO_REUSE"
logger = logging.getLogger("estimator")


def get_variable(
    name,
    shape=None,
    dtype=None,
    initializer=None,
    regularizer=None,
    trainable=None,
    collections=None,
    caching_device=None,
    partitioner=None,
    validate_shape=True,
    use_resource=None,
    custom_getter=None,
    constraint=None,
    synchronization=None,
    aggregation=None,
):
    """``tf.get_variable``: creates or reuses a variable (``estimator.get_variable``).

    Initializer classes are instantiated (``initializer=tf.zeros_initializer``), TF's
    dtypes narrowed as jax does, a ``constraint`` applied to the value read. Collections,
    devices, partitioners and resource flags are accepted and ignored.

    Raises:
      RuntimeError: outside ``model_fn`` (TF's graph has no home for it here).
      ValueError: TF's messages for a shape mismatch on reuse or a missing shape.
    """
    del collections, caching_device, partitioner, validate_shape, use_resource
    del custom_getter, synchronization, aggregation
    value = _variables.get_variable(
        name,
        shape,
        _dtype(dtype),
        _initializers.resolve(initializer),
        regularizer,
        trainable,
    )
    return value if constraint is None else constraint(value)


def Variable(  # noqa: N802 (TF's name)
    initial_value=None,
    trainable=None,
    collections=None,
    validate_shape=True,
    caching_device=None,
    name=None,
    variable_def=None,
    dtype=None,
    expected_shape=None,
    import_scope=None,
    constraint=None,
    use_resource=None,
    synchronization=None,
    aggregation=None,
    shape=None,
):
    """``tf.Variable(initial_value, name=...)`` inside ``model_fn``: a variable of the
    Estimator (``estimator.get_variable``) named ``name`` or TF's ``Variable``,
    ``Variable_1``, ... in the current scope, starting at ``initial_value``.

    What differs from TF: the result is the variable's value (a jax array, as
    ``tf.get_variable``'s here), not an object with ``assign``/``initializer`` (use
    ``tf.assign(v, value)`` on a ``trainable=False`` variable); ``initial_value`` is
    computed on every call (only the first, when the model is initialised, is used).

    Raises:
      ValueError: no ``initial_value`` (TF's message).
      RuntimeError: outside ``model_fn``.
    """
    del collections, validate_shape, caching_device, variable_def, expected_shape
    del import_scope, use_resource, synchronization, aggregation, shape
    if initial_value is None:
        raise ValueError("initial_value must be specified.")
    if callable(initial_value):
        initial_value = initial_value()
    value = jnp.asarray(initial_value, _dtype(dtype))
    unique = _variables.unique_name(name or "Variable")
    trainable = True if trainable is None else bool(trainable)
    result = _variables.get_variable(unique, None, value.dtype, value, None, trainable)
    return result if constraint is None else constraint(result)


def variable_scope(
    name_or_scope,
    default_name=None,
    values=None,
    initializer=None,
    regularizer=None,
    caching_device=None,
    partitioner=None,
    custom_getter=None,
    reuse=None,
    dtype=None,
    use_resource=None,
    constraint=None,
    auxiliary_name_scope=True,
):
    """``tf.variable_scope``: prefixes variable names (``estimator.variable_scope``);
    variables are always reused by name, as with ``reuse=tf.AUTO_REUSE``."""
    return _variables.variable_scope(
        name_or_scope, default_name, values, _initializers.resolve(initializer), reuse, dtype
    )


@contextlib.contextmanager
def name_scope(name, default_name=None, values=None) -> Iterator[str]:
    """``tf.name_scope``: yields ``name + "/"`` (names ops in TF; no variables, here nothing)."""
    del values
    yield f"{name or default_name}/"


class _Scope:
    """What ``tf.get_variable_scope()`` returns: the current scope's ``name``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.original_name_scope = name + "/" if name else ""

    def reuse_variables(self) -> None:
        """No-op: variables are always reused by name."""


def get_variable_scope() -> _Scope:
    """``tf.get_variable_scope()``: an object with the current scope's ``name``."""
    frame = _variables.current_frame()
    prefix = "" if frame is None else _variables.scope_prefix(frame)
    return _Scope(prefix.rstrip("/"))


def trainable_variables(scope=None) -> list:
    """``tf.trainable_variables(scope)``: the values of the trainable variables whose names
    start with ``scope`` (usable as ``var_list``)."""
    return collection(GraphKeys.TRAINABLE_VARIABLES, scope)


def global_variables(scope=None) -> list:
    """``tf.global_variables(scope)``: every variable's value (no optimizer slots)."""
    return collection(GraphKeys.GLOBAL_VARIABLES, scope)


def model_variables(scope=None) -> list:
    """``tf.model_variables(scope)``."""
    return collection(GraphKeys.MODEL_VARIABLES, scope)


def local_variables(scope=None) -> list:
    """``tf.local_variables()``: empty (metrics keep no local variables here)."""
    return []


def get_collection(key, scope=None) -> list:
    """``tf.get_collection`` (see ``_graph.collection``)."""
    return collection(key, scope)


get_collection_ref = get_collection


@contextlib.contextmanager
def control_dependencies(control_inputs) -> Iterator[None]:
    """``tf.control_dependencies``: a no-op (see the module docstring)."""
    del control_inputs
    yield


def tables_initializer(name="init_all_tables") -> NoOp:
    """``tf.tables_initializer``: a no-op (lookup tables are filled when made)."""
    return NoOp()


def no_op(name=None) -> NoOp:
    """``tf.no_op``."""
    return NoOp()


def tuple_(tensors, name=None, control_inputs=None):
    """``tf.tuple``: the tensors, unchanged."""
    return list(tensors)


def _assign(ref, value, what):
    frame = _variables.require_frame(what)
    if ref is frame.global_step:
        raise ValueError(
            f"{what} on the global step: the Estimator advances the global step by itself "
            "(one per train step); remove this update."
        )
    return _variables.assign(ref, value)


def assign(ref, value, validate_shape=None, use_locking=None, name=None):
    """``tf.assign``: a non-trainable variable's new value (``estimator.assign``)."""
    return named(_assign(ref, value, "tf.assign"), name)


def assign_add(ref, value, use_locking=None, name=None):
    """``tf.assign_add``."""
    return named(_assign(ref, jnp.asarray(ref) + value, "tf.assign_add"), name)


def assign_sub(ref, value, use_locking=None, name=None):
    """``tf.assign_sub``."""
    return named(_assign(ref, jnp.asarray(ref) - value, "tf.assign_sub"), name)


def cond(pred, true_fn=None, false_fn=None, strict=False, name=None, fn1=None, fn2=None):
    """``tf.cond``: ``jax.lax.cond`` (a Python bool calls one branch). Both branches must
    return the same structure; create variables outside the branches."""
    true_fn = true_fn or fn1
    false_fn = false_fn or fn2
    if isinstance(pred, (bool, np.bool_)):
        return named(true_fn() if pred else false_fn(), name)
    return named(jax.lax.cond(pred, lambda _: true_fn(), lambda _: false_fn(), None), name)


def map_fn(fn, elems, dtype=None, parallel_iterations=None, back_prop=True, name=None, **kwargs):
    """``tf.map_fn``: ``fn`` over the first axis (``jax.lax.map``)."""
    return named(jax.lax.map(fn, elems), name)


def scan(fn, elems, initializer=None, parallel_iterations=10, back_prop=True, name=None, **kw):
    """``tf.scan(fn, elems, initializer)``: ``fn(accumulated, element)`` over the first axis,
    stacking every accumulated value (``jax.lax.scan``). Without ``initializer`` the first
    element starts the accumulation, as TF."""
    if kw.get("reverse"):
        elems = jax.tree.map(lambda x: jnp.flip(x, 0), elems)
    if initializer is None:
        first = jax.tree.map(lambda x: x[0], elems)
        rest = jax.tree.map(lambda x: x[1:], elems)
        _, ys = jax.lax.scan(lambda c, x: (fn(c, x), fn(c, x)), first, rest)
        out = jax.tree.map(lambda f, y: jnp.concatenate([f[None], y]), first, ys)
    else:

        def body(carry, x):
            new = fn(carry, x)
            return new, new

        _, out = jax.lax.scan(body, initializer, elems)
    if kw.get("reverse"):
        out = jax.tree.map(lambda x: jnp.flip(x, 0), out)
    return named(out, name)


def set_random_seed(seed) -> None:
    """``tf.set_random_seed``: seeds the shuffles of ``tf.data`` pipelines without a seed of
    their own. The Estimator's randomness (initial values, dropout) comes from
    ``RunConfig(tf_random_seed=...)``, as in TF, where the Estimator sets the graph seed."""
    set_default_seed(seed)


def _rng(shape, draw_jax, draw_np, dtype):
    if is_vectorizing():
        raise ValueError("random ops run element by element in Dataset.map")
    shape = tuple(int(d) for d in np.ravel(shape))
    if in_model_fn():
        return draw_jax(_variables.next_rng_key(), shape, _dtype(dtype))
    return np.asarray(draw_np(np.random.default_rng(), shape), _dtype(dtype))


@op
def random_normal(shape, mean=0.0, stddev=1.0, dtype=jnp.float32, seed=None, name=None):
    """``tf.random_normal``."""
    return _rng(
        shape,
        lambda k, s, d: mean + stddev * jax.random.normal(k, s, d),
        lambda g, s: g.normal(mean, stddev, s),
        dtype,
    )


@op
def random_uniform(shape, minval=0, maxval=None, dtype=jnp.float32, seed=None, name=None):
    """``tf.random_uniform`` on ``[minval, maxval)`` (maxval None: 1)."""
    high = 1.0 if maxval is None else maxval
    if jnp.issubdtype(_dtype(dtype), jnp.integer):
        return _rng(
            shape,
            lambda k, s, d: jax.random.randint(k, s, minval, high, d),
            lambda g, s: g.integers(minval, high, s),
            dtype,
        )
    return _rng(
        shape,
        lambda k, s, d: jax.random.uniform(k, s, d, minval, high),
        lambda g, s: g.uniform(minval, high, s),
        dtype,
    )


@op
def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=jnp.float32, seed=None, name=None):
    """``tf.truncated_normal``: normal values cut at two standard deviations."""

    def draw_np(g, s):
        x = g.normal(size=s)
        while np.any(bad := np.abs(x) > 2):
            x[bad] = g.normal(size=int(bad.sum()))
        return mean + stddev * x

    return _rng(
        shape,
        lambda k, s, d: mean + stddev * jax.random.truncated_normal(k, -2.0, 2.0, s, d),
        draw_np,
        dtype,
    )


@op
def random_shuffle(value, seed=None, name=None):
    """``tf.random_shuffle``: the rows of ``value`` in a random order."""
    if in_model_fn():
        return jax.random.permutation(_variables.next_rng_key(), jnp.asarray(value), axis=0)
    return np.random.default_rng().permutation(np.asarray(value), axis=0)


def print_(*inputs, **kwargs) -> NoOp:
    """``tf.print``: ``jax.debug.print`` of the values (at run time, each step)."""
    text = " ".join("{}" for _ in inputs)
    jax.debug.print(text, *inputs)
    return NoOp()


def Print(input_, data, message=None, first_n=None, summarize=None, name=None):  # noqa: N802
    """``tf.Print`` (TF 1): prints ``message`` and ``data`` when run; returns ``input_``."""
    jax.debug.print((message or "") + " ".join("{}" for _ in data), *data)
    return input_


def check_numerics(tensor, message, name=None):
    """``tf.check_numerics``: ``tensor`` (a NaN loss is caught by the Estimator's
    ``NanTensorHook`` without a check op)."""
    return tensor


def assert_equal(x, y, data=None, summarize=None, message=None, name=None) -> NoOp:
    """``tf.assert_equal``: checked now on concrete values; a no-op on traced ones.

    Raises:
      ValueError: concrete values that differ (TF's "Condition x == y did not hold").
    """
    if not isinstance(x, jax.core.Tracer) and not isinstance(y, jax.core.Tracer):
        if not np.all(np.asarray(x) == np.asarray(y)):
            raise ValueError(f"{message or ''} Condition x == y did not hold.".strip())
    return NoOp()


def disable_v2_behavior() -> None:
    """``tf.disable_v2_behavior``: a no-op (this is the TF 1 API)."""


def enable_v2_behavior() -> None:
    """``tf.enable_v2_behavior``: a no-op."""


def disable_eager_execution() -> None:
    """``tf.disable_eager_execution``: a no-op (nothing runs eagerly inside ``model_fn``)."""


def enable_eager_execution(config=None, device_policy=None, execution_mode=None) -> None:
    """``tf.enable_eager_execution``: a no-op."""


def executing_eagerly() -> bool:
    """``tf.executing_eagerly``: False inside ``model_fn`` (it is traced), True outside."""
    return not in_model_fn()
