"""``python -m estimator.compat.port``: every TensorFlow import of a program rewritten to
``estimator.compat``, what cannot be mapped reported; and ``estimator.compat.check``'s
reading of a program (imports of private modules, symbols reached through objects, the
replacement named for each unsupported symbol)."""

import subprocess
import sys
import textwrap

import pytest

from estimator.compat import check, port

PROGRAM = textwrap.dedent(
    '''\
    """A TF 1 program."""
    import os
    import numpy as np, tensorflow as tf  # two imports on a line
    import tensorflow.compat.v1 as tf1
    from tensorflow.python.data import Dataset
    from tensorflow.contrib import layers, slim
    from tensorflow.contrib.layers import fully_connected as fc
    from tensorflow.python.platform import gfile
    from tensorflow.python.saved_model import signature_constants
    from tensorflow_estimator.python.estimator.export import export_output
    from tensorflow.python.foo import bar
    try: import tensorflow.compat.v1 as tf2
    except ImportError: pass

    def f():
        import tensorflow
        return tensorflow.nn.relu, tf.nn.ctc_loss, Dataset.range(3)
    '''
)


def test_port_rewrites_every_tensorflow_import_and_reports_the_rest():
    ported, problems, rewritten = port.port_source(PROGRAM)
    lines = ported.splitlines()
    assert lines[0] == '"""A TF 1 program."""' and lines[1] == "import os"
    assert lines[2] == "import numpy as np; import estimator.compat as tf  # two imports on a line"
    assert lines[3] == "import estimator.compat.v1 as tf1"
    assert lines[4] == "from estimator.compat.v1.data import Dataset"
    # slim has no counterpart: it keeps its TF import and is reported with its replacement.
    assert lines[5] == (
        "from estimator.compat.v1.contrib import layers; from tensorflow.contrib import slim"
    )
    assert lines[6] == "from estimator.compat.v1.contrib.layers import fully_connected as fc"
    assert lines[7] == "from estimator.compat.v1 import gfile"
    assert lines[8] == "from estimator.compat.v1.saved_model import signature_constants"
    assert lines[9] == "from estimator.compat.v1.estimator import export as export_output"
    assert lines[10] == "from tensorflow.python.foo import bar"  # unknown private module
    assert lines[11] == "try: import estimator.compat.v1 as tf2"
    assert lines[15] == "    import estimator.compat as tensorflow"
    assert rewritten == 10
    reported = {(p.line, p.message.split(":")[0]) for p in problems}
    assert reported == {
        (6, "could not map tensorflow.contrib.slim"),
        (11, "could not map tensorflow.python.foo.bar"),
        (17, "tf.nn.ctc_loss is not covered"),
    }
    slim = next(p for p in problems if p.line == 6)
    assert "tf.layers" in slim.message  # the replacement is named
    ctc = next(p for p in problems if p.line == 17)
    assert "optax.ctc_loss" in ctc.message
    compile(ported, "ported.py", "exec")  # still a program


def test_port_command_prints_a_diff_or_rewrites_in_place(tmp_path, capsys):
    path = tmp_path / "program.py"
    path.write_text("import tensorflow.compat.v1 as tf\nx = tf.nn.relu\n")
    assert port.main([str(path)]) == 0
    out, err = capsys.readouterr()
    assert "-import tensorflow.compat.v1 as tf\n+import estimator.compat.v1 as tf" in out
    assert path.read_text().startswith("import tensorflow")  # a diff only
    assert "1 import statement(s) rewritten, 0 problem(s)" in err
    assert port.main([str(path), "--in-place"]) == 0
    assert path.read_text() == "import estimator.compat.v1 as tf\nx = tf.nn.relu\n"
    bad = tmp_path / "bad.py"
    bad.write_text("from tensorflow.contrib import slim\n")
    assert port.main([str(bad), "--in-place"]) == 1
    assert bad.read_text() == "from tensorflow.contrib import slim\n"
    assert f"{bad}:1:0: ERROR: could not map tensorflow.contrib.slim" in capsys.readouterr().err
    bad.write_text("def (:\n")
    assert port.main([str(bad)]) == 2


@pytest.mark.slow
def test_port_runs_as_a_module(tmp_path):
    path = tmp_path / "program.py"
    path.write_text("import tensorflow as tf\n")
    command = [sys.executable, "-m", "estimator.compat.port", str(path), "--in-place"]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert path.read_text() == "import estimator.compat as tf\n"


def test_check_follows_objects_and_reports_private_imports(tmp_path, capsys):
    path = tmp_path / "program.py"
    path.write_text(
        textwrap.dedent(
            """
            import tensorflow as tf
            from tensorflow.python.data import Dataset
            from tensorflow.python.foo import bar
            est = tf.estimator.Estimator(model_fn=None)
            est.train(None)
            opt = tf.train.AdamOptimizer(0.1)
            opt.minimize(1.0)
            config = tf.ConfigProto()
            config.gpu_options.allow_growth = True
            with tf.Session() as sess:
                sess.run(1)
                writer = tf.summary.FileWriter("x", sess.graph)
                writer.add_summary(None)
            ds = Dataset.from_tensor_slices([1])
            it = ds.make_one_shot_iterator()
            it.get_next()
            x = tf.searchsorted
            """
        )
    )
    assert check.main([str(path)]) == 1
    out = capsys.readouterr().out
    for symbol in (
        "tf.estimator.Estimator.train",
        "tf.train.AdamOptimizer.minimize",
        "tf.ConfigProto.gpu_options",  # an attribute set on instances
        "tf.Session.run",
        "tf.Session.graph",
        "tf.summary.FileWriter.add_summary",
        "tf.data.Dataset",  # the name a private module gave
        "tf.data.Dataset.from_tensor_slices",
        "tf.data.Iterator.get_next",
    ):
        assert f"ok       {symbol} " in out, symbol
    assert "MISSING  tensorflow.python.foo.bar" in out and "private module" in out
    assert "MISSING  tf.searchsorted" in out and "jax.numpy.searchsorted" in out
