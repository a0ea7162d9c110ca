"""``python -m onnxroof`` runs the command line."""

from onnxroof.cli import main

raise SystemExit(main())
