"""Cost functions: matmul."""
