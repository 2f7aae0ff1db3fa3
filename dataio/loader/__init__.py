"""What a loader is to torch and the frameworks: DataLoader's keywords, the sampler views, Lightning's and
Accelerate's hooks."""
