"""The jit layer: ``@at.autotuned``, a ``jax.jit`` that reads the tuned config when it traces.

``_decorator`` holds :class:`Autotuned` (the object ``@at.autotuned`` returns), ``_methods`` its
bound-method form, ``_lookup`` which config a call signature gets (read once per signature,
inside jit's trace), ``_record`` the signatures a program is called with, written as pending
records under ``AUTOTUNE_RECORD=1``, and ``_fn_tune`` ``fn.tune`` (tune on example arguments,
store the winner).
"""
