"""What the same-run A/B scripts (llvm_ab.py, attention_llvm_ab.py, fp8_ab.py) write: their records with the GPU, the
date and the commit (COMMIT in the environment, as scripts/gpu_check.sh passes it; "unknown" without it: the device's
own git copy can lag behind the tree it runs, so it is not asked), as JSON."""

import json
import os
import time


def write(path, **fields) -> dict:
    """The document of ``fields`` plus gpu, date and commit; written to ``path`` when it is given."""
    from numba import cuda

    name = cuda.get_current_device().name
    doc = dict(gpu=name.decode() if isinstance(name, bytes) else str(name),
               date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), commit=os.environ.get("COMMIT", "unknown"),
               **fields)
    if path:
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
    return doc
