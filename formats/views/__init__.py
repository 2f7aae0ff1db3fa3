"""Images packed for multi-crop views (``dataio convert images --kind views``, DINO-style self-supervision): every
image of a source, without classes, and its declared fields."""
