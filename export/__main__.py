"""`python -m export {torchscript,onnx,ct2} MODEL_DIR OUT_DIR`."""
from export.cli import main

raise SystemExit(main())
