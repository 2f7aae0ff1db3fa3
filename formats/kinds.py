"""The kinds of sample dataio packs and reads: one table, each kind's parts named once.

A manifest declares its kind (``sample_kind``: ``Manifest.declared_kind()``); whoever needs a kind's part asks
this table instead of guessing the kind with if-chains: the converters its fields, ``convert images`` and
``index`` its packing (what an input reads beside its image, its members and columns), ``verify`` and the
image readers its checks, ``dataio.DataLoader`` its loader face, ``ShardDataset`` its map-style item, the
trainer its task, ``dataio bench`` its benchmark. As MosaicML Streaming's string-keyed tables and webdataset's
decoder handlers: a new kind is one entry here and one room of its own (``docs/architecture.md``, "Adding a
kind of sample").

The parts are named, not imported (``module:attribute``, resolved on first use, as entry points are): the table
sits below every room (``formats/dataset`` included: the manifest's kinds are this table's names), so the
converters and ``verify`` can read it, and imports none of them. ``tests/test_kinds.py`` resolves every part
and checks that each lies in its kind's rooms or the shared image room.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dataio.formats.errors import UsageError

if TYPE_CHECKING:  # the table sits below formats/dataset too: the manifest's kinds are this table's names
    from dataio.formats.dataset.manifest import Manifest

PARTS = ("fields", "check", "verify", "packing", "source", "finish", "options", "face", "item", "facts", "task")


@dataclass(frozen=True, kw_only=True)
class Kind:
    """One kind of sample: where it is stored, how it is packed, read, finished, trained on and measured."""

    name: str  # the manifest's sample_kind
    layout: str  # "images" (tar or Arrow shards and a sample table) or "text" (token shards)
    what: str  # what a sample is, for messages ("image-text pairs")
    rooms: tuple[str, ...]  # the repository folders (and files of shared folders) holding the kind's own code
    requires: tuple[str, ...]  # the fields a folder of the kind declares (else no reader of it can read it)
    pack: str  # the command that packs it
    bench: str  # its `dataio bench` command
    fields: str  # (options: dict) -> the declared fields of a folder packed with these manifest options
    check: str  # (manifest, table: pa.Table) -> why the kind's own columns cannot be read as declared, or None
    verify: str  # (VerifyContext) -> None: `dataio verify`'s checks of the kind's own rows and members (--deep)
    packing: str  # what `convert images` and `index` ask of the kind (images.packing_kind); "": its own converter
    source: str  # the batch source (reads a batch of ids into named host fields)
    finish: str  # the device finish (``dataio.pipeline.device_stage.Finish``)
    options: str  # the kind's own options (a frozen config), or "" for none
    face: str  # the loader ``dataio.DataLoader`` builds for a folder of the kind
    keyword: str  # the face's keyword for the kind's options ("captions=" for pairs), "" when it takes none
    plain: bool  # its samples are images alone (no text, no targets): ``ImageLoader`` reads them too, labels -1
    reads: tuple[str, ...]  # the kinds of folder its face reads (views: any image folder)
    item: str  # ``ShardDataset``'s map-style item of the kind (images) or its data set (text)
    facts: str  # what a loader says about its samples (classes, vocabulary, category ids, views)
    task: str  # the trainer's task (``dataio.train.task.Task``), or "" when the trainer has none

    def part(self, name: str) -> Any:
        """The part ``name`` (one of ``PARTS``), imported on first use; None for a part the kind has not."""
        ref = getattr(self, name)
        if not ref:
            return None
        module, _, attribute = ref.partition(":")
        return getattr(importlib.import_module(module), attribute)


KINDS: dict[str, Kind] = {kind.name: kind for kind in (
    Kind(name="classification", layout="images", what="images with classes", requires=("image", "label"),
         rooms=("dataio/images", "formats/images", "dataio/train/image_task.py"), pack="dataio convert images",
         bench="images",
         fields="dataio.formats.dataset.sample_fields:classification_fields",
         check="",
         verify="dataio.formats.images.class_verify:verify_labels",
         packing="dataio.formats.images.class_packing:CLASS_PACKING",
         source="dataio.images.image_batches:ClassBatchSource",
         finish="dataio.images.image_finish:ClassFinish",
         options="",
         face="dataio.images.loader:ImageLoader", keyword="", plain=True, reads=("classification", "views"),
         item="dataio.images.image_item:ClassItem",
         facts="dataio.images.image_facts:ImageFacts",
         task="dataio.train.image_task:ImageTask"),
    Kind(name="pairs", layout="images", what="image-text pairs", requires=("image", "caption"),
         rooms=("dataio/pairs", "formats/pairs", "dataio/train/clip_task.py", "dataio/train/clip_loss.py",
                "dataio/train/clip_metrics.py", "dataio/train/pair_loaders.py", "dataio/cli/caption_flags.py",
                "bench/pair_bench.py", "bench/pair_baselines.py"),
         pack="dataio convert images --captions, dataio index", bench="pairs",
         fields="dataio.formats.pairs.pair_fields:declared_pair_fields",
         check="dataio.formats.pairs.pair_table:pair_table_problem",
         verify="dataio.formats.pairs.pair_verify:verify_pairs",
         packing="dataio.formats.pairs.pair_packing:PAIR_PACKING",
         source="dataio.pairs.pair_batches:PairBatchSource",
         finish="dataio.pairs.pair_finish:PairFinish",
         options="dataio.pairs.caption_config:CaptionConfig",
         face="dataio.pairs.loader:PairLoader", keyword="captions", plain=False, reads=("pairs",),
         item="dataio.pairs.pair_item:PairItem",
         facts="dataio.pairs.pair_facts:PairFacts",
         task="dataio.train.clip_task:ClipTask"),
    Kind(name="detection", layout="images", what="images with box targets", requires=("image", "boxes"),
         rooms=("dataio/detection", "formats/coco", "dataio/train/segment_task.py", "dataio/cli/convert_coco.py",
                "bench/detection_bench.py", "bench/detection_baseline.py"),
         pack="dataio convert coco", bench="detection",
         fields="dataio.formats.coco.coco_fields:declared_coco_fields",
         check="",
         verify="dataio.formats.coco.coco_verify:verify_targets",
         packing="",
         source="dataio.detection.detection_batches:DetectionBatchSource",
         finish="dataio.detection.detection_finish:DetectionFinish",
         options="dataio.detection.detection_config:DetectionConfig",
         face="dataio.detection.loader:DetectionLoader", keyword="targets", plain=False, reads=("detection",),
         item="dataio.detection.detection_sample:DetectionItem",
         facts="dataio.detection.detection_facts:DetectionFacts",
         task="dataio.train.segment_task:SegmentTask"),
    Kind(name="tokens", layout="text", what="token documents", requires=("input_ids",),
         rooms=("dataio/text", "formats/text", "dataio/train/text_task.py", "bench/text_bench.py",
                "bench/text_reference.py"),
         pack="dataio convert text", bench="text",
         fields="dataio.formats.dataset.sample_fields:declared_text_fields",
         check="",
         verify="dataio.formats.text.token_verify:verify_tokens",
         packing="",
         source="dataio.text.token_batches:TokenBatchSource",
         finish="dataio.pipeline.device_stage:FieldsFinish",
         options="dataio.text.config:TextLoaderConfig",
         face="dataio.text.loader:TextLoader", keyword="", plain=False, reads=("tokens",),
         item="dataio.text.token_dataset:TokenDataset",
         facts="dataio.text.token_facts:TokenFacts",
         task="dataio.train.text_task:TextTask"),
    Kind(name="views", layout="images", what="images for multi-crop views", requires=("image",),
         rooms=("dataio/views", "formats/views", "bench/views_bench.py", "bench/views_baseline.py",
                "bench/views_transforms.py", "bench/views_profile.py"),
         pack="dataio convert images --kind views", bench="views",
         fields="dataio.formats.views.view_fields:declared_view_fields",
         check="",
         verify="",
         packing="dataio.formats.views.view_packing:VIEW_PACKING",
         source="dataio.views.view_batches:ViewBatchSource",
         finish="dataio.views.view_finish:ViewFinish",
         options="dataio.views.views_config:ViewsConfig",
         face="dataio.views.loader:ViewsLoader", keyword="views", plain=True,
         reads=("classification", "pairs", "detection", "views"),
         item="dataio.images.image_item:ClassItem",
         facts="dataio.images.image_facts:ImageFacts",
         task=""),
)}


def kind_named(name: str) -> Kind:
    """The kind ``name``; a UsageError naming the kinds there are."""
    kind = KINDS.get(name)
    if kind is None:
        raise UsageError(f"{name!r} is not a kind of sample dataio reads ({', '.join(KINDS)})")
    return kind


def kind_problem(manifest: Manifest) -> str | None:
    """Why no reader can read a folder as the kind its manifest declares (or held, for an older folder), or None:
    a kind of another layout (an image folder declared ``tokens``), or one needing a field the manifest does not
    declare (a classification table without labels, a ``pairs`` folder without captions)."""
    name = manifest.declared_kind()
    kind = KINDS[name]
    said = f"sample_kind {name!r}" + (" (inferred: the manifest predates kinds)" if manifest.predates_kinds() else "")
    if kind.layout != manifest.kind:
        return f"{said} is {kind.what}, stored as {kind.layout} shards, but the folder holds {manifest.kind} shards"
    declared = {f.name for f in manifest.sample_fields()}
    missing = [field for field in kind.requires if field not in declared]
    if missing:
        return f"{said} ({kind.what}) needs a {missing[0]!r} field, which the manifest does not declare"
    return None


def kind_of(manifest: Manifest) -> Kind:
    """The kind a folder's manifest declares (or, for an older folder, held: ``Manifest.declared_kind``)."""
    return KINDS[manifest.declared_kind()]
