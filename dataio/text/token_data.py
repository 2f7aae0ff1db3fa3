"""An opened token data set: one shard folder (a URL's copied locally first), or a mixture's sources end to end.

``TokenData.open`` names a bad source at once (no samples, not text shards, a
remote copy that failed); ``TextLoader`` reads its ``shards`` through
``token_batches`` and plans its epochs from its ``mixture``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dataio.mixtures.mixture_options import mixture_sources, source_storage_options
from dataio.remote.local_copy import local_token_folder
from dataio.remote.remote_options import retry_policy
from dataio.text.config import TextLoaderConfig
from dataio.text.mixture_plans import TextMixture
from dataio.text.token_shards import TokenShards


class TokenData:
    """``shards`` (every source's, end to end), the ``mixture`` (None for one source), their fingerprint."""

    def __init__(self, shards: TokenShards, mixture: TextMixture | None, sources: list[str],
                 copies: list[tempfile.TemporaryDirectory]) -> None:
        self.shards, self.mixture, self.copies = shards, mixture, copies
        self._sources = sources  # the sources' manifest fingerprints

    @classmethod
    def open(cls, source: str | Path | Mapping[str, str | Path], config: TextLoaderConfig) -> "TokenData":
        copies: list[tempfile.TemporaryDirectory] = []
        try:
            sources = mixture_sources(source, config.weights)
            if sources is None:
                shards = _token_shards(source, config, config.storage_options, copies)
                if len(shards) == 0:
                    raise ValueError(f"{source} holds no samples")
                return cls(shards, None, [shards.manifest.fingerprint()], copies)
            parts: dict[str, TokenShards] = {}
            for name, folder in sources.items():
                options = source_storage_options(config.storage_options, sources, name)
                parts[str(name)] = _token_shards(folder, config, options, copies)
                if len(parts[str(name)]) == 0:
                    raise ValueError(f"source {name!r} ({folder}) holds no samples")
            mixture = TextMixture(tuple(parts), [p.lengths for p in parts.values()],
                                  [p.order_shard_of for p in parts.values()], config)
            return cls(TokenShards.concat(parts), mixture, [p.manifest.fingerprint() for p in parts.values()], copies)
        except BaseException:
            for copy in copies:
                copy.cleanup()
            raise

    def fingerprint(self) -> str:
        """Which data set a loader state belongs to (a mixture's: its sources and blend)."""
        return self.mixture.fingerprint(self._sources) if self.mixture is not None else self._sources[0]

    def close(self) -> None:
        """Release the memory maps and remove the remote sources' temporary copies."""
        self.shards.close()
        for copy in self.copies:
            copy.cleanup()
        self.copies = []


def _token_shards(source: str | Path, config: TextLoaderConfig, storage_options: Mapping[str, Any] | None,
                  copies: list[tempfile.TemporaryDirectory]) -> TokenShards:
    """The token shards of ``source``; a URL's are copied locally first (``local_copy``), their sha256 checked
    once then, not again by ``verify_checksums``. ``storage_options``: this source's
    (``mixture_options.source_storage_options`` gives a mixture's local sources none)."""
    c = config
    folder, temporary, verified = local_token_folder(
        source, storage_options=storage_options, retry=retry_policy(c.retries, c.retry_backoff),
        cache_dir=c.cache_dir, timeout=c.remote_timeout)
    if temporary is not None:
        copies.append(temporary)
    return TokenShards(folder, c.verify_checksums and not verified)
