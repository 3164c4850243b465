"""One element of the sweep tests: writes a metrics record whose loss is lr x layers to its
run directory (as `hpcjax train` writes its own), so `hpcjax runs --sweep` has a final loss."""

import json
import os
import sys

args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
os.makedirs(args["--run-dir"], exist_ok=True)
with open(os.path.join(args["--run-dir"], "metrics.jsonl"), "w") as out:
    out.write(json.dumps({"step": 1, "loss": round(float(args["--lr"]) * int(args["--layers"]), 6)}) + "\n")
print("trained with", args, flush=True)
