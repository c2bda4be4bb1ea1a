"""The engine's own modules, through their public surface: the session loop's hook
order (with a fake clock), the compiled-step cache (``StepCompiler.compile_count``,
``Estimator.runtime.compile_counts()``), the pure step functions and their ``StepInfo``,
and the non-finite skip."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import estimator as est
from estimator.engine import compiler as compiler_lib
from estimator.engine.compiler import StepCompiler
from estimator.engine.init_run import init_state
from estimator.engine.input_pipeline import Prefetcher
from estimator.engine.loop import run_loop
from estimator.engine.programs import bind
from estimator.engine.session import Session
from estimator.engine.steps import StepInfo, train_step
from estimator.handlers.events import Dispatcher
from estimator.mode_keys import ModeKeys
from estimator.model import ModelFunction

# ----- the loop: TF's hook order, and no host sync unless a hook fetches ---------------


class FakeRunner:
    """Stands for a compiled step: records each step's batch and whether it had to sync."""

    def __init__(self, clock):
        self.clock = clock
        self.steps = []
        self.outputs = {}
        self.state = None

    def run(self, batch, sync, apart=False, origin=None):
        self.steps.append((batch[0], sync))
        self.outputs = {"loss": np.float32(batch[0])}
        self.clock.now += 4.0  # every step takes 4 fake seconds

    def flush(self):
        pass


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Recorder(est.SessionRunHook):
    """Logs every call; fetches the loss when its fake-clock timer (every 10 s) fires,
    and asks to stop after ``stop_after`` steps."""

    def __init__(self, name, log, clock, stop_after=None):
        self.name, self.log, self.stop_after = name, log, stop_after
        self.timer = est.SecondOrStepTimer(every_secs=10, clock=clock)
        self.fetched = {}
        self.steps = 0

    def begin(self):
        self.log.append((self.name, "begin"))

    def after_create_session(self, session, coord):
        self.log.append((self.name, "after_create_session"))

    def before_run(self, run_context):
        self.log.append((self.name, "before_run"))
        step = run_context.session.global_step
        if self.timer.should_trigger_for_step(step):
            self.timer.update_last_triggered_step(step)
            return est.SessionRunArgs({"loss": "loss", "step": "global_step"})
        return None

    def after_run(self, run_context, run_values):
        self.log.append((self.name, "after_run"))
        if run_values.results is not None:
            self.fetched[int(run_values.results["step"])] = float(run_values.results["loss"])
        self.steps += 1
        if self.stop_after is not None and self.steps >= self.stop_after:
            run_context.request_stop()

    def end(self, session):
        self.log.append((self.name, "end"))


def _loop(hooks, clock, n_batches=20):
    runner = FakeRunner(clock)
    session = Session(ModeKeys.TRAIN, "/nowhere", runner, 0, ("loss",))
    events = Dispatcher(hooks, training=True)
    events.begin()
    events.after_create_session(session)
    batches = iter([(float(i),) for i in range(n_batches)])
    count = run_loop(session, events, Prefetcher(batches, lambda b: b), advances_global_step=True)
    return runner, session, count


def test_hooks_are_called_in_tfs_order_and_stop_after_the_requesting_step():
    """TF's ``_HookedSession`` (monitored_session.py): every hook's ``before_run`` in list
    order, the step, every ``after_run`` in order; ``request_stop`` ends the loop after
    that step, and ``end`` is called once, in order (TF's ``HookedSessionTest``)."""
    log, clock = [], Clock()
    a, b = Recorder("a", log, clock), Recorder("b", log, clock, stop_after=2)
    runner, session, count = _loop([a, b], clock)
    assert count == 2 and session.global_step == 2
    per_step = [("a", "before_run"), ("b", "before_run"), ("a", "after_run"), ("b", "after_run")]
    assert log == [
        ("a", "begin"),
        ("b", "begin"),
        ("a", "after_create_session"),
        ("b", "after_create_session"),
        *per_step,
        *per_step,
        ("a", "end"),
        ("b", "end"),
    ]


def test_only_steps_a_hook_fetches_from_sync_with_a_fake_clock():
    # Steps take 4 fake seconds; the timer fires at t=0 (step 0), then at the first step
    # with t >= last + 10: t=12 (step 3), t=24 (step 6), t=36 (step 9).
    clock = Clock()
    hook = Recorder("a", [], clock)
    runner, _, count = _loop([hook], clock, n_batches=10)
    assert count == 10
    assert [sync for _, sync in runner.steps] == [i in (0, 3, 6, 9) for i in range(10)]
    # The fetched values are those of the fetching step (batch i has loss i).
    assert hook.fetched == {0: 0.0, 3: 3.0, 6: 6.0, 9: 9.0}


# ----- a small model for the compiled steps -----------------------------------------------


def linear_model_fn(features, labels, mode):
    w = est.get_variable("w", [2], initializer=est.initializers.zeros_initializer())
    prediction = features["x"] @ w
    loss = jnp.mean((prediction - labels) ** 2)
    return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.1), predictions=prediction)


def batch(n, label=3.0):
    x = np.tile(np.array([[1.0, 2.0]], np.float32), (n, 1))
    return {"x": x}, np.full((n,), label, np.float32)


@pytest.mark.parametrize("steps_per_call", [1, 4])
def test_compile_count_is_one_per_batch_signature(steps_per_call):
    model = ModelFunction(linear_model_fn, {}, None, seed=0)
    compiler = StepCompiler(model, ModeKeys.TRAIN, steps_per_call=steps_per_call)
    state = compiler.init_state(*batch(4))
    compiler.prepare_run(state, *batch(4))  # traced; it compiles in the background
    state, outputs, _ = compiler(state, *batch(4))  # waits for that compile
    assert compiler.compile_count == 1
    for _ in range(3):  # same shapes and dtypes: the compiled program
        state, outputs, _ = compiler(state, *batch(4))
    assert compiler.compile_count == 1
    state, _, _ = compiler(state, *batch(3))  # a shorter last batch: one more program
    assert compiler.compile_count == 2
    state, _, _ = compiler(state, *batch(4))  # back to the first shape: nothing new
    assert compiler.compile_count == 2
    features, labels = batch(4)
    state, _, _ = compiler(state, features, labels.astype(np.float64))  # float64 -> float32
    assert compiler.compile_count == 2
    if steps_per_call > 1:
        # Several steps in one call, however many: the same program as one step.
        for n in (4, 2, 3):
            state, _, _ = compiler.multi(state, [batch(4)] * n)
        assert compiler.compile_count == 2
        assert int(state.global_step) == 1 + 3 + 1 + 1 + 1 + 9  # prepare_run runs no step
        with pytest.raises(ValueError, match="A call runs 1 to 4 steps .* got 5 batches"):
            compiler.multi(state, [batch(4)] * 5)
    else:
        assert int(state.global_step) == 1 + 3 + 1 + 1 + 1


def test_a_fused_call_equals_its_single_steps():
    # w starts at 0; x = [1, 2], label 3: prediction p = w·x, loss = (p - 3)², grad = 2(p - 3)x.
    # Step 1: p = 0, grad = -6·[1, 2] = [-6, -12], w = 0.1·[6, 12] = [0.6, 1.2].
    # Step 2: p = 0.6 + 2.4 = 3, grad = 0: w stays [0.6, 1.2]; with label 5 instead:
    # p = 3, grad = 2(3 - 5)[1, 2] = [-4, -8], w = [0.6, 1.2] + 0.1·[4, 8] = [1.0, 2.0].
    model = ModelFunction(linear_model_fn, {}, None, seed=0)
    compiler = StepCompiler(model, ModeKeys.TRAIN, steps_per_call=4)
    state = compiler.init_state(*batch(4))
    state, outputs, _ = compiler.multi(state, [batch(4), batch(4, label=5.0)])
    np.testing.assert_allclose(state.trainable["w"], [1.0, 2.0], rtol=1e-6)
    assert int(state.global_step) == 2
    # The outputs are the last step's: its loss was computed before its update, (3 - 5)² = 4.
    np.testing.assert_allclose(outputs["loss"], 4.0, rtol=1e-6)


def test_stacked_and_switched_fused_calls_are_the_same_steps(monkeypatch):
    # Host batches are stacked into one [slots, ...] array per leaf (few call arguments);
    # placed batches stay a tuple picked by lax.switch. Both run the same steps.
    model = ModelFunction(linear_model_fn, {}, None, seed=0)
    results = []
    for host in (True, False):
        compiler = StepCompiler(model, ModeKeys.TRAIN, steps_per_call=4, host_batches=host)
        state = compiler.init_state(*batch(4))
        for n, label in ((3, 5.0), (4, 1.0), (1, 2.0)):  # fewer steps than slots, and all
            state, outputs, _ = compiler.multi(state, [batch(4, label=label + i) for i in range(n)])
        args = compiler._arguments((state,), [batch(4)], compiler.stacks(batch(4)))
        results.append((state, outputs, len(jax.tree.leaves(args))))
    (stacked, out_stacked, n_stacked), (switched, out_switched, n_switched) = results
    # Batches whose slots would take more than STACK_BYTES_MAX stay a tuple: stacking them
    # would cost their memory again. Here 4 slots of 4 x 2 + 4 float32 = 192 bytes.
    compiler = StepCompiler(model, ModeKeys.TRAIN, steps_per_call=4)
    assert compiler.stacks(batch(4))
    monkeypatch.setattr(compiler_lib, "STACK_BYTES_MAX", 191)
    assert not compiler.stacks(batch(4))
    assert int(stacked.global_step) == int(switched.global_step) == 8
    np.testing.assert_allclose(stacked.trainable["w"], switched.trainable["w"], rtol=1e-6)
    np.testing.assert_allclose(out_stacked["loss"], out_switched["loss"], rtol=1e-6)
    state_leaves = len(jax.tree.leaves(stacked))
    assert n_stacked == state_leaves + 2 + 1  # x and the label, [4, ...] each; the count
    assert n_switched == state_leaves + 4 * 2 + 1


def test_estimator_runtime_counts_no_compile_on_repeated_calls(tmp_path):
    e = est.Estimator(linear_model_fn, str(tmp_path), est.RunConfig(tf_random_seed=1))

    def input_fn():
        return iter([batch(4)] * 6)

    e.train(input_fn, steps=6)
    e.evaluate(input_fn)
    first = e.runtime.compile_counts()
    assert first == {"train": 1, "eval": 1}
    e.train(input_fn, steps=6)
    e.evaluate(input_fn)
    assert e.runtime.compile_counts() == first
    # A new Estimator on the same model_dir restores the checkpoint and compiles its own.
    again = est.Estimator(linear_model_fn, str(tmp_path), est.RunConfig(tf_random_seed=1))
    again.evaluate(input_fn)
    assert again.runtime.compile_counts() == {"eval": 1}


# ----- the pure step functions ------------------------------------------------------------


def test_train_step_is_a_pure_function_with_the_sgd_update():
    model = ModelFunction(linear_model_fn, {}, None, seed=0)
    state = init_state(model, ModeKeys.TRAIN, *batch(2))
    step = jax.jit(bind(train_step, model))
    new_state, outputs, info = step(state, *batch(2))
    # w = 0, x = [1, 2], y = 3: prediction 0, loss (0 - 3)^2 = 9, dloss/dw = 2 (0 - 3) x =
    # [-6, -12]; SGD at 0.1: w = [0.6, 1.2].
    np.testing.assert_allclose(outputs["loss"], 9.0)
    np.testing.assert_allclose(new_state.trainable["w"], [0.6, 1.2], rtol=1e-6)
    assert int(new_state.global_step) == 1
    np.testing.assert_array_equal(state.trainable["w"], [0.0, 0.0])  # input not changed
    assert isinstance(info, StepInfo) and info.output_names == ("loss",)


def test_non_finite_loss_skips_that_step_and_every_later_one():
    model = ModelFunction(linear_model_fn, {}, None, seed=0)
    step = jax.jit(bind(train_step, model))
    state, _, _ = step(init_state(model, ModeKeys.TRAIN, *batch(2)), *batch(2))
    before = jax.device_get(state)
    state, outputs, _ = step(state, *batch(2, label=np.nan))  # global step 1: NaN loss
    assert np.isnan(outputs["loss"])
    assert int(state.non_finite_step) == 1 and int(state.global_step) == 2
    state, outputs, _ = step(state, *batch(2))  # finite again: still nothing applied
    assert np.isfinite(outputs["loss"])
    assert int(state.non_finite_step) == 1 and int(state.global_step) == 3
    after = jax.device_get(state)
    np.testing.assert_array_equal(after.trainable["w"], before.trainable["w"])
    jax.tree.map(np.testing.assert_array_equal, after.opt_state, before.opt_state)


class HoldsAnArray(est.SessionRunHook):
    def __init__(self, value):
        self.value = value


def test_step_info_comes_back_from_the_abstract_pass():
    kept = est.FinalOpsHook({})
    made = []

    def model_fn(features, labels, mode):
        spec = linear_model_fn(features, labels, mode)
        inner = HoldsAnArray(est.identity(spec.loss * 2, name="double"))
        made.append(inner)
        return spec._replace(training_hooks=[kept, inner])

    model = ModelFunction(model_fn, {}, None, seed=0)
    state = jax.eval_shape(lambda f, lab: init_state(model, ModeKeys.TRAIN, f, lab), *batch(2))
    info = jax.eval_shape(bind(train_step, model), state, *batch(2))[-1]
    assert info.hooks == (kept, made[-1]) and info.hooks[0] is kept  # the very objects
    assert isinstance(info.train_op, optax.GradientTransformation)
    # The hook made inside model_fn held a traced array: it now holds the output's name.
    assert made[-1].value in info.output_names
    assert set(info.output_names) == {"loss", "double", made[-1].value}


def test_a_wrong_state_is_a_clear_error_not_a_silent_recompile():
    model = ModelFunction(linear_model_fn, {}, None, seed=0)
    compiler = StepCompiler(model, ModeKeys.TRAIN)
    state = compiler.init_state(*batch(2))
    compiler(state, *batch(2))
    wrong = state._replace(trainable={"w": jnp.zeros((3,), jnp.float32)})
    # The compiled program is called, not silently recompiled: JAX names the argument.
    with pytest.raises(
        TypeError,
        match=r"Argument 'state.trainable\['w'\]' compiled with float32\[2\] and called with "
        r"float32\[3\]",
    ):
        compiler(wrong, *batch(2))
    assert compiler.compile_count == 1
