"""One label space for a mixture of image sources whose class lists differ.

The combined classes are the union of the sources' class names in first-seen
order: the first source's classes keep their indices (0..n-1), and each later
source appends the names not seen before, in its own order. A model trained on
the first source alone keeps its label indices when sources are added, which a
sorted union would shuffle. The order of the sources is the dict's, so the map
is a pure function of the sources and their order.

Sources without class names (``classes`` empty in the manifest) have no names
to match: they would share the numeric label space only when every source
lacks names, and a mix of named and unnamed sources is refused. No converter
writes such a manifest, and an emptied class list is refused when a source is
opened (``dataio.formats.dataset.class_list``), so the loaders never build
such a map; ``ClassMap.of`` keeps the rule for whoever calls it directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ClassMap:
    """The combined ``classes``, and per source the combined index of each of its labels (None: labels kept)."""

    classes: tuple[str, ...]
    per_source: dict[str, tuple[int, ...]] | None

    @classmethod
    def of(cls, sources: dict[str, tuple[str, ...]]) -> "ClassMap":
        """From each source's class names (``{name: manifest.classes}``, in the mixture's order)."""
        unnamed = [name for name, classes in sources.items() if not classes]
        if unnamed and len(unnamed) < len(sources):
            named = [name for name in sources if name not in unnamed]
            raise ValueError(f"sources {unnamed} have labels without class names and {named} have class names: "
                             "their labels cannot be matched; convert them all with class names (or all without)")
        if unnamed:
            return cls(classes=(), per_source=None)
        index: dict[str, int] = {}
        for classes in sources.values():
            for name in classes:
                index.setdefault(name, len(index))
        return cls(classes=tuple(index), per_source={source: tuple(index[c] for c in classes)
                                                     for source, classes in sources.items()})

    def labels(self, source: str, labels: np.ndarray) -> np.ndarray:
        """``labels`` of ``source`` in the combined space (int32). A label outside the source's classes (a row
        that ``table_faults`` names, dropped when read) maps to 0 rather than failing here."""
        if self.per_source is None:
            return labels.astype(np.int32, copy=False)
        lookup = np.asarray(self.per_source[source], dtype=np.int32)
        inside = (labels >= 0) & (labels < len(lookup))
        return np.where(inside, lookup[np.where(inside, labels, 0)], 0).astype(np.int32)
