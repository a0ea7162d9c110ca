"""Cost functions: movement."""
