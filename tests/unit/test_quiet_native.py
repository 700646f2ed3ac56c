"""llama.cpp's output silenced from two threads at once leaves the process's stdout as it was."""

from __future__ import annotations

import os
import sys
import threading
import time

from collective.models.batch_engine import quiet_native


def test_two_threads_silencing_at_once_leave_stdout_and_its_descriptor_as_they_were() -> None:
    # An eval's arms made their in-process contexts together: llama-cpp-python's swap of stdout
    # in one thread put back the other's null device, and `collective ask --json` printed
    # nothing, exit code 0.
    before, descriptor = sys.stdout, os.fstat(1)
    inside, first_done = threading.Event(), threading.Event()

    def first() -> None:
        with quiet_native():
            inside.set()
            time.sleep(0.3)  # room for the second to come in, had nothing held it back
        first_done.set()

    def second() -> None:
        inside.wait(10)
        with quiet_native():
            first_done.wait(10)  # leaves after the first: it puts back what it found

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sys.stdout is before
    after = os.fstat(1)
    assert (after.st_dev, after.st_ino) == (descriptor.st_dev, descriptor.st_ino)
