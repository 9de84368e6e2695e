"""Runs a notebook top to bottom with nbclient in a temporary folder; fails (exit 1) on a cell error or when
the committed notebook holds outputs. ctest's python/notebook runs examples/notebooks/induction.ipynb."""
import os
import sys
import tempfile
import time

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
with_outputs = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
if with_outputs:
    sys.exit(f"{path}: cells {with_outputs} hold outputs; commit the notebook without them "
             "(jupyter nbconvert --clear-output --inplace)")
os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # the kernel's debugger note on frozen modules
start = time.time()
with tempfile.TemporaryDirectory() as work:
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": work}})
    try:
        client.execute()
    except CellExecutionError as e:
        sys.exit(f"{path}: a cell failed:\n{e}")
for cell in nb.cells:  # what the cells printed, for the test's log
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            print(out["text"], end="")
print(f"{path}: {len(nb.cells)} cells ran in {time.time() - start:.1f} s")
