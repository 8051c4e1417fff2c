"""Print this process's arguments (after the script) and working directory as one JSON line, then exit."""

import json
import os
import sys

print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd()}))
