"""YAML for small hand-written files (a mixture file): safe, and with what its aliases expand to bounded.

``yaml.safe_load`` runs no code, but an alias is a reference: nine lists of nine
references to the list before (the "billion laughs") is 400 bytes of YAML that
stand for 9**9 strings. Loading them costs nothing; anything that walks the value
(a ``repr`` in an error message, a loop over a schedule) runs for ever and grows
memory until the machine kills it. And PyYAML releases before the fix of merge
keys (yaml/pyyaml#937, 2026) copy them (``<<: [*a, *a]``) while they construct, so
there the load itself grows.

So the document is composed into PyYAML's node graph (aliases still shared),
the values it stands for are counted (each alias as often as it is used, merge
keys included) without expanding anything, and only a graph within
``max_values`` is constructed; a recursive alias (``&a [*a]``) is refused too.
"""

from __future__ import annotations

from typing import Any


class YamlTooLarge(ValueError):
    """A YAML document whose aliases expand past the limit, or that refers to itself."""


def load_bounded_yaml(text: str, max_values: int) -> Any:
    """``yaml.safe_load(text)`` if the document stands for at most ``max_values`` values (``YamlTooLarge``
    otherwise); ``yaml.YAMLError`` as ``safe_load`` raises it."""
    import yaml  # lazy: PyYAML is optional, needed only for YAML files

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        expanded_size(node, max_values)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def expanded_size(root: Any, limit: int) -> int:
    """The values the node graph from ``root`` stands for once every alias is expanded, counted in time linear
    in the graph (each node's count is kept); ``YamlTooLarge`` past ``limit`` or on a cycle.

    Iterative, not recursive: depth is whatever the file nests to.
    """
    sizes: dict[int, int] = {}
    path: set[int] = set()  # the nodes whose count is being made: meeting one again is a cycle
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            path.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            if sizes[key] > limit:
                raise YamlTooLarge(f"its aliases expand to more than {limit:,} values")
            continue
        if key in sizes:
            continue
        if key in path:
            raise YamlTooLarge(f"an alias refers to itself (line {node.start_mark.line + 1})")
        path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    return sizes[id(root)]


def _children(node: Any) -> list[Any]:
    """The nodes directly under a sequence (its items) or a mapping (its keys and values)."""
    value = node.value
    if not isinstance(value, list):
        return []  # a scalar
    if value and isinstance(value[0], tuple):
        return [part for pair in value for part in pair]
    return value
