"""Cost functions: elementwise."""
