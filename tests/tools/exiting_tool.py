"""Fixture: ends the way a script ends in an interpreter, with a non-daemon thread still
running and an `atexit` function registered, then `sys.exit(3)`. Each step says so on stderr."""

import atexit
import sys
import threading
import time


def late() -> None:
    time.sleep(0.3)
    print("thread finished", file=sys.stderr, flush=True)


atexit.register(lambda: print("atexit ran", file=sys.stderr, flush=True))
threading.Thread(target=late).start()
print("main done", file=sys.stderr, flush=True)
sys.exit(3)
