"""user47: a dataio.DataLoader over a user's sampler=, each pass against torch's DataLoader over the same sampler."""
