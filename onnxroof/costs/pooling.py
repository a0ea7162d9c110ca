"""Cost functions: pooling."""
