"""Tiny YOLO and Pascal VOC folders written from the coloured fixture images, with the boxes they hold in COCO's
frame (xyxy, image pixels) to compare the packed boxes with."""

from __future__ import annotations

import shutil
from pathlib import Path

from PIL import Image

# (cx, cy, w, h) normalised, class: two objects an image
YOLO_OBJECTS = ((0, (0.5, 0.5, 0.5, 0.4)), (2, (0.25, 0.3, 0.2, 0.2)))
YOLO_NAMES = ("cat", "dog", "bird")


def coloured_images(coloured_folder: Path, count: int) -> list[Path]:
    return sorted(coloured_folder.rglob("*.jpg"))[:count]


def write_yolo(root: Path, coloured_folder: Path, split: str = "train", count: int = 4) -> dict[str, list]:
    """A YOLO folder (images/SPLIT, labels/SPLIT, data.yaml); {image path under root: [(class, xyxy)]}."""
    (root / "images" / split).mkdir(parents=True)
    (root / "labels" / split).mkdir(parents=True)
    (root / "data.yaml").write_text("path: .\ntrain: images/train\nnames:\n  0: cat\n  1: dog\n  2: bird\n")
    expected = {}
    for i, source in enumerate(coloured_images(coloured_folder, count)):
        name = f"im{i}.jpg"
        shutil.copy(source, root / "images" / split / name)
        width, height = Image.open(source).size
        lines, boxes = [], []
        for cls, (cx, cy, w, h) in YOLO_OBJECTS[: 1 + i % 2]:
            lines.append(f"{cls} {cx} {cy} {w} {h}")
            boxes.append((cls, [(cx - w / 2) * width, (cy - h / 2) * height, (cx + w / 2) * width,
                                (cy + h / 2) * height]))
        (root / "labels" / split / f"im{i}.txt").write_text("\n".join(lines) + "\n")
        expected[f"images/{split}/{name}"] = boxes
    return expected


VOC_XML = """<annotation>
  <folder>VOC2012</folder><filename>{id}.jpg</filename>
  <size><width>{w}</width><height>{h}</height><depth>3</depth></size>
{objects}</annotation>
"""
VOC_OBJECT = ("  <object><name>{name}</name><pose>Left</pose><truncated>0</truncated><difficult>{difficult}"
              "</difficult><bndbox><xmin>{b[0]}</xmin><ymin>{b[1]}</ymin><xmax>{b[2]}</xmax><ymax>{b[3]}</ymax>"
              "</bndbox></object>\n")


def write_voc(root: Path, coloured_folder: Path, count: int = 4) -> dict[str, list]:
    """A VOC folder (JPEGImages, Annotations, ImageSets/Main/{train,val,trainval}.txt: even ids train, odd val);
    {image path under root: [(name, xyxy in COCO's frame, difficult)]}."""
    for folder in ("JPEGImages", "Annotations", "ImageSets/Main"):
        (root / folder).mkdir(parents=True)
    expected, ids = {}, []
    for i, source in enumerate(coloured_images(coloured_folder, count)):
        image_id = f"2008_{i:06d}"
        ids.append(image_id)
        shutil.copy(source, root / "JPEGImages" / f"{image_id}.jpg")
        width, height = Image.open(source).size
        objects = [("dog", (1, 1, width, height), 0), ("person", (10, 20, 60, 90), i % 2)]
        (root / "Annotations" / f"{image_id}.xml").write_text(VOC_XML.format(
            id=image_id, w=width, h=height, objects="".join(VOC_OBJECT.format(name=n, b=b, difficult=d)
                                                            for n, b, d in objects)))
        expected[f"JPEGImages/{image_id}.jpg"] = [(n, [b[0] - 1, b[1] - 1, b[2], b[3]], bool(d)) for n, b, d in objects]
    (root / "ImageSets/Main/train.txt").write_text("".join(f"{x}\n" for x in ids[0::2]))
    (root / "ImageSets/Main/val.txt").write_text("".join(f"{x}\n" for x in ids[1::2]))
    (root / "ImageSets/Main/trainval.txt").write_text("".join(f"{x}\n" for x in ids))
    return expected
