"""``estimator.compat.v1.train``: TF 1 optimizers' numbers, slot names, ``minimize`` /
``compute_gradients`` / ``apply_gradients`` / ``tf.group`` in an Estimator, learning-rate
decays.

Numbers labelled "TF 2.15.1" come from this script (tensorflow-cpu 2.15.1, graph mode)::

    X = [[1, 2, 3], [0.5, -1, 0]]; Y = [1, -1]
    w = tf.get_variable("w", initializer=[0.5, -1.0, 2.0])
    b = tf.get_variable("b", initializer=0.25)
    loss = tf.reduce_mean(tf.square(tf.tensordot(X, w, 1) + b - Y))
    op = <optimizer>.minimize(loss, global_step=tf.train.get_or_create_global_step())
    # run op 3 times; read w, b after each run and every slot variable at the end
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import estimator as est
import estimator.compat.v1 as tf
from estimator.compat.v1.train._train_op import Application, make_train_op
from estimator.warm_starting import variable_names

X = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 0.0]], np.float32)
Y = np.array([1.0, -1.0], np.float32)
W0 = {"w": jnp.array([0.5, -1.0, 2.0]), "b": jnp.array(0.25)}


def _loss(params):
    return jnp.mean(jnp.square(X @ params["w"] + params["b"] - Y))


def _steps(optimizer, n=3):
    """``n`` steps of ``optimizer``'s train op on the loss above: [(w, b)], final state."""
    tx = make_train_op([Application(optimizer, None)])
    params, state = dict(W0), tx.init(W0)
    out = []
    for _ in range(n):
        updates, state = tx.update(jax.grad(_loss)(params), state, params)
        params = optax.apply_updates(params, updates)
        out.append((np.asarray(params["w"]), float(params["b"])))
    return out, state


# (w, b) after each of 3 steps and the slots after the third: TF 2.15.1 (script above).
CASES = {
    "sgd": (
        lambda: tf.train.GradientDescentOptimizer(0.1),
        [
            ([0.0, -1.5, 0.875], -0.375),
            ([0.06875000149011612, -0.9375, 1.4000000953674316], -0.4124999940395355),
            ([-0.10734377056360245, -0.9778125286102295, 1.105625033378601], -0.6665624976158142),
        ],
        {},
    ),
    "momentum": (
        lambda: tf.train.MomentumOptimizer(0.1, 0.9),
        [
            ([0.0, -1.5, 0.875], -0.375),
            ([-0.3812499940395355, -1.3875000476837158, 0.38749998807907104], -0.9750000238418579),
            ([-0.38859373331069946, -0.37031257152557373, 1.1393749713897705], -1.2403125762939453),
        ],
        {"Momentum": ([0.07343745231628418, -10.171875, -7.518750190734863], 2.6531248092651367)},
    ),
    "nesterov": (
        lambda: tf.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
        [
            ([-0.4500000476837158, -1.9500000476837158, -0.13750004768371582], -0.9375),
            ([0.24818754196166992, 0.5306253433227539, 2.7702503204345703], -0.5103748440742493),
            ([-1.1947648525238037, -1.669628620147705, -1.0443692207336426], -2.1247398853302),
        ],
        {
            "Momentum": (
                [6.975736141204834, 6.517784118652344, 15.351943016052246],
                8.834157943725586,
            )
        },
    ),
    "adagrad": (
        lambda: tf.train.AdagradOptimizer(0.1),
        [
            ([0.40019941329956055, -1.0998005867004395, 1.9000394344329834], 0.15012775361537933),
            ([0.335281640291214, -1.1587024927139282, 1.8369457721710205], 0.08410666137933731),
            ([0.2851311266422272, -1.200048804283142, 1.7894070148468018], 0.032475244253873825),
        ],
        {
            "Adagrad": (
                [57.96043395996094, 46.359928131103516, 271.87286376953125],
                94.65533447265625,
            )
        },
    ),
    "adam": (
        lambda: tf.train.AdamOptimizer(0.1),
        [
            ([0.4000000059604645, -1.100000023841858, 1.899999976158142], 0.15000000596046448),
            ([0.3007107377052307, -1.1979994773864746, 1.8010598421096802], 0.05053553730249405),
            ([0.20280522108078003, -1.2913525104522705, 1.7043049335479736], -0.04791979491710663),
        ],
        {
            "Adam": (
                [1.1455373764038086, 0.9652964472770691, 2.4422783851623535],
                1.4769819974899292,
            ),
            "Adam_1": (
                [0.05586510896682739, 0.04363159090280533, 0.26000452041625977],
                0.09183505177497864,
            ),
            "beta1_power": 0.6560999155044556,
            "beta2_power": 0.9960060715675354,
        },
    ),
    "rmsprop": (
        lambda: tf.train.RMSPropOptimizer(0.01),
        [
            ([0.4728837013244629, -1.027116298675537, 1.969444990158081], 0.22149133682250977),
            ([0.45218077301979065, -1.0473662614822388, 1.9475005865097046], 0.20011408627033234),
            ([0.434617280960083, -1.0642842054367065, 1.929350733757019], 0.18208979070186615),
        ],
        {
            "RMSProp": (
                [6.969871520996094, 6.5401811599731445, 31.584228515625],
                10.619332313537598,
            ),
            "RMSProp_1": (
                [0.017563482746481895, 0.016917942091822624, 0.018149856477975845],
                0.018024297431111336,
            ),
        },
    ),
    "rmsprop_centered": (
        lambda: tf.train.RMSPropOptimizer(0.01, momentum=0.5, centered=True),
        [
            ([0.4718281924724579, -1.0281717777252197, 1.9679102897644043], 0.22025705873966217),
            ([0.43516355752944946, -1.0643025636672974, 1.9276151657104492], 0.18193313479423523),
            ([0.39705798029899597, -1.1009589433670044, 1.8868449926376343], 0.14225895702838898),
        ],
        {
            "RMSProp": (
                [6.839694976806641, 6.3176422119140625, 30.759626388549805],
                10.448036193847656,
            ),
            "RMSProp_1": (
                [1.285672903060913, 1.2264002561569214, 2.8483095169067383],
                1.621909260749817,
            ),
            "RMSProp_2": (
                [0.03810558468103409, 0.03665643185377121, 0.04077016934752464],
                0.03967417776584625,
            ),
        },
    ),
    "adadelta": (
        lambda: tf.train.AdadeltaOptimizer(1.0),
        [
            ([0.49955278635025024, -1.000447154045105, 1.999552845954895], 0.24955278635025024),
            ([0.4991000294685364, -1.0008997917175293, 1.9991000890731812], 0.249099999666214),
            ([0.4986436069011688, -1.0013558864593506, 1.9986437559127808], 0.24864351749420166),
        ],
        {
            "Adadelta": (
                [3.560826301574707, 3.5566933155059814, 18.01970672607422],
                5.5650835037231445,
            )
        },
    ),
    "ftrl": (
        lambda: tf.train.FtrlOptimizer(
            0.1, l1_regularization_strength=0.01, l2_regularization_strength=0.1
        ),
        [
            ([0.3669750690460205, -1.032360315322876, 1.8404839038848877], 0.1368974894285202),
            ([0.3034980297088623, -1.0901873111724854, 1.7786200046539307], 0.0723319947719574),
            ([0.2542610764503479, -1.130861520767212, 1.7318705320358276], 0.0216076597571373),
        ],
        {
            "Ftrl": (
                [55.819236755371094, 45.38742446899414, 263.21710205078125],
                90.87386322021484,
            ),
            "Ftrl_1": (
                [-19.057273864746094, 76.42252349853516, -281.33447265625],
                -2.074131965637207,
            ),
        },
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_optimizer_steps_and_slots_match_tf(case):
    make, expected_steps, expected_slots = CASES[case]
    steps, state = _steps(make())
    for (w, b), (tf_w, tf_b) in zip(steps, expected_steps, strict=True):
        np.testing.assert_allclose(w, tf_w, rtol=2e-6, atol=1e-6)
        np.testing.assert_allclose(b, tf_b, rtol=2e-6, atol=1e-6)
    for slot, value in expected_slots.items():
        if isinstance(value, tuple):  # TF's <var>/<slot>: per variable
            np.testing.assert_allclose(state[slot]["w"], value[0], rtol=2e-6, atol=1e-7)
            np.testing.assert_allclose(state[slot]["b"], value[1], rtol=2e-6, atol=1e-7)
        else:  # beta1_power, beta2_power: one per optimizer
            np.testing.assert_allclose(state[slot], value, rtol=1e-6)


def test_optimizer_defaults_are_tf1s():
    adam = tf.train.AdamOptimizer()
    assert (adam._learning_rate, adam._beta1, adam._beta2, adam._epsilon) == (
        0.001,
        0.9,
        0.999,
        1e-08,
    )
    rms = tf.train.RMSPropOptimizer(0.1)
    assert (rms._decay, rms._momentum, rms._epsilon, rms._centered) == (0.9, 0.0, 1e-10, False)
    assert tf.train.AdagradOptimizer(0.1)._initial_accumulator_value == 0.1
    assert tf.train.FtrlOptimizer(0.1)._options["learning_rate_power"] == -0.5
    assert tf.train.AdamOptimizer(0.1).get_slot_names() == ["m", "v"]


def test_optimizer_argument_errors():
    with pytest.raises(ValueError, match="initial_accumulator_value must be positive"):
        tf.train.AdagradOptimizer(0.1, initial_accumulator_value=0.0)
    with pytest.raises(ValueError, match="Must specify the optimizer name"):
        tf.train.AdamOptimizer(0.1, name="")
    with pytest.raises(ValueError, match="learning_rate_power"):
        tf.train.FtrlOptimizer(0.1, learning_rate_power=0.5)


def test_gradient_descent_state_is_checkpointable():
    # No slots: a leafless state that orbax accepts (it refuses an empty dict).
    tx = make_train_op([Application(tf.train.GradientDescentOptimizer(0.1), None)])
    state = tx.init(W0)
    assert jax.tree.leaves(state) == [] and not isinstance(state, dict)


def _model_fn(make_train_op_fn, extra=None):
    def model_fn(features, labels, mode):
        w = tf.get_variable("w", initializer=np.array([0.5, -1.0, 2.0], np.float32))
        b = tf.get_variable("b", initializer=np.float32(0.25))
        pred = tf.tensordot(features["x"], w, 1) + b
        loss = tf.reduce_mean(tf.square(pred - labels))
        train_op = make_train_op_fn(loss, w, b)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    return model_fn


def _train(tmp_path, model_fn, steps):
    estimator = tf.estimator.Estimator(
        model_fn, str(tmp_path), config=tf.estimator.RunConfig(tf_random_seed=1)
    )
    estimator.train(lambda: ({"x": X}, Y), steps=steps)
    return estimator


def test_minimize_in_an_estimator_with_decay_and_slot_names(tmp_path):
    def train_op(loss, w, b):
        global_step = tf.train.get_global_step()
        rate = tf.train.exponential_decay(0.1, global_step, 1, 0.5)
        return tf.train.GradientDescentOptimizer(rate).minimize(loss, global_step=global_step)

    estimator = _train(tmp_path / "sgd", _model_fn(train_op), 3)
    # TF 2.15.1 (script above, GradientDescentOptimizer(exponential_decay(0.1, gs, 1, 0.5))):
    # the rate of step t is 0.1 * 0.5**t, read before the step's update.
    np.testing.assert_allclose(
        estimator.get_variable_value("w"),
        [0.02095703035593033, -1.153476595878601, 1.1663281917572021],
        rtol=2e-6,
    )
    np.testing.assert_allclose(estimator.get_variable_value("b"), -0.43019533157348633, rtol=2e-6)

    adam = _train(
        tmp_path / "adam",
        _model_fn(lambda loss, w, b: tf.train.AdamOptimizer(0.1).minimize(loss)),
        1,
    )
    # The checkpoint's optimizer state has TF's slot names (what warm start matches).
    names = variable_names(adam.model_dir)
    for name in ("w/Adam", "w/Adam_1", "b/Adam", "b/Adam_1"):
        assert name in names
    assert "opt_state/beta1_power" in names


def test_minimize_a_loss_other_than_the_specs(tmp_path):
    # TF 2.15.1 (script above): GradientDescentOptimizer(0.1).minimize(loss + 0.5 *
    # tf.nn.l2_loss(w)), one step; the reported loss stays the spec's.
    def train_op(loss, w, b):
        return tf.train.GradientDescentOptimizer(0.1).minimize(loss + 0.5 * tf.nn.l2_loss(w))

    estimator = _train(tmp_path, _model_fn(train_op), 1)
    np.testing.assert_allclose(
        estimator.get_variable_value("w"),
        [-0.025000035762786865, -1.4500000476837158, 0.7749999761581421],
        rtol=2e-6,
    )
    np.testing.assert_allclose(estimator.get_variable_value("b"), -0.375, rtol=2e-6)


def test_compute_and_apply_gradients_with_global_norm_clipping(tmp_path):
    def train_op(loss, w, b):
        optimizer = tf.train.GradientDescentOptimizer(0.1)
        grads, variables = zip(*optimizer.compute_gradients(loss), strict=True)
        grads, _ = tf.clip_by_global_norm(grads, 1.0)
        return optimizer.apply_gradients(zip(grads, variables, strict=True))

    estimator = _train(tmp_path, _model_fn(train_op), 1)
    # TF 2.15.1: the same with clip_by_global_norm(grads, 1.0), one step.
    np.testing.assert_allclose(
        estimator.get_variable_value("w"),
        [0.46594974398612976, -1.0340502262115479, 1.9233869314193726],
        rtol=2e-6,
    )
    np.testing.assert_allclose(estimator.get_variable_value("b"), 0.2074371725320816, rtol=2e-6)


def test_group_of_two_optimizers_with_var_lists(tmp_path):
    def train_op(loss, w, b):
        return tf.group(
            tf.train.GradientDescentOptimizer(0.1).minimize(loss, var_list=[w]),
            tf.train.AdagradOptimizer(0.1).minimize(loss, var_list=[b]),
        )

    estimator = _train(tmp_path, _model_fn(train_op), 1)
    # w: the SGD step of the table above; b: the Adagrad step (each optimizer sees the full
    # loss's gradient for its own variables, as in TF).
    np.testing.assert_allclose(
        estimator.get_variable_value("w"), [0.0, -1.5, 0.875], rtol=2e-6, atol=1e-7
    )
    np.testing.assert_allclose(estimator.get_variable_value("b"), 0.15012775361537933, rtol=2e-6)


def test_train_op_errors(tmp_path):
    def overlapping(loss, w, b):
        sgd = tf.train.GradientDescentOptimizer(0.1)
        return tf.group(sgd.minimize(loss, var_list=[w]), sgd.minimize(loss, var_list=[w]))

    with pytest.raises(ValueError, match="Variable w is updated by two optimizers"):
        _train(tmp_path / "a", _model_fn(overlapping), 1)

    def arrays(loss, w, b):
        return tf.train.GradientDescentOptimizer(0.1).apply_gradients([(w * 2.0, w)])

    with pytest.raises(TypeError, match="apply_gradients takes the gradients of compute_grad"):
        _train(tmp_path / "b", _model_fn(arrays), 1)

    def not_a_variable(loss, w, b):
        return tf.train.GradientDescentOptimizer(0.1).minimize(loss, var_list=[w * 2.0])

    with pytest.raises(ValueError, match="not a trainable variable of this model"):
        _train(tmp_path / "c", _model_fn(not_a_variable), 1)


def test_symbolic_gradients_refuse_array_use():
    from estimator.compat.v1._symbolic import SymbolicGradient

    with pytest.raises(TypeError, match="is symbolic here: the Estimator computes gradients"):
        jnp.asarray(SymbolicGradient("w"))
    with pytest.raises(TypeError, match="A gradient norm .* is symbolic here"):
        jnp.asarray(tf.global_norm([SymbolicGradient("w")]))


# Learning-rate decays at steps 0, 1, 99, 100, 150, 250, 1000: TF 2.15.1, e.g.
#   sess.run(tf.train.exponential_decay(0.1, tf.constant(step), 100, 0.96, staircase=False))
SCHEDULE_STEPS = [0, 1, 99, 100, 150, 250, 1000]
SCHEDULES = {
    "exponential": (
        lambda gs: tf.train.exponential_decay(0.1, gs, 100, 0.96),
        [
            0.10000000149011612,
            0.09995918720960617,
            0.09603919833898544,
            0.09600000083446503,
            0.09406040608882904,
            0.09029798954725266,
            0.06648325175046921,
        ],
    ),
    "exponential_staircase": (
        lambda gs: tf.train.exponential_decay(0.1, gs, 100, 0.96, staircase=True),
        [
            0.10000000149011612,
            0.10000000149011612,
            0.10000000149011612,
            0.09600000083446503,
            0.09600000083446503,
            0.09216000139713287,
            0.06648325175046921,
        ],
    ),
    "natural_exp": (
        lambda gs: tf.train.natural_exp_decay(0.1, gs, 100, 0.5),
        [
            0.10000000149011612,
            0.09950124472379684,
            0.06095709279179573,
            0.060653068125247955,
            0.04723665863275528,
            0.02865048125386238,
            0.0006737948278896511,
        ],
    ),
    "inverse_time": (
        lambda gs: tf.train.inverse_time_decay(0.1, gs, 100, 0.5, staircase=True),
        [
            0.10000000149011612,
            0.10000000149011612,
            0.10000000149011612,
            0.06666667014360428,
            0.06666667014360428,
            0.05000000074505806,
            0.01666666753590107,
        ],
    ),
    "piecewise": (
        lambda gs: tf.train.piecewise_constant(gs, [100, 200], [1.0, 0.5, 0.1]),
        [1.0, 1.0, 1.0, 1.0, 0.5, 0.10000000149011612, 0.10000000149011612],
    ),
    "polynomial": (
        lambda gs: tf.train.polynomial_decay(0.1, gs, 200, 0.01, power=2.0),
        [
            0.10000000149011612,
            0.09910225123167038,
            0.03295224905014038,
            0.032499998807907104,
            0.015625,
            0.009999999776482582,
            0.009999999776482582,
        ],
    ),
    "polynomial_cycle": (
        lambda gs: tf.train.polynomial_decay(0.1, gs, 200, 0.01, power=1.0, cycle=True),
        [
            0.10000000149011612,
            0.09955000132322311,
            0.05544999986886978,
            0.054999999701976776,
            0.032499998807907104,
            0.04375000298023224,
            0.009999999776482582,
        ],
    ),
    "cosine": (
        lambda gs: tf.train.cosine_decay(0.1, gs, 200, alpha=0.1),
        [
            0.10000000149011612,
            0.09999445080757141,
            0.05570682883262634,
            0.05499999597668648,
            0.023180196061730385,
            0.010000000707805157,
            0.010000000707805157,
        ],
    ),
    "cosine_restarts": (
        lambda gs: tf.train.cosine_decay_restarts(0.1, gs, 100),
        [
            0.10000000149011612,
            0.09997532516717911,
            2.467334343236871e-05,
            0.10000000149011612,
            0.08535534143447876,
            0.014644661918282509,
            0.0691341683268547,
        ],
    ),
    "linear_cosine": (
        lambda gs: tf.train.linear_cosine_decay(0.1, gs, 200),
        [
            0.10010000318288803,
            0.0995938628911972,
            0.025746608152985573,
            0.025099998340010643,
            0.0037611653096973896,
            0.00010000000474974513,
            0.00010000000474974513,
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(SCHEDULES))
def test_schedule_values_per_step_match_tf(case):
    fn, expected = SCHEDULES[case]
    # The global step inside model_fn is a traced int32; jit gives the same values.
    values = [float(jax.jit(fn)(jnp.int32(step))) for step in SCHEDULE_STEPS]
    np.testing.assert_allclose(values, expected, rtol=2e-6, atol=1e-9)


def test_schedule_errors():
    with pytest.raises(ValueError, match="global_step is required for exponential_decay"):
        tf.train.exponential_decay(0.1, None, 100, 0.96)
    with pytest.raises(ValueError, match="The length of boundaries should be 1 less"):
        tf.train.piecewise_constant(5, [10, 20], [1.0, 0.5])


def test_estimator_keeps_tf_global_step_names():
    # tf.train.get_global_step outside model_fn is None, as TF's without a graph step.
    assert tf.train.get_global_step() is None
    assert est.get_global_step() is None
