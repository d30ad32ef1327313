// Linux's epoll, which Glibc's Swift module does not include: feedsync-bench's w10 multiplexes thousands of event
// streams with one epoll instance.
#include <sys/epoll.h>
