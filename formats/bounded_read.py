"""Reading an input file whole, but never more than a limit: the gate's bounded reads, under their first name.

The reads themselves live in ``file_gate`` (the one module that opens files); this name stays for the
modules and tests that import it.
"""

from __future__ import annotations

from dataio.formats.file_gate import FileTooLarge, read_at_most, read_fd_at_most

__all__ = ["FileTooLarge", "read_at_most", "read_fd_at_most"]
