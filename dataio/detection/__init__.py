"""Images with box and mask targets: their config, source, device finish, face and map-style item (a kind of sample, ``dataio.formats.kinds``)."""
