"""COCO detection and segmentation data (``dataio convert coco``): the instances JSON parsed defensively, each
annotation checked, boxes and masks carried through the image's preparation, and their declared fields."""
