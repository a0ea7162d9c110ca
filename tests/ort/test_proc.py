"""The machine's readings from Linux's /proc files, from texts as the kernel writes them."""

from onnxroof.ort.proc import CpuTicks, cpu_fields, cpu_ticks, memory_available

# /proc/stat of a 2-core guest: user nice system idle iowait irq softirq steal guest guest_nice per line.
STAT = """cpu  100 5 40 900 30 2 3 20 0 0
cpu0 50 2 20 450 15 1 2 10 0 0
cpu1 50 3 20 450 15 1 1 10 0 0
intr 12345 0 0
ctxt 678
"""


def test_cpu_ticks_sum_the_first_line_and_count_the_cores():
    # total: 100 + 5 + 40 + 900 + 30 + 2 + 3 + 20 = 1100 (guest time is already in user);
    # busy: all but idle (900) and iowait (30) = 100 + 5 + 40 + 2 + 3 + 20 = 170; steal 20; two cpuN lines.
    assert cpu_ticks(STAT) == CpuTicks(total=1100, busy=170, stolen=20, cpus=2)


def test_an_old_kernels_short_line_counts_the_missing_fields_as_zero():
    # Before Linux 2.6.11 the line ends at softirq: no steal. total 10 + 0 + 5 + 80 + 1 + 2 + 2 = 100, busy 19.
    assert cpu_ticks("cpu 10 0 5 80 1 2 2\ncpu0 10 0 5 80 1 2 2\n") == CpuTicks(100, 19, 0, 1)


def test_a_text_that_is_not_proc_stat_reads_as_none():
    assert cpu_ticks("") is None
    assert cpu_ticks("intr 1 2 3\n") is None
    assert cpu_ticks("cpu  a b c\n") is None


def test_memory_available_is_in_kernel_kilobytes_of_1024_bytes():
    meminfo = "MemTotal:       16384000 kB\nMemFree:         1000000 kB\nMemAvailable:    8000000 kB\n"
    assert memory_available(meminfo) == 8000000 * 1024
    assert memory_available("MemTotal:       16384000 kB\n") is None  # kernels before 3.14 have no MemAvailable


def test_cpu_fields_are_the_first_processors_by_lower_case_name():
    cpuinfo = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: sse avx2\n\nprocessor\t: 1\nmodel name\t: B\n"
    fields = cpu_fields(cpuinfo)
    assert (fields["processor"], fields["model name"], fields["flags"]) == ("0", "AMD EPYC 7B13", "sse avx2")
    assert cpu_fields("") == {}
