"""Image-text pairs packed (``dataio convert images --captions``, ``dataio index`` of img2dataset tars): their
declared fields and table checks, the caption sources and the captions' token ids, and synthetic pairs."""
