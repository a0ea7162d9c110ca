"""Cost functions: control."""
