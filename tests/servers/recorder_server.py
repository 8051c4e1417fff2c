"""A raw stdio peer that records every byte it receives and, on request, emits scripted bytes verbatim.

Every line read from stdin is appended as-is (binary) to ``RAW_LOG``. A line containing ``"test/emit"``
makes it write the whole content of ``EMIT_FILE`` to stdout unchanged. A line containing ``"test/exit"``
makes it exit. Nothing else is ever written, so tests see exactly the bytes they scripted.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    raw_log = os.environ["RAW_LOG"]
    emit_file = os.environ.get("EMIT_FILE")
    stdin = sys.stdin.buffer
    stdout = sys.stdout.buffer
    with open(raw_log, "ab", buffering=0) as log:
        for line in stdin:
            log.write(line)
            if b'"test/emit"' in line and emit_file:
                with open(emit_file, "rb") as f:
                    stdout.write(f.read())
                stdout.flush()
            elif b'"test/exit"' in line:
                return


if __name__ == "__main__":
    main()
