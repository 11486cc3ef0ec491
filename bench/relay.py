#!/usr/bin/env python3
"""A link with latency for git's `ext::` transport (bench/remote.py):

    ext::python3 -S bench/relay.py <round trip in seconds> %S <repository>

Sleeps one round trip (connection set-up), starts the service (`git-upload-pack` or
`git-receive-pack` on the repository), and forwards every chunk of both directions half a
round trip late: a pipe with a one-way delay that keeps order and throughput. Standard library
only, small imports (`python -S` starts in about 15 ms).
"""

import collections
import os
import subprocess
import sys
import threading
import time


def relay(delay, cmd):
    """Run `cmd` (git-upload-pack or git-receive-pack) behind a link with `delay` round trip."""
    time.sleep(delay)  # connection set-up
    child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert child.stdin is not None and child.stdout is not None
    half = delay / 2

    def pump(src, dst, close):
        queue = collections.deque()
        cv = threading.Condition()
        finished = [False]

        def writer():
            while True:
                with cv:
                    while not queue and not finished[0]:
                        cv.wait()
                    if not queue:
                        break
                    at, data = queue.popleft()
                if at > time.monotonic():
                    time.sleep(at - time.monotonic())
                try:
                    os.write(dst, data)
                except OSError:
                    break
            close()

        thread = threading.Thread(target=writer)
        thread.start()
        while True:
            data = os.read(src, 65536)
            with cv:
                if not data:
                    finished[0] = True
                    cv.notify()
                    break
                queue.append((time.monotonic() + half, data))
                cv.notify()
        thread.join()

    up = threading.Thread(target=pump, args=(0, child.stdin.fileno(), child.stdin.close), daemon=True)
    down = threading.Thread(target=pump, args=(child.stdout.fileno(), 1, lambda: os.close(1)))
    up.start()
    down.start()
    down.join()
    return child.wait()


if __name__ == "__main__":
    sys.exit(relay(float(sys.argv[1]), sys.argv[2:]))
