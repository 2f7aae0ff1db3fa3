"""The JPEG codec in C (``_jpeg_codec``): libjpeg-turbo decoding with errors for damaged data, the
packer's lossless restart-marker rewrite, and the reader's region decode and splicing."""
