"""The jit layer: ``@at.autotuned``, a ``jax.jit`` that reads the tuned config when it traces.

``_decorator`` holds :class:`Autotuned` (the object ``@at.autotuned`` returns) and its whole call
path. What hangs off it takes the decorated function as a ``_target.Target`` value and the
object's behaviour as callables, never the object: ``_lookup`` (which config a call signature
gets, read once per signature inside jit's trace, through the cache's one read path),
``_routes`` (a jit per cached XLA choice), ``_tier`` (tier-up: the default serves while the
winner compiles), ``_fn_tune`` (``fn.tune``: tune on example arguments, store the winner),
``_record`` (the signatures a program is called with, written as pending records under
``AUTOTUNE_RECORD=1``), and ``_bound`` (the method forms, which forward to the object's public
methods).
"""
