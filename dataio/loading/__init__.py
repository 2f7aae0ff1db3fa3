"""What both loaders share: the error policy for bad samples and the side-stream copy to the device."""
