"""Cost functions: recurrent."""
