"""Cost functions: normalization."""
