"""Multi-crop views for self-supervised training: their config, source, device finish, face and map-style item (a kind of sample, ``dataio.formats.kinds``)."""
