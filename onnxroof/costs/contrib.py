"""Cost functions: contrib."""
