// Linux's perf_event_open(2), which has no libc wrapper (and Swift cannot call the variadic syscall(2)):
// feedsync-bench counts its own instructions per operation where the machine has hardware counters.
#include <linux/perf_event.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/// Opens a counter of the instructions retired in user space by the calling thread and by every thread it or they
/// create from now on (`inherit`), counting at once. Returns the counter's file descriptor (read 8 bytes: the count
/// so far, the inherited threads' included), or -1 with errno set: ENOENT or EOPNOTSUPP where the CPU or the virtual
/// machine exposes no hardware counters, EACCES or EPERM where perf_event_paranoid forbids it.
static inline int feedsync_open_instruction_counter(void) {
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.type = PERF_TYPE_HARDWARE;
    attr.size = sizeof attr;
    attr.config = PERF_COUNT_HW_INSTRUCTIONS;
    attr.inherit = 1;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    return (int)syscall(SYS_perf_event_open, &attr, 0 /* this process */, -1 /* any CPU */, -1 /* no group */,
                        PERF_FLAG_FD_CLOEXEC);
}
