"""Pascal VOC annotation XML parsed safely: expat with every DOCTYPE refused, into a small tree of elements.

An annotation file is input like any other. XML's entity declarations are its attack surface: billions of
laughs (entities that expand into each other, a few hundred bytes growing to gigabytes), external entities that
read local files or URLs. VOC's files declare no DOCTYPE, so any is refused in one line before an entity can be
declared (defusedxml's rule, without its dependency); expat then has nothing to expand. The tree is built with
an explicit stack (no recursion to exhaust) and only element names and text are kept; elements are counted as
they are parsed and a file past ``MAX_XML_ELEMENTS`` is refused in one line (bounded memory).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from xml.parsers import expat

# elements one annotation file may hold: a VOC file has ~10 per object, so this is thousands of objects; a file
# of millions of empty elements under the byte cap would otherwise cost ~250 bytes of tree each (a GB at 4 M)
MAX_XML_ELEMENTS = 100_000


@dataclass
class Element:
    """An XML element: its tag, text (the direct text, stripped) and child elements in order."""

    tag: str
    text: str = ""
    children: list[Element] = field(default_factory=list)

    def find(self, tag: str) -> Element | None:
        return next((child for child in self.children if child.tag == tag), None)

    def findtext(self, tag: str) -> str | None:
        child = self.find(tag)
        return None if child is None else child.text

    def findall(self, tag: str) -> list[Element]:
        return [child for child in self.children if child.tag == tag]


class UnsafeXml(ValueError):
    """The XML declares a DOCTYPE or an entity: refused, never expanded."""


def parse_xml(data: bytes) -> Element:
    """The root element of ``data``; ValueError in one line for XML that does not parse or declares a DOCTYPE."""
    parser = expat.ParserCreate()
    root = Element("")
    stack = [root]
    texts: list[list[str]] = [[]]
    count = [0]

    def start(tag: str, attributes: dict) -> None:
        count[0] += 1
        if count[0] > MAX_XML_ELEMENTS:  # counted while parsing: refused before the tree grows past it
            raise ValueError(f"it holds over {MAX_XML_ELEMENTS} XML elements (an annotation holds ~10 an object)")
        element = Element(tag)
        stack[-1].children.append(element)
        stack.append(element)
        texts.append([])

    def end(tag: str) -> None:
        stack.pop().text = "".join(texts.pop()).strip()

    def refuse(*_args) -> None:
        raise UnsafeXml("it declares a DOCTYPE or entities, which annotation files have no use for (refused, "
                        "never expanded)")

    parser.StartElementHandler, parser.EndElementHandler = start, end
    parser.CharacterDataHandler = lambda text: texts[-1].append(text)
    parser.StartDoctypeDeclHandler = parser.EntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = lambda *_args: 0  # never fetched (expat then stops with an error)
    try:
        parser.Parse(data, True)
    except expat.ExpatError as e:
        raise ValueError(f"not well-formed XML ({expat.ErrorString(e.code)} at line {e.lineno})") from None
    if len(root.children) != 1:
        raise ValueError("not an XML document with one root element")
    return root.children[0]
