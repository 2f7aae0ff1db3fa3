"""What both loaders' mixtures share: weights and their schedule, the exact blend, each source's passes."""
