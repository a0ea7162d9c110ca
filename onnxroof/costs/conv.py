"""Cost functions: conv."""
