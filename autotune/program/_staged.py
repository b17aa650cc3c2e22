"""A staged space: the loop configs under XLA's defaults, then XLA's options on the best few only.

As a dimension of the product (``Space(sites, xla=...)``) XLA's options multiply every loop
config: 88 loop configs and 7 XLA choices are 616 configs. A :class:`StagedSpace` measures the
loop configs first (the *loop stage*) and then each XLA choice on the ``top`` best of them only
(the *XLA stage*): 88 + 3 × 6 = 106. Which loop configs are best is measured, so the XLA stage's
configs are known once the loop stage is (:meth:`StagedSpace.stage` takes them ranked); how
many there are is known before.

Example::

    >>> space = StagedSpace(at.sites(f, x), xla=choices(offered("cpu", kind)[0]), top=3)
    >>> len(space), len(space.loops()), space.product_size()  # 88 + 3 × 6, 88, 88 × 7
    (106, 88, 616)
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from autotune.program._config import Config
from autotune.program._sites import LoopSite
from autotune.program._space import XLA_PARAM, Space
from autotune.program._xla import XlaChoice


class StagedSpace(Space):
    """The loop configs, then each XLA choice on the ``top`` best of them (see the module docstring).

    Arguments:
        sites: the program's loop sites (as :class:`Space` takes them).
        xla: the XLA choices, the default first (``autotune.program._xla.choices``).
        top: how many of the best loop configs the XLA stage tries each choice on.
    """

    def __init__(self, sites: list[LoopSite], xla: tuple[XlaChoice, ...], top: int):
        super().__init__(sites, xla=xla)
        self.top = top

    def loops(self) -> Space:
        """The loop stage's space: the same sites' choices (pinned ones included), XLA's defaults only."""
        out = Space.__new__(Space)
        out.all_sites, out.sites, out.entries, out.xla = self.all_sites, self.sites, self.entries, ()
        return out

    def queued(self, fixed: dict[str, Any]) -> Space:
        """A queued trial that names no XLA choice is a loop stage's trial (XLA's defaults), not
        one whose XLA choice the sampler draws."""
        return self if XLA_PARAM in fixed else self.loops()

    def __len__(self) -> int:
        loops = len(self.loops())
        return loops + min(self.top, loops) * max(0, len(self.xla) - 1)

    def stage(self, ranked: Iterable[Config]) -> list[Config]:
        """The XLA stage: each XLA choice but the default on the first ``top`` of ``ranked`` (loop
        configs, best first): every choice of the best loop config first, then the next one's."""
        return [c.with_xla(x) for c in itertools.islice(ranked, self.top) for x in self.xla[1:]]

    def configs(self, ranked: Iterable[Config] | None = None) -> Iterator[Config]:
        """Every config: the loop stage's (the default first), then the XLA stage of ``ranked``
        (default: the first ``top`` loop configs in their order)."""
        yield from self.loops().configs()
        yield from self.stage(self.loops().configs() if ranked is None else ranked)


__all__ = ["StagedSpace"]
