"""The program layer: a traced JAX function's loop sites and their re-emission under a config.

What a config is (``_config``: :class:`Config`, the notation ``scan×4``), where the loops are
(``_sites`` walks the jaxpr; ``_fingerprint`` hashes the program's dataflow), what a site may
become (``_space``), how a config is applied (``_rewrite``; ``_loop`` is ``at.loop``), the keys
a result is stored under (``_keys``), a call's arguments as JSON (``_abstract``, ``_jitargs``),
XLA's per-compile options (``_xla``), and every JAX internal autotune touches (``_compat*``).
Nothing here measures, searches or stores.
"""
