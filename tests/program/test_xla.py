"""XLA compile options as a dimension of a config: notation, identity, the merge, the probe, the
executable built with them, the space and a tiny study that measures them."""

import jax
import jax.numpy as jnp
import pytest
from _presets import FAST

import autotune as at
from autotune.measuring._stages import compile_config
from autotune.program import _xla
from autotune.program._config import Config, canonical_json
from autotune.program._space import Space
from autotune.program._xla import CATALOG, XlaChoice, XlaOption, jit_options, offered

OPT_LEVEL = b"xla_backend_optimization_level"


def _built_with(compiled, key: bytes) -> bool:
    """Whether the executable's serialized compile options name ``key`` (an option override)."""
    return key in compiled.runtime_executable().serialize()


def test_notation_round_trip_and_rules():
    c = XlaChoice.parse("xla:O0+nollvm")
    assert str(c) == "xla:O0+nollvm" and XlaChoice.parse(str(c)) == c
    assert XlaChoice(("nollvm", "O0")) == c  # catalog order, whatever order they were given in
    assert c.flags() == {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
    assert str(XlaChoice()) == "xla:default" and XlaChoice.parse("xla:default") == XlaChoice()
    with pytest.raises(at.ConfigError, match="both of group 'opt-level'"):
        XlaChoice(("O0", "O1"))
    with pytest.raises(at.ConfigError, match="Unknown XLA option 'O9'"):
        XlaChoice.parse("xla:O9")
    with pytest.raises(at.ConfigError, match="write 'xla:O1'"):
        XlaChoice.parse("O1")


def test_config_identity_with_and_without_xla():
    sites = {"l": {"repr": "for", "unroll": 1}, "m": {"repr": "scan", "unroll": 4}}
    plain = Config(sites)
    assert plain.to_json() == canonical_json(sites)  # no "@xla" key: every existing identity unchanged
    assert hash(plain) == hash(tuple(plain.items())) and plain == Config(xla="xla:default").__class__(sites)
    assert Config(xla="xla:default") == Config() and not Config()
    with_xla = Config(sites, xla="xla:O1")
    assert with_xla.to_json() == canonical_json({**sites, "@xla": ["O1"]})
    assert Config.from_json(with_xla.to_json()) == with_xla and hash(Config.from_json(with_xla.to_json())) == hash(
        with_xla
    )
    assert with_xla != plain and len(with_xla) == 2 and list(with_xla) == ["l", "m"]  # the mapping is sites only
    only = Config(xla="xla:O0")
    assert bool(only) and len(only) == 0 and str(only) == "xla:O0" and only.label() == "xla:O0"
    assert str(with_xla) == "l=for, m=scan×4, xla:O1"
    assert with_xla.label([{"id": "m", "name": "inner"}]) == "inner=scan×4, l=for, xla:O1"
    assert (
        at.program._config.config_label(with_xla.to_dict()) == "l=for, m=scan×4, xla:O1"
    )  # a stored dict reads the same
    assert plain.with_xla("xla:O2") == Config(sites, xla="xla:O2")


def test_jit_options_merge_user_keys_win():
    user = {"static_argnums": (1,), "compiler_options": {"xla_backend_optimization_level": 2}}
    merged = jit_options(XlaChoice.parse("xla:O0+nollvm"), user)
    assert merged["compiler_options"] == {
        "xla_backend_optimization_level": 2,  # the user's own key wins
        "xla_llvm_disable_expensive_passes": True,
    }
    assert merged["static_argnums"] == (1,) and user["compiler_options"] == {"xla_backend_optimization_level": 2}
    assert jit_options(XlaChoice(), user) == user and jit_options(None, None) == {}


def test_a_refused_option_is_left_out_with_one_note():
    bogus = XlaOption("bogus", "bogus", ("cpu",), {"xla_no_such_option_for_a_test": 1}, "nothing", "a test")
    gpu_only = next(o for o in CATALOG if o.platforms == ("gpu",))
    catalog = (*(o for o in CATALOG if o.name in ("O1", "nollvm")), bogus, gpu_only)
    with pytest.warns(RuntimeWarning, match="XLA option bogus .* is left out") as caught:
        kept, notes = offered("cpu", "test-kind", catalog)
    assert [o.name for o in kept] == ["O1", "nollvm"]  # a GPU option is never offered on CPU
    assert len(notes) == 1 and "No such compile option" in notes[0]
    assert len([w for w in caught if "bogus" in str(w.message)]) == 1
    assert offered("cpu", "test-kind", catalog) == (kept, notes)  # probed once per jaxlib and device kind


def test_the_executable_is_built_with_the_options():
    def f(x):
        return jnp.sin(x) * 2.0

    x = jnp.ones(8)
    default = compile_config(f, (x,), config=Config())
    o0 = compile_config(f, (x,), config=Config(xla="xla:O0"))
    assert default.lowered.as_text() == o0.lowered.as_text()  # the same program text...
    assert default.program_hash != o0.program_hash  # ...is not shared with the default's measurement
    assert _built_with(o0.compiled, OPT_LEVEL) and not _built_with(default.compiled, OPT_LEVEL)
    assert jnp.allclose(o0.compiled(x), default.compiled(x))


def test_export_request_carries_the_options():
    from autotune.measuring._sampling import Sampling
    from autotune.measuring.process._export import export, trace_and_lower

    def f(x):
        return jnp.cos(x) + 1.0

    x = jnp.ones(4)
    call = at.Call(f, (x,))
    stages = trace_and_lower(call, Config(xla="xla:nollvm"), lambda *_: None)
    request = export(stages, call, Sampling.of(FAST)).request
    assert request["compiler_options"] == {"xla_llvm_disable_expensive_passes": True}
    plain = export(trace_and_lower(call, Config(), lambda *_: None), call, Sampling.of(FAST)).request
    assert plain["compiler_options"] is None


def test_space_with_the_xla_dimension():
    def f(x):
        return at.loop(lambda c, _: (c * 0.5 + 1.0, None), x, None, length=4, name="l")[0]

    sites = at.sites(f, jnp.ones(2))
    plain, xla = Space(sites), Space(sites, xla=_xla.choices([o for o in CATALOG if o.name in ("O0", "nollvm")]))
    assert len(xla) == 4 * len(plain) and "xla" not in plain.param_choices()
    assert xla.param_choices()["xla"] == ["xla:default", "xla:O0", "xla:nollvm", "xla:O0+nollvm"]
    configs = list(xla.configs())
    assert len(configs) == len(set(configs)) == len(xla) and configs[0] == xla.default() == plain.default()
    for c in configs:
        assert xla.from_params(xla.to_params(c)) == c
    o0 = next(c for c in configs if c.xla)
    assert xla.with_defaults(o0, ["l"]).xla == o0.xla and xla.pinned(["l"]).xla == xla.xla
    assert list(plain.configs()) == [c for c in configs if not c.xla]


def test_tune_options_and_cli_flag():
    from autotune.cli._parser import build_parser
    from autotune.cli._tune_cmd import tune_options

    assert at.TuneOptions().xla == "auto" and str(at.TuneOptions(xla=True)) == "TuneOptions(xla=True)"
    with pytest.raises(at.StudyError, match="xla='yes' must be 'auto', True or False"):
        at.TuneOptions(xla="yes")
    parse = build_parser().parse_args
    assert tune_options(parse(["tune", "s.py", "--xla", "on"])).xla is True
    assert tune_options(parse(["tune", "s.py", "--xla", "off"])).xla is False
    assert tune_options(parse(["tune", "s.py"])).xla == "auto"


@pytest.mark.slow  # over 4 s: in `make test`, not `make test-fast`
def test_a_tiny_study_measures_xla_configs(tmp_path):
    def f(x):
        return jnp.tanh(x) * 0.5  # no loop: the XLA options are the whole space

    x = jnp.ones(16)
    result = at.tune(
        f, x, xla=True, sampler="grid", isolate=False, timing=FAST, storage=f"sqlite:///{tmp_path / 's.db'}"
    )
    names = {str(t.config) for t in result.trials if t.state == "complete"}
    assert result.space_size == len(_xla.choices(offered("cpu", jax.devices()[0].device_kind)[0])) >= 4
    assert {"default", "xla:O0", "xla:O1", "xla:nollvm"} <= names
    assert all(t.state != "rejected" for t in result.trials)  # the guard compared each against the default


def test_catalog_markdown_lists_every_option():
    table = _xla.catalog_markdown()
    assert all(f"`xla:{o.name}`" in table for o in CATALOG) and table.count("\n") == len(CATALOG) + 1
    assert not any(k in _xla.PROCESS_GLOBAL for o in CATALOG for k in o.flags)


def test_every_option_of_the_catalog_is_a_field_this_jaxlib_parses():
    # jaxlib parses any platform's DebugOptions field on CPU, so this checks the GPU names and values
    # too (e.g. a repeated enum takes the whole list, not XLA_FLAGS' "+WHILE" form); a GPU runs them.
    assert {o.name: _xla.refusal(o) for o in CATALOG if _xla.refusal(o) is not None} == {}


def test_the_readme_and_the_reference_list_every_option_as_the_catalog_renders_it(repo_root):
    table = _xla.catalog_markdown()
    for page in ("README.md", "docs/reference/xla-options.md"):
        text = (repo_root / page).read_text(encoding="utf-8")
        assert table in text, f"{page}: paste autotune.program._xla.catalog_markdown() again (the catalog changed)"
    assert all(f"`xla:{o.name}`" in table and o.trades and o.source for o in CATALOG)
