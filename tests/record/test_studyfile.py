"""autotune/record/_studyfile.py: loading a study file, and every way one can be wrong, named in one sentence."""

from __future__ import annotations

import textwrap

import pytest

import autotune as at
from autotune.record._studyfile import load_examples, load_module

HEAD = "import jax.numpy as jnp\nimport autotune as at\n"
SMOOTH = textwrap.dedent("""
    @at.autotuned
    def smooth(x, scale=1.0):
        return at.loop(lambda c, _: (c * scale + 1.0, None), x, length=4, name="smooth")[0]
""")


def write(tmp_path, body: str, name: str = "a_study"):
    path = tmp_path / f"{name}.py"
    path.write_text(HEAD + SMOOTH + textwrap.dedent(body))
    return str(path)


@pytest.mark.parametrize(
    "body, message",
    [
        ("", "has nothing to tune: define a function examples()"),
        ("def examples():\n    raise ValueError('no data file')\n", "examples() raised ValueError: no data file. Fix"),
        ("def examples():\n    return []\n", "it must return a non-empty list"),
        ("def examples():\n    return [smooth]\n", "examples()[0] must be (fn, args) or (fn, args, kwargs)"),
        ("def examples():\n    return [(print, (1,))]\n", "is not an @at.autotuned function"),
        ("def examples():\n    return [(smooth, jnp.zeros(3))]\n", "args must be a tuple and kwargs a dict"),
        (
            "def examples():\n    return [(smooth, (jnp.zeros(3), 2.0, 3.0))]\n",
            "examples()[0] passes arguments that a_study:smooth(x, scale=1.0) does not take (too many positional",
        ),
        (
            "def examples():\n    return [(smooth, (jnp.zeros(3),), {'sigma': 1})]\n",
            "unexpected keyword argument 'sigma'",
        ),
    ],
)
def test_a_wrong_study_file_is_one_clear_error(tmp_path, body, message):
    with pytest.raises(at.StudyError) as exc:
        load_examples(write(tmp_path, body))
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_files_that_are_not_study_files(tmp_path):
    with pytest.raises(at.StudyError, match="does not exist"):
        load_module(str(tmp_path / "missing.py"))
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(at.StudyError, match="is not a .py file"):
        load_module(str(tmp_path / "notes.txt"))
    (tmp_path / "broken_study.py").write_text("import does_not_exist_anywhere\n")
    with pytest.raises(at.StudyError, match="failed to import: ModuleNotFoundError"):
        load_module(str(tmp_path / "broken_study.py"))


def test_examples_keep_their_index_and_a_type_error_while_tracing_names_the_example(tmp_path):
    path = write(
        tmp_path,
        """
        @at.autotuned
        def needs_arrays(x):
            return at.loop(lambda c, _: (c + x, None), x, length=2, name="l")[0]

        def examples():
            return [(smooth, (jnp.zeros(3),)), (needs_arrays, ("text",))]
    """,
        name="b_study",
    )
    ok, bad = load_examples(path)
    assert (ok.index, bad.index, bad.path) == (0, 1, path)
    assert [s.id for s in ok.sites()] == ["smooth"]
    with pytest.raises(at.StudyError) as exc:
        bad.sites()
    text = str(exc.value)
    assert text.startswith(f"Study file {path!r}: examples()[1] (b_study:needs_arrays) could not be traced")
    assert "TypeError" in text and "needs_arrays(x)" in text and "\n" not in text


def test_a_bound_method_example_passes_its_instance(tmp_path):
    path = write(
        tmp_path,
        """
        class Model:
            def __init__(self, k):
                self.k = k

            def __hash__(self):
                return hash(self.k)

            def __eq__(self, other):
                return isinstance(other, Model) and other.k == self.k

            @at.autotuned(static_argnums=0)
            def step(self, x):
                return at.loop(lambda c, _: (c * self.k, None), x, length=3, name="m")[0]

        def examples():
            return [(Model(2.0).step, (jnp.ones(2),))]
    """,
        name="c_study",
    )
    (ex,) = load_examples(path)
    assert ex.fn.key == "c_study:Model.step" and type(ex.args[0]).__name__ == "Model" and len(ex.args) == 2
    assert [s.id for s in ex.sites()] == ["m"]
