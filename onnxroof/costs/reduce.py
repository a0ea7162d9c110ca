"""Cost functions: reduce."""
