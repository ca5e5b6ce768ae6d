"""``cpu_devices(n)``: a block run with ``n`` in-process CPU devices, the previous count restored afterwards."""
import contextlib

from flfun.distributed.devices import local_devices, set_cpu_device_count


@contextlib.contextmanager
def cpu_devices(n: int):
    """Run the block with exactly ``n`` CPU devices (yielded as a list); restore the count it had before."""
    before = len(local_devices("numpy"))
    try:
        yield set_cpu_device_count(n)
    finally:
        set_cpu_device_count(before)
